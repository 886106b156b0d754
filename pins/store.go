package pins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/internal/filelock"
	"github.com/bir-dev/bir-proxy/internal/statedir"
)

// File is one server's pins, as the store keeps them: what the user approved
// (Pinned), and what a proxy saw last (Seen), so that `bir-proxy pins` shows a drift as
// soon as one proxy has met it.
type File struct {
	Version  int            `json:"bir-pins"`
	Server   string         `json:"server"`
	PinnedAt time.Time      `json:"pinnedAt"`
	Pinned   map[string]Def `json:"pinned"`
	Seen     *Listing       `json:"seen,omitempty"`
}

// Listing is one tools/list of a server, every page of it when Complete.
type Listing struct {
	At       time.Time `json:"at"`
	Complete bool      `json:"complete"`
	Tools    []Def     `json:"tools"`
}

// version is the store's format; a file of another is refused, never overwritten.
const version = 1

// maxFile bounds a pin file read: MaxTools definitions with their members, and the
// definitions kept whole.
const maxFile = 64 << 20

// Store is the pin files under a state folder: pins/SERVER.json, the folder 0700 and
// the files 0600, each written whole (a temporary file renamed over it) under a lock
// beside it, so concurrent proxies of one server leave one valid file.
type Store struct{ dir string }

// Open is the store under stateDir (statedir.Dir).
func Open(stateDir string) Store { return Store{dir: filepath.Join(stateDir, "pins")} }

// Dir is the store's folder.
func (s Store) Dir() string { return s.dir }

func (s Store) path(server string) string {
	return filepath.Join(s.dir, statedir.FileName(server)+".json")
}

// ErrNoPins is Load's error for a server with no pin file.
var ErrNoPins = errors.New("no pins")

// Load reads a server's pins.
func (s Store) Load(server string) (*File, error) {
	f, _, err := s.load(server)
	return f, err
}

// Stamp is what changes when a server's pin file is written again (each write is a
// new file renamed over it): a running proxy reloads its pins when it changed (`pins
// approve` in another process). Nil when there is no file.
func (s Store) Stamp(server string) fs.FileInfo {
	st, err := os.Lstat(s.path(server))
	if err != nil {
		return nil
	}
	return st
}

// sameStamp says two stamps are of one write of the file.
func sameStamp(a, b fs.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}

// Approve makes what a proxy saw last the pins of the named tools (every drifted
// one when names is empty): a changed or new tool is pinned as seen, a removed one
// unpinned, a renamed one pinned under its new name and unpinned under its old.
// It says which tools it approved.
func Approve(s Store, server string, names []string) error {
	_, err := ApproveTools(s, server, names)
	return err
}

// ApproveTools is Approve, saying which tools it approved.
func ApproveTools(s Store, server string, names []string) ([]string, error) {
	var done []string
	err := s.Update(server, func(f *File) bool {
		if f.Seen == nil {
			return false
		}
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		for _, st := range Compare(f.Pinned, f.Seen.Tools, f.Seen.Complete) {
			if st.Status == StatusPinned || len(want) > 0 && !want[st.Name] && !want[st.From] {
				continue
			}
			switch st.Status {
			case StatusRemoved:
				delete(f.Pinned, st.Name)
			case StatusRenamed:
				delete(f.Pinned, st.From)
				fallthrough
			default:
				for _, d := range f.Seen.Tools {
					if d.Name == st.Name {
						f.Pinned[d.Name] = d
					}
				}
			}
			done = append(done, st.Name)
		}
		return len(done) > 0
	})
	if errors.Is(err, ErrNoPins) {
		return nil, err
	}
	return done, err
}

func (s Store) load(server string) (*File, []byte, error) {
	p := s.path(server)
	st, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, ErrNoPins
	}
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file; refusing it", p)
	}
	fh, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxFile+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxFile {
		return nil, nil, fmt.Errorf("%s is over %d MiB; `bir-proxy pins reset` starts it again", p, maxFile>>20)
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("%s is not a pin file (%v); `bir-proxy pins reset` starts it again", p, err)
	}
	if f.Version != version {
		return nil, nil, fmt.Errorf("%s is of format %d, not %d", p, f.Version, version)
	}
	if f.Pinned == nil {
		f.Pinned = map[string]Def{}
	}
	return &f, data, nil
}

// lockWait bounds the wait for another proxy's write of the same file.
const lockWait = 5 * time.Second

// Update changes a server's pins under the lock: change is given the file (a new one
// when there is none, Pinned empty and Version 0) and says whether to write it.
func (s Store) Update(server string, change func(f *File) bool) error {
	if err := s.ensureDir(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	lock, err := filelock.Wait(ctx, s.path(server)+".lock")
	if err != nil {
		return fmt.Errorf("lock the pins of %q: %w", server, err)
	}
	defer lock.Close()
	f, _, err := s.load(server)
	switch {
	case errors.Is(err, ErrNoPins):
		f = &File{Server: server, Pinned: map[string]Def{}}
	case err != nil:
		return err
	}
	if !change(f) {
		return nil
	}
	f.Version, f.Server = version, server
	return s.write(server, f)
}

// Reset removes a server's pins: its next listing pins its tools again.
func (s Store) Reset(server string) error {
	err := os.Remove(s.path(server))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNoPins
	}
	os.Remove(s.path(server) + ".lock")
	return err
}

// Servers lists the servers with pin files, by name.
func (s Store) Servers() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || !e.Type().IsRegular() {
			continue
		}
		f, err := s.loadPath(filepath.Join(s.dir, name))
		if err == nil && f.Server != "" && statedir.FileName(f.Server)+".json" == name {
			out = append(out, f.Server)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (s Store) loadPath(p string) (*File, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var f File
	return &f, json.Unmarshal(data, &f)
}

// ensureDir makes the store's folder, 0700, refusing one that is a link.
func (s Store) ensureDir() error {
	if err := os.MkdirAll(filepath.Dir(s.dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(s.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	st, err := os.Lstat(s.dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder; refusing it", s.dir)
	}
	if st.Mode().Perm()&0o077 != 0 {
		// A folder of ours made looser by hand: pins say what a model may be shown.
		if err := os.Chmod(s.dir, 0o700); err != nil {
			return fmt.Errorf("%s is readable by others and cannot be made private: %w", s.dir, err)
		}
	}
	return nil
}

// write writes f whole: a temporary file (0600) renamed over the pin file.
func (s Store) write(server string, f *File) error {
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, ".pins-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path(server))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	filelock.SyncDir(s.dir)
	return nil
}
