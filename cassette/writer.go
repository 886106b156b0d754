package cassette

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Bounds by default, as the journal's: a proxy left on all day must not fill the disk.
const (
	DefaultMaxBytes   = 64 << 20
	DefaultKeep       = 3
	DefaultQueueBytes = 64 << 20
)

// Rotated is the name of the n-th older file of the cassette at path (1 the most
// recent).
func Rotated(path string, n int) string { return path + "." + strconv.Itoa(n) }

// WriterOptions configure a Writer.
type WriterOptions struct {
	Path string
	// Header's Server, Command and URL are written as given (the caller redacts them);
	// the rest is learnt from the session.
	Header Header
	// MaxBytes: past it the file is rotated (PATH.1, ...; each file starts with the
	// header again). Keep older files are kept. QueueBytes bounds what waits for the
	// disk; past it calls are dropped, and counted.
	MaxBytes   int64
	Keep       int
	QueueBytes int64
	Logger     *slog.Logger
}

// Writer records a session into a cassette. Its methods other than Close run on one
// goroutine (the proxy's bookkeeping) and never wait: they copy what they keep and
// queue it; a goroutine of the Writer's own writes the file.
type Writer struct {
	o   WriterOptions
	log *slog.Logger

	// Owned by the calling goroutine.
	h          Header
	toolIdx    map[string]int // tool name → index in tools
	tools      [][]byte
	headerDone bool
	seq        int64

	mu      sync.Mutex
	queue   [][]byte
	qbytes  int64
	closed  bool
	wake    chan struct{}
	done    chan struct{}
	dropped atomic.Int64
	written atomic.Int64

	// Owned by the writing goroutine.
	f      *os.File
	size   int64
	header []byte
}

// Create makes the cassette's folder (0700) and opens its file (0600). An older
// cassette at the path is rotated away first: each run records its own.
func Create(o WriterOptions) (*Writer, error) {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = DefaultQueueBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	w := &Writer{o: o, log: o.Logger, h: o.Header, toolIdx: map[string]int{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	w.h.Version = Version
	w.h.Era = EraUnknown
	if err := privateDir(filepath.Dir(o.Path)); err != nil {
		return nil, fmt.Errorf("create the cassette's folder: %w", err)
	}
	if st, err := os.Stat(o.Path); err == nil && st.Size() > 0 {
		w.shift()
	}
	if err := w.open(); err != nil {
		return nil, err
	}
	go w.run()
	return w, nil
}

func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 && dir != os.TempDir() {
		// Ours to tighten only when we made it or it is the user's: a shared folder
		// (/tmp) keeps its mode, and the file's 0600 is what protects the cassette.
		if st.Mode()&fs.ModeSticky == 0 {
			return os.Chmod(dir, 0o700)
		}
	}
	return nil
}

func (w *Writer) open() error {
	f, err := os.OpenFile(w.o.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("open the cassette: %w", err)
	}
	if runtime.GOOS != "windows" {
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return fmt.Errorf("open the cassette: %w", err)
		}
	}
	w.f, w.size = f, 0
	return nil
}

// shift moves PATH to PATH.1 (PATH.1 to PATH.2, ..., dropping the Keep-th).
func (w *Writer) shift() {
	p := w.o.Path
	if err := os.Remove(Rotated(p, w.o.Keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.log.Warn("cannot remove the oldest cassette file", "err", err)
	}
	for n := w.o.Keep - 1; n >= 1; n-- {
		if err := os.Rename(Rotated(p, n), Rotated(p, n+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.log.Warn("cannot rotate the cassette", "err", err)
		}
	}
	if err := os.Rename(p, Rotated(p, 1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.log.Warn("cannot rotate the cassette", "err", err)
	}
}

// SetHeader replaces what the header says by h (its Version and Era aside when
// unset): for a cassette rewritten rather than recorded. It must come before the first
// Call.
func (w *Writer) SetHeader(h Header) {
	w.h = h
	w.h.Version = Version
	if w.h.Era == "" {
		w.h.Era = EraUnknown
	}
	w.tools, w.toolIdx = nil, map[string]int{}
	w.headerDone = false
}

// HostRequest is told the params of a host request of the handshake ("initialize",
// "server/discover"), of a "notifications/initialized" (params may be nil), and of
// each "tools/call" (for the stateless era's _meta). params is only read during the call.
func (w *Writer) HostRequest(method string, params []byte) {
	if w.headerDone {
		return
	}
	switch method {
	case "initialize":
		if w.h.Initialize == nil && jsonlex.Valid(params) {
			w.h.Initialize = bytes.Clone(params)
			w.h.Era = EraSession
		}
	case "notifications/initialized":
		w.h.Initialized = w.h.Initialize != nil
	default:
		if w.h.Initialize != nil || w.h.Meta != nil {
			return
		}
		meta := jsonlex.Get(params, "_meta")
		v := jsonlex.Get(meta, "io.modelcontextprotocol/protocolVersion")
		if v != nil && jsonlex.Valid(meta) {
			w.h.Meta = bytes.Clone(meta)
			w.h.Era = EraStateless
			w.h.ProtocolVersion = jsonlex.StringOf(v)
		}
	}
}

// ServerResult is told the server's result to a handshake request of the host's:
// "initialize", "server/discover", "tools/list".
func (w *Writer) ServerResult(method string, result []byte) {
	if w.headerDone || !jsonlex.Valid(result) {
		return
	}
	switch method {
	case "initialize":
		if w.h.InitializeResult == nil {
			w.h.InitializeResult = bytes.Clone(result)
			// The host sends notifications/initialized next (the proxy's bookkeeping
			// does not look at notifications).
			w.h.Initialized = w.h.Initialize != nil
			w.h.ProtocolVersion = jsonlex.StringOf(jsonlex.Get(result, "protocolVersion"))
		}
	case "server/discover":
		if w.h.DiscoverResult == nil {
			w.h.DiscoverResult = bytes.Clone(result)
		}
	case "tools/list":
		jsonlex.EachElement(jsonlex.Get(result, "tools"), func(t []byte) {
			name := jsonlex.StringOf(jsonlex.Get(t, "name"))
			if i, ok := w.toolIdx[name]; ok {
				w.tools[i] = bytes.Clone(t)
				return
			}
			w.toolIdx[name] = len(w.tools)
			w.tools = append(w.tools, bytes.Clone(t))
		})
	}
}

// Recorded is one tools/call for Call; its byte slices are only read during Call.
type Recorded struct {
	Tool         string
	Arguments    []byte
	Redacted     bool
	RedactedKeys []string
	Outcome      string
	Result       []byte
	Error        []byte
	StartedAt    time.Time
	Duration     time.Duration
}

// Call records one tools/call. It never waits: past the queue's bound the call is
// dropped and counted.
func (w *Writer) Call(r Recorded) {
	if !w.headerDone {
		w.headerDone = true
		w.push(appendHeader(nil, w.finalHeader()), true)
	}
	w.seq++
	size := int64(len(r.Arguments) + len(r.Result) + len(r.Error) + 256)
	if w.full(size) {
		w.dropped.Add(1)
		return
	}
	c := Call{Seq: w.seq, Tool: r.Tool, Arguments: r.Arguments, Redacted: r.Redacted, RedactedKeys: r.RedactedKeys,
		Outcome: r.Outcome, Result: r.Result, Error: r.Error, StartedAt: r.StartedAt,
		DurationMs: float64(r.Duration.Microseconds()) / 1000}
	// Encoded here, into a fresh buffer the queue owns: the views die with this call.
	// Their validity is the writing goroutine's to check.
	w.push(appendCall(make([]byte, 0, size), &c), false)
}

func (w *Writer) finalHeader() *Header {
	h := w.h
	if len(w.tools) > 0 {
		var b []byte
		b = append(b, '[')
		for i, t := range w.tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, t...)
		}
		h.Tools = append(b, ']')
	}
	if h.RecordedAt.IsZero() {
		h.RecordedAt = time.Now()
	}
	return &h
}

func (w *Writer) full(size int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed || w.qbytes+size > w.o.QueueBytes
}

func (w *Writer) push(line []byte, header bool) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	if header {
		line = append([]byte{0}, line...) // marked for the writer, which keeps it for rotations
	}
	w.queue = append(w.queue, line)
	w.qbytes += int64(len(line))
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Dropped is how many calls were not recorded (the queue was full, or a value was
// not whole JSON).
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Close writes what is queued, the header if no call came, and the end line, and
// closes the file.
func (w *Writer) Close() error {
	if !w.headerDone {
		w.headerDone = true
		w.push(appendHeader(nil, w.finalHeader()), true)
	}
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
	end := End{End: true, Calls: w.written.Load(), Dropped: w.dropped.Load()}
	line := appendEnd(nil, &end)
	_, err := w.f.Write(line)
	if err2 := w.f.Close(); err == nil {
		err = err2
	}
	if end.Dropped > 0 {
		w.log.Warn("the cassette misses calls", "path", w.o.Path, "dropped", end.Dropped)
	}
	if err != nil {
		return fmt.Errorf("close the cassette: %w", err)
	}
	return nil
}

func (w *Writer) run() {
	defer close(w.done)
	var batch [][]byte
	for {
		w.mu.Lock()
		batch, w.queue = w.queue, batch[:0]
		w.qbytes = 0
		closed := w.closed
		w.mu.Unlock()
		for i, line := range batch {
			w.write(line)
			batch[i] = nil
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-w.wake
		}
	}
}

// write writes one line, rotating first when it would take the file past MaxBytes.
func (w *Writer) write(line []byte) {
	if len(line) > 0 && line[0] == 0 {
		w.header = line[1:]
		line = w.header
	} else {
		// A call's raw values are checked here, off the host's path: a line that is
		// not whole JSON would make the cassette unreadable.
		if !jsonlex.Valid(line[:len(line)-1]) {
			w.dropped.Add(1)
			w.log.Warn("a call was not recorded in the cassette: its arguments or result are not whole JSON")
			return
		}
		if w.size > int64(len(w.header)) && w.size+int64(len(line)) > w.o.MaxBytes {
			w.rotate()
		}
	}
	if _, err := w.f.Write(line); err != nil {
		w.dropped.Add(1)
		w.log.Warn("cannot write the cassette", "err", err)
		return
	}
	w.size += int64(len(line))
	if line[0] == '{' && !bytes.HasPrefix(line, []byte(`{"bir-cassette"`)) {
		w.written.Add(1)
	}
}

func (w *Writer) rotate() {
	end := appendEnd(nil, &End{End: true, Calls: w.written.Load(), Dropped: w.dropped.Load()})
	w.f.Write(end)
	w.f.Close()
	w.shift()
	if err := w.open(); err != nil {
		w.log.Warn("cannot start a new cassette file", "err", err)
		// Nothing left to write to: open a null sink so the rest is counted dropped.
		w.f, _ = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		return
	}
	w.written.Store(0)
	if _, err := w.f.Write(w.header); err == nil {
		w.size = int64(len(w.header))
	}
}
