package cassette

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/filelock"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Bounds by default, as the journal's: a proxy left on all day must not fill the disk.
const (
	DefaultMaxBytes   = 64 << 20
	DefaultKeep       = 3
	DefaultQueueBytes = 64 << 20
	// DefaultMaxCallBytes bounds what is kept of one call (its arguments, result and
	// error): a call past it is recorded without them, as too large (Call.TooLarge).
	DefaultMaxCallBytes = 64 << 20
	// MaxHeaderTools bounds the tools the header keeps (the tools/list pages before
	// the first call): every page was kept, and 100 pages of 4 MB made a 400 MB header
	// line (2 GB of memory). A tool past it is left out of the header, and said once.
	MaxHeaderTools = 8 << 20
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
	// MaxCallBytes bounds what is kept of one call, its arguments, result and error
	// together (at most QueueBytes): a call past it is recorded without them, as too
	// large (Call.TooLarge), and said on stderr.
	MaxCallBytes int64
	Logger       *slog.Logger
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
	toolBytes  int // of tools
	toolsLeft  int // tools left out: past MaxHeaderTools
	headerDone bool
	seq        int64
	tooLarge   int64 // calls recorded too large

	mu      sync.Mutex
	queue   []qline
	qbytes  int64
	closed  bool
	wake    chan struct{}
	done    chan struct{}
	dropped atomic.Int64
	written atomic.Int64

	// Owned by the writing goroutine.
	f      *os.File // nil until the first call is written: a run with no call writes nothing
	lock   *os.File // PATH.lock's, held while f is written
	path   string   // the file written: o.Path, or one beside it (Beside) another proxy did not hold
	size   int64    // of f, up to its last whole line
	header []byte
	gaveUp bool // the file could not be started: every call is dropped
	failed bool // a write failed: said once
}

// qline is a queued line; the header's is kept for the files that start later.
type qline struct {
	b      []byte
	header bool
}

// Create makes the cassette's folder (0700). The file (0600) is started by the first
// call: a run with no call (a host that only lists tools, a reconnect) writes nothing
// and rotates nothing away. An older cassette at the path that has calls is then
// rotated away (PATH.1, ...): each run records its own; one without calls is replaced.
// A symbolic link at the path is refused, never followed. When another proxy is
// recording to the path, the calls go to a file beside it (Beside).
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
	if o.MaxCallBytes <= 0 {
		o.MaxCallBytes = DefaultMaxCallBytes
	}
	// A call past the queue's bound could never be queued: it is too large as well.
	o.MaxCallBytes = min(o.MaxCallBytes, o.QueueBytes)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	w := &Writer{o: o, log: o.Logger, h: o.Header, toolIdx: map[string]int{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	w.h.Version = Version
	w.h.Era = EraUnknown
	if err := privateDir(filepath.Dir(o.Path)); err != nil {
		return nil, fmt.Errorf("the cassette's folder: %w", err)
	}
	if err := checkPath(o.Path); err != nil {
		return nil, err
	}
	go w.run()
	return w, nil
}

// checkPath refuses what is at path unless it is nothing or a regular file of the
// user's: a symbolic link was followed (the proxy wrote, truncated and chmodded its
// target), a FIFO would block the writer.
func checkPath(path string) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("the cassette: %w", err)
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("the cassette's path %s is a symbolic link: refused, links are not followed (give the path of a file)", path)
	case !st.Mode().IsRegular():
		return fmt.Errorf("the cassette's path %s is not a regular file (%v): refused", path, st.Mode().Type())
	}
	if owner, ok := fileOwner(st); ok && owner != os.Getuid() {
		return fmt.Errorf("the cassette %s is owned by uid %d, not by you (uid %d): refused", path, owner, os.Getuid())
	}
	return nil
}

// Beside is the n-th file beside path (n from 2) that a proxy records to while
// another proxy holds path: NAME-n.EXT.
func Beside(path string, n int) string {
	ext := filepath.Ext(path)
	if strings.ContainsRune(ext, filepath.Separator) || ext == path {
		ext = ""
	}
	return strings.TrimSuffix(path, ext) + "-" + strconv.Itoa(n) + ext
}

// maxBeside bounds the files tried beside the path.
const maxBeside = 9

// claim locks the file to write (PATH.lock for PATH): two proxies on one path (two
// hosts starting one wrapped config) wrote one file at their own offsets, tearing each
// other's lines. The second one writes beside it instead.
func (w *Writer) claim() error {
	for n := 1; n <= maxBeside; n++ {
		p := w.o.Path
		if n > 1 {
			p = Beside(w.o.Path, n)
			if err := checkPath(p); err != nil {
				return err
			}
		}
		lock, err := filelock.Open(p+".lock", os.O_RDWR|os.O_CREATE|noFollow)
		switch {
		case errors.Is(err, filelock.ErrLocked):
			continue
		case errors.Is(err, errors.ErrUnsupported):
			lock = nil // no locks on this platform: one proxy per path
		case err != nil:
			return fmt.Errorf("lock the cassette: %w", err)
		}
		if n > 1 {
			w.log.Warn("another proxy records to the cassette: this one records beside it", "cassette", w.o.Path, "path", p)
		}
		w.path, w.lock = p, lock
		return nil
	}
	return fmt.Errorf("the cassette %s and %d files beside it are all being recorded by other proxies", w.o.Path, maxBeside-1)
}

// start starts the file, at the first call: locked, an older cassette with calls
// rotated away, opened.
func (w *Writer) start() error {
	if err := w.claim(); err != nil {
		return err
	}
	if err := checkPath(w.path); err != nil {
		return err
	}
	if hasCalls(w.path) {
		w.shift()
	}
	return w.open()
}

// hasCalls says the file at path is anything but a cassette without calls (a header
// alone: a run of an older bir-proxy that saw no call). Such a file is replaced rather
// than rotated, so that it never pushes a cassette with calls out of the Keep kept;
// any other file (calls, or not a cassette at all) is rotated away, never replaced.
func hasCalls(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 4096)
	if first, err := br.Peek(len(`{"bir-cassette"`)); err == io.EOF && len(first) == 0 {
		return false // empty
	} else if string(first) != `{"bir-cassette"` {
		return true
	}
	for { // the header, without holding it
		_, err := br.ReadSlice('\n')
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return false // the header alone, cut
		}
	}
	next, _ := br.Peek(len(`{"end"`))
	return len(next) > 0 && string(next) != `{"end"`
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
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	if owner, ok := fileOwner(st); ok && owner != os.Getuid() {
		// Another user's folder: only a sticky one (/tmp), where nobody else can
		// rename, remove or replace our files, or one nobody else can write.
		if st.Mode()&fs.ModeSticky == 0 && st.Mode().Perm()&0o022 != 0 {
			return fmt.Errorf("%s is another user's folder that others can write: refused", dir)
		}
		return nil
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
	// Not truncated before it is known to be the user's own regular file.
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|noFollow, 0o600)
	if err != nil {
		return fmt.Errorf("open the cassette: %w", err)
	}
	if err := checkOpen(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
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

func checkOpen(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open the cassette: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("the cassette's path %s is not a regular file: refused", f.Name())
	}
	if owner, ok := fileOwner(st); ok && owner != os.Getuid() {
		return fmt.Errorf("the cassette %s is owned by uid %d, not by you: refused", f.Name(), owner)
	}
	return nil
}

// shift moves PATH to PATH.1 (PATH.1 to PATH.2, ..., dropping the Keep-th).
func (w *Writer) shift() {
	p := w.path
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
	w.tools, w.toolIdx, w.toolBytes, w.toolsLeft = nil, map[string]int{}, 0, 0
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
			i, ok := w.toolIdx[name]
			was := 0
			if ok {
				was = len(w.tools[i])
			}
			if w.toolBytes-was+len(t) > MaxHeaderTools {
				w.toolsLeft++
				return
			}
			w.toolBytes += len(t) - was
			if ok {
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
	// TooLarge, when set, records the call as too large (Call.TooLarge) with these
	// bytes: a call of a cassette rewritten (verify --update) that was recorded so.
	TooLarge int64
}

// maxTooLargeSaid bounds the calls too large said one by one on stderr; the rest are
// counted at Close.
const maxTooLargeSaid = 10

// Call records one tools/call. It never waits: past the queue's bound the call is
// dropped and counted. A call past MaxCallBytes is recorded without its values, as
// too large.
func (w *Writer) Call(r Recorded) {
	if !w.headerDone {
		w.headerDone = true
		if w.toolsLeft > 0 {
			w.log.Warn("the cassette's header leaves tools out: the tools listed are past its bound; verify takes a call of one as of a tool the recording does not list",
				"kept", len(w.tools), "left_out", w.toolsLeft, "bound_bytes", MaxHeaderTools)
		}
		w.push(w.headerLine(), true)
		// Not needed any more: the header is written.
		w.tools, w.toolIdx = nil, nil
	}
	w.seq++
	values := int64(len(r.Arguments) + len(r.Result) + len(r.Error))
	if values > w.o.MaxCallBytes || r.TooLarge > 0 {
		// A call past the bound (a 100 MB result) was dropped and only counted; a run
		// of such calls wrote no cassette at all. It is recorded without its values
		// (none is copied), so verify says it was too large rather than missing it.
		if r.TooLarge > 0 {
			values = r.TooLarge
		}
		w.tooLarge++
		if w.tooLarge <= maxTooLargeSaid {
			w.log.Warn("a call too large for the cassette is recorded without its arguments and answer: verify cannot replay it",
				"seq", w.seq, "tool", r.Tool, "bytes", values, "bound_bytes", w.o.MaxCallBytes)
		} else if w.tooLarge == maxTooLargeSaid+1 {
			w.log.Warn("more calls too large for the cassette: counted at exit")
		}
		r = Recorded{Tool: r.Tool, Outcome: r.Outcome, StartedAt: r.StartedAt, Duration: r.Duration, TooLarge: values}
	}
	size := int64(len(r.Arguments) + len(r.Result) + len(r.Error) + len(r.Tool) + 256)
	if w.full(size) {
		w.dropped.Add(1)
		return
	}
	c := Call{Seq: w.seq, Tool: r.Tool, Arguments: r.Arguments, Redacted: r.Redacted, RedactedKeys: r.RedactedKeys,
		Outcome: r.Outcome, Result: r.Result, Error: r.Error, StartedAt: r.StartedAt,
		DurationMs: float64(r.Duration.Microseconds()) / 1000, TooLarge: r.TooLarge}
	// Encoded here, into a fresh buffer the queue owns: the views die with this call.
	// Their validity is the writing goroutine's to check.
	w.push(appendCall(make([]byte, 0, size), &c), false)
}

// headerLine encodes the header, the tools kept written straight into it (joined
// first, they were one more copy of them all).
func (w *Writer) headerLine() []byte {
	h := w.h
	if h.RecordedAt.IsZero() {
		h.RecordedAt = time.Now()
	}
	size := 4096 + len(h.Initialize) + len(h.InitializeResult) + len(h.Meta) + len(h.DiscoverResult) + len(h.Tools)
	if len(w.tools) > 0 {
		size += w.toolBytes + len(w.tools)
	}
	return appendHeader(make([]byte, 0, size), &h, w.tools)
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
	w.queue = append(w.queue, qline{line, header})
	w.qbytes += int64(len(line))
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Missed counts a call that was not recorded because its answer was not kept (the
// proxy's bookkeeping fell behind): it is dropped, as a call past the queue's bound.
func (w *Writer) Missed() {
	w.seq++
	w.dropped.Add(1)
}

// Dropped is how many calls were not recorded (the queue was full, or a value was
// not whole JSON).
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Close writes what is queued and the end line, and closes the file. A run with no
// call has no file.
func (w *Writer) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
	end := End{End: true, Calls: w.written.Load(), Dropped: w.dropped.Load()}
	var err error
	if w.f != nil {
		w.put(appendEnd(nil, &end))
		err = w.f.Close()
	}
	if w.lock != nil {
		w.lock.Close()
	}
	path := w.path
	if path == "" {
		path = w.o.Path
	}
	if w.tooLarge > 0 {
		w.log.Warn("the cassette records calls too large without their arguments and answers", "path", path, "too_large", w.tooLarge, "bound_bytes", w.o.MaxCallBytes)
	}
	if end.Dropped > 0 {
		w.log.Warn("the cassette misses calls", "path", path, "dropped", end.Dropped)
	}
	if err != nil {
		return fmt.Errorf("close the cassette: %w", err)
	}
	return nil
}

func (w *Writer) run() {
	defer close(w.done)
	var batch []qline
	for {
		w.mu.Lock()
		batch, w.queue = w.queue, batch[:0]
		w.qbytes = 0
		closed := w.closed
		w.mu.Unlock()
		for i, line := range batch {
			w.write(line)
			batch[i] = qline{}
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-w.wake
		}
	}
}

// write writes one line, starting the file at the first call, and rotating first when
// the line would take the file past MaxBytes.
func (w *Writer) write(q qline) {
	if q.header {
		w.header = q.b
		return
	}
	line := q.b
	// A call's raw values are checked here, off the host's path: a line that is not
	// whole JSON would make the cassette unreadable.
	if !jsonlex.Valid(line[:len(line)-1]) {
		w.dropped.Add(1)
		w.log.Warn("a call was not recorded in the cassette: its arguments or result are not whole JSON")
		return
	}
	if w.f == nil && !w.gaveUp {
		if err := w.start(); err != nil {
			w.gaveUp = true
			w.log.Warn("no cassette is recorded", "err", err)
		}
	}
	if w.f == nil {
		w.dropped.Add(1)
		return
	}
	if w.size > int64(len(w.header)) && w.size+int64(len(line)) > w.o.MaxBytes {
		w.rotate()
		if w.f == nil {
			w.dropped.Add(1)
			return
		}
	}
	if w.size == 0 && !w.put(w.header) {
		w.dropped.Add(1)
		return
	}
	if !w.put(line) {
		w.dropped.Add(1)
		return
	}
	w.written.Add(1)
}

// put writes one line whole, or nothing: a full disk (or a file size limit) left part
// of a line, and the cassette read "truncated" at it and nothing after. The file is
// cut back to its last whole line, and the failure said once (each call of 3,000 was
// a warning).
func (w *Writer) put(line []byte) bool {
	n, err := w.f.Write(line)
	if err == nil {
		w.size += int64(n)
		return true
	}
	if n > 0 {
		w.f.Truncate(w.size)
	}
	w.f.Seek(w.size, io.SeekStart)
	if !w.failed {
		w.failed = true
		w.log.Warn("cannot write the cassette: calls that do not fit are not recorded (their count at exit)", "path", w.path, "err", err)
	}
	return false
}

func (w *Writer) rotate() {
	w.put(appendEnd(nil, &End{End: true, Calls: w.written.Load(), Dropped: w.dropped.Load()}))
	w.f.Close()
	w.f = nil
	w.shift()
	if err := w.open(); err != nil {
		w.gaveUp = true
		w.log.Warn("cannot start a new cassette file", "err", err)
		return
	}
	w.written.Store(0)
}
