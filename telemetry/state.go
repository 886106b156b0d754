package telemetry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// State is what a proxy's exporter says of itself in its state file, for `bir-proxy
// status` (which reads files, not running proxies): written while spans are being
// dropped, at most every StateEvery, and once at exit.
type State struct {
	Server    string    `json:"server"`
	PID       int       `json:"pid"`
	Running   bool      `json:"running"` // false: written at exit
	Written   time.Time `json:"written"`
	Exported  uint64    `json:"exported"`
	Dropped   uint64    `json:"dropped"`
	Rejected  uint64    `json:"rejected"`
	LastError string    `json:"lastError,omitempty"`
	LastAt    time.Time `json:"lastErrorAt,omitzero"`
}

// StateEvery is the least time between two writes of a running exporter's state.
const StateEvery = 2 * time.Second

// Caps on reading the state files: they are the proxy's own, but a directory
// holding anything must not make status slow or big.
const (
	maxStateFile  = 4 << 10
	maxStateFiles = 256
	maxStateError = 512
)

// StateSuffix ends the name of a state file.
const StateSuffix = ".otel.json"

// WriteState replaces the file at path with st, atomically (a reader sees the old
// state or the new one) and readable by the user only; its directory is made when
// missing.
func WriteState(path string, st State) error {
	if len(st.LastError) > maxStateError {
		st.LastError = st.LastError[:maxStateError]
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encoding the OpenTelemetry state: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making the OpenTelemetry state directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".otel-*.tmp")
	if err != nil {
		return fmt.Errorf("writing the OpenTelemetry state: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the OpenTelemetry state %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the OpenTelemetry state %s: %w", path, err)
	}
	return nil
}

// ReadStates reads the state files in dir (none when it does not exist), at most
// maxStateFiles of them, by server name; a file that cannot be read or is not a
// state is left out.
func ReadStates(dir string) ([]State, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the OpenTelemetry state directory: %w", err)
	}
	var out []State
	for _, de := range des {
		if len(out) == maxStateFiles {
			break
		}
		if !de.Type().IsRegular() || !strings.HasSuffix(de.Name(), StateSuffix) {
			continue
		}
		if st, ok := readState(filepath.Join(dir, de.Name())); ok {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b State) int { return strings.Compare(a.Server, b.Server) })
	return out, nil
}

func readState(path string) (State, bool) {
	f, err := os.Open(path)
	if err != nil {
		return State{}, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil || len(b) > maxStateFile {
		return State{}, false
	}
	var st State
	if json.Unmarshal(b, &st) != nil || st.Written.IsZero() {
		return State{}, false
	}
	return st, true
}
