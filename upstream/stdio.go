package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/termtext"
)

// Grace periods of the stop sequence (SPEC §6). A server gets time to finish writing
// and exit on its own before it is asked, then told.
const (
	DefaultInputGrace = 2 * time.Second // stdin closed → SIGTERM
	DefaultTermGrace  = 3 * time.Second // SIGTERM → SIGKILL
	// orphanGrace bounds how long a read may wait after the server exited. Only a
	// process the server left behind can still hold its stdout open; without this
	// bound such a grandchild would keep a dead session open forever.
	orphanGrace = 500 * time.Millisecond
)

// Command says how to start a stdio server.
type Command struct {
	Path string   // program; looked up in PATH when it has no separator
	Args []string // arguments after the program
	Env  []string // the child's whole environment (see ChildEnv)
	Dir  string

	// Name prefixes lines the server prints to stdout that are not messages.
	Name string
	// Stderr receives the server's stderr unchanged; nil means os.Stderr.
	Stderr io.Writer
	// Notes receives the server's stdout lines that are not messages, as
	// "[name] line"; nil means Stderr. They are written from the upstream's reading
	// goroutine, so a Notes that can block (a stderr nobody reads) stops the relay.
	Notes io.Writer
	// MaxMessage caps one message from the server (0: framing's default).
	MaxMessage int
	// Slab says nothing keeps the server's messages once they are forwarded (nothing
	// records: BIR_OFF=1): a message is then lent, not given (framing.WithLending):
	// Read returns it in place in the read buffer, valid until the next Read that
	// reads the server's stdout (a Read after Buffered reported true does not), with
	// no allocation or copy per message. (The name is from when such messages were
	// carved out of shared blocks, framing.WithSlab.) Whoever keeps one longer copies
	// it: revival's own reads do, and the relay's answers to its own requests.
	Slab   bool
	Logger *slog.Logger

	InputGrace, TermGrace time.Duration // 0: the defaults

	// Supervisor, when set, is a program that runs the server for the proxy: started
	// as "Supervisor __supervise -- PATH ARGS...", it must start PATH with its own
	// stdio, exit (or die) the way the server did, end every descendant the server
	// leaves behind, and on SIGUSR2 (the parent-death signal it is started with, and
	// the last step of a stop) kill them all at once. bir-proxy is its own supervisor
	// on Linux (cmd/bir-proxy/supervise_linux.go): the parent-death signal reaches
	// only the direct child, so without one the real server behind a launcher (npx,
	// uvx, sh -c) outlives a proxy killed with SIGKILL. Ignored where Supervised says
	// the platform cannot do it. On linux/amd64 the same supervisor is forked from
	// the proxy instead (rawsup_linux_amd64.s), a loop of system calls that needs no
	// process image and no Go runtime of its own; Supervisor is then not executed
	// unless ExecSupervisor is set.
	Supervisor string
	// ExecSupervisor starts Supervisor as a program even where the supervisor could
	// be forked (BIR_SUPERVISE=exec).
	ExecSupervisor bool
}

// SuperviseArg is the first argument a supervisor is started with.
const SuperviseArg = "__supervise"

// Dial starts the server: a Command is the Dialer of a stdio upstream, and each Dial
// is a fresh process (session.Conn dials again after a crash).
func (c Command) Dial(context.Context) (Conn, error) {
	p, err := Start(c)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Process is a running stdio server. It is a Conn, a Batcher, a Terminator and an
// Exiter.
type Process struct {
	cmd    *exec.Cmd
	name   string
	stderr io.Writer
	notes  io.Writer
	log    *slog.Logger

	in     *framing.Writer
	inFile *os.File
	out    *framing.Reader
	outF   *os.File
	next   []byte // a message Buffered already read and validated
	// standIn is the answer for a streamed line that turned out not to be a
	// message, returned by the next Read; pendingErr is the stream's end that came
	// with it, returned by the Read after.
	standIn    []byte
	pendingErr error
	nextLx     jsonlex.Line // next, lexed as it was validated (see ReadLexed)

	inputGrace, termGrace time.Duration
	supervised            bool // cmd is a supervisor running the server (Command.Supervisor)
	keep                  any  // what a forked supervisor reads (startRawSupervisor), reachable while it runs

	exited   chan struct{} // closed once the process has been waited for
	exitCode int
	exitHow  string // ExitReason's words

	errF    *os.File      // our end of the server's stderr
	errTail tailBuffer    // the last bytes it wrote there
	errDone chan struct{} // closed when the copy of its stderr has ended

	closeIn      sync.Once
	closeOutOnce sync.Once
	stopOnce     sync.Once
	hurry        chan struct{} // closed by Terminate: cut the gentle stop's grace short
	hurryOnce    sync.Once
}

// ChildEnv returns env without any BIR_* variable: those configure the proxy and carry
// the recorder's token, which the server must never learn (SPEC §5).
func ChildEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if strings.HasPrefix(kv, "BIR_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Start starts the server. It fails only when the program cannot be started at all; a
// program that starts and exits at once is seen as an early EOF from Read and an exit
// code.
func Start(c Command) (*Process, error) {
	p := &Process{
		name:       c.Name,
		stderr:     c.Stderr,
		log:        c.Logger,
		inputGrace: c.InputGrace,
		termGrace:  c.TermGrace,
		exited:     make(chan struct{}),
		hurry:      make(chan struct{}),
		errDone:    make(chan struct{}),
	}
	if p.stderr == nil {
		p.stderr = os.Stderr
	}
	p.notes = c.Notes
	if p.notes == nil {
		p.notes = p.stderr
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.inputGrace <= 0 {
		p.inputGrace = DefaultInputGrace
	}
	if p.termGrace <= 0 {
		p.termGrace = DefaultTermGrace
	}

	// Pipes made here rather than with Cmd.StdoutPipe: Cmd.Wait closes its own pipes as
	// soon as the process exits, which would throw away the last lines a crashing
	// server wrote — exactly the ones that explain the crash.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the server's stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("creating the server's stdout pipe: %w", err)
	}
	// stderr through a pipe of ours too, copied on unchanged: its last lines say why a
	// server died, for the error answers and the log line of a revival.
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("creating the server's stderr pipe: %w", err)
	}
	enlargePipe(outW)
	enlargePipe(inW)

	cmd := exec.Command(c.Path, c.Args...)
	supervised := c.Supervisor != "" && Supervised
	if supervised {
		// Looked up here, not by the supervisor: a server that does not exist must
		// fail Start, as it does unsupervised, not become a supervisor's exit status.
		path, err := exec.LookPath(c.Path)
		if err != nil {
			// All six: a revived session may try this once per cool-down, for hours.
			for _, f := range []*os.File{inR, inW, outR, outW, errR, errW} {
				f.Close()
			}
			return nil, fmt.Errorf("starting %s: %w", c.Path, err)
		}
		cmd = exec.Command(c.Supervisor, append([]string{SuperviseArg, "--", path}, c.Args...)...)
	}
	cmd.Env = c.Env
	cmd.Dir = c.Dir
	cmd.Stdin = inR
	cmd.Stdout = outW
	cmd.Stderr = errW
	setProcAttr(cmd)
	if supervised {
		cmd.Env = supervisorEnv(c.Env)
		setSupervisorAttr(cmd)
		p.supervised = true
	}
	if supervised && !c.ExecSupervisor && canForkSupervisor() {
		path := cmd.Args[3]
		proc, keep, err := startRawSupervisor(path, append([]string{path}, c.Args...), c.Env, c.Dir, inR, outW, errW)
		p.keep = keep
		if err != nil {
			for _, f := range []*os.File{inR, inW, outR, outW, errR, errW} {
				f.Close()
			}
			return nil, fmt.Errorf("starting %s: %w", c.Path, err)
		}
		cmd.Process = proc
	} else if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW, errR, errW} {
			f.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", c.Path, err)
	}
	// The child has its copies; ours must go, or we would never see EOF on its stdout
	// and it would never see EOF on its stdin.
	inR.Close()
	outW.Close()
	errW.Close()
	p.errF = errR
	go p.copyStderr()

	p.cmd = cmd
	p.inFile = inW
	p.in = framing.NewWriter(inW)
	p.outF = outR
	opts := []framing.Option{framing.WithMaxMessage(c.MaxMessage)}
	if c.Slab {
		opts = append(opts, framing.WithLending())
	}
	p.out = framing.NewReader(outR, opts...)
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	err := p.cmd.Wait()
	p.exitCode = exitCode(p.cmd.ProcessState, err)
	p.exitHow = exitHow(p.cmd.ProcessState, err)
	// The server is gone; whatever it left in its process group goes with it, and
	// reads stop waiting for a writer that may never close (orphanGrace). The deadline
	// is set here too, not only before each Read: a Read already blocked when the
	// server exited would otherwise wait for as long as a process that left the group
	// (setsid, a detached spawn) keeps the pipe open.
	signalGroup(p.cmd, sigTerm)
	close(p.exited)
	_ = p.outF.SetReadDeadline(time.Now().Add(orphanGrace))
	// The same bound for its stderr: a process it left behind holding the pipe must
	// not keep the copy (a goroutine and a pipe per revival) alive.
	_ = p.errF.SetReadDeadline(time.Now().Add(orphanGrace))
}

// copyStderr passes the server's stderr on unchanged, keeping its tail.
func (p *Process) copyStderr() {
	defer close(p.errDone)
	defer p.errF.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := p.errF.Read(buf)
		if n > 0 {
			p.errTail.write(buf[:n])
			_, _ = p.stderr.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// Read returns the next message from the server. Lines that are not JSON-RPC messages
// are written to Stderr as "[name] line" and skipped.
func (p *Process) Read() ([]byte, error) { return p.read(nil) }

// ReadLexed is Read, leaving lx describing the message returned (upstream.LexedReader):
// each line is checked to be a message anyway, and the check lexes it
// (jsonlex.Line.LexValid), so the relay's look at the message needs no pass of its
// own. A strict JSON check and the relay's lex were two full walks of every answer.
func (p *Process) ReadLexed(lx *jsonlex.Line) ([]byte, error) { return p.read(lx) }

// read is Read, and ReadLexed when lx is set.
func (p *Process) read(lx *jsonlex.Line) ([]byte, error) {
	if msg := p.next; msg != nil {
		p.next = nil
		if lx != nil {
			*lx, p.nextLx = p.nextLx, *lx // no copy: the two Lines trade their arrays
		}
		return msg, nil
	}
	if err := p.pendingErr; err != nil {
		p.pendingErr = nil
		return p.readErr(err)
	}
	for {
		if p.Exited() {
			_ = p.outF.SetReadDeadline(time.Now().Add(orphanGrace))
		}
		msg, err := p.out.Read()
		if sm := p.standIn; sm != nil {
			// The answer for a streamed line that turned out not to be a message
			// (streamLine.End), returned as the server's, like an over-cap one; when
			// the stream ended with that line, its end is the next Read's.
			p.standIn = nil
			if !errors.Is(err, framing.ErrStreamed) {
				p.pendingErr = err
			}
			if lx != nil {
				lx.Lex(sm)
			}
			return sm, nil
		}
		if errors.Is(err, framing.ErrStreamed) {
			continue
		}
		switch tooLong := tooLongOf(err); {
		case err == nil:
		case tooLong != nil:
			p.log.Warn("dropped a message from the server: over the size cap", "bytes", tooLong.Size, "cap", tooLong.Max)
			if answer := p.refuseTooLong(tooLong, ""); answer != nil {
				if lx != nil {
					// lx must describe what is returned: left as it was, it described
					// the server's previous line, and the relay read this answer's
					// members at that line's offsets (past its end: a panic).
					lx.Lex(answer)
				}
				return answer, nil
			}
			continue
		default:
			return p.readErr(err)
		}
		// jsonlex.Valid is iterative: gjson.ValidBytes recursed once per level, and a
		// server that died after writing 10^7 "[" crashed the proxy with a stack
		// overflow (this line is checked in full whatever its size).
		if p.out.Unterminated() && !jsonlex.Valid(msg) {
			// The server died in the middle of a line. IsMessage judges a line over
			// 1 MiB by its ends, and a cut that falls just after a "}" has the ends of
			// an object: the host would get megabytes of broken JSON. A line nobody
			// finished is a message only if it is whole, checked in full; and what
			// was cut is not shown on stderr either (it may be 64 MB).
			p.log.Warn("discarded the unfinished line the server was writing when it ended", "bytes", len(msg))
			continue
		}
		if !p.isMessage(msg, lx) {
			p.notMessage(msg)
			continue
		}
		return msg, nil
	}
}

// readErr is Read's end for the stream's error err.
func (p *Process) readErr(err error) ([]byte, error) {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		p.log.Warn("server exited but a process it started still holds its stdout; ending the session")
		p.closeOut()
		return nil, io.EOF
	case errors.Is(err, os.ErrClosed):
		return nil, io.EOF
	}
	p.closeOut()
	return nil, err
}

// isMessage is IsMessage of line, lexing it into lx on the way when lx is set: the
// same judgement in one pass (a line over smallLine is judged by its ends either way).
func (p *Process) isMessage(line []byte, lx *jsonlex.Line) bool {
	if lx == nil {
		return IsMessage(line)
	}
	if len(line) > smallLine {
		lx.Lex(line)
		return IsMessage(line)
	}
	return lx.LexValid(line)
}

// refuseTooLong stands in for a message dropped for its size, so nobody waits for it
// forever: an answer to the host's request becomes an error answer the host gets (and
// interception reports), returned as if the server had sent it; a request of the
// server's gets an error answer sent back to the server.
func (p *Process) refuseTooLong(e *framing.TooLongError, why string) []byte {
	if e.ID == nil {
		return nil // a notification: nobody waits for it
	}
	if e.Method != nil {
		msg := jsonlex.ErrorResponse(e.ID, -32600, fmt.Sprintf("bir-proxy: the request was %s, over the proxy's --max-message cap of %d bytes; it did not reach the client", e.Sized(), e.Max))
		if why != "" {
			msg = jsonlex.ErrorResponse(e.ID, -32600, "bir-proxy: the request could not be passed on whole: it was "+why)
		}
		if err := p.Write(msg); err != nil {
			p.log.Debug("could not answer the server's dropped request", "err", err)
		}
		return nil
	}
	if why != "" {
		return jsonlex.ErrorResponse(e.ID, -32603, "bir-proxy: the server's answer could not be passed on whole: it was "+why)
	}
	return jsonlex.ErrorResponse(e.ID, -32603, fmt.Sprintf("bir-proxy: the server's answer was %s, over the proxy's --max-message cap of %d bytes, and was dropped", e.Sized(), e.Max))
}

// closeOut releases our end of the server's stdout once the reader has seen its end:
// a revived session starts a process per crash, and each would otherwise leave an fd
// open until the garbage collector finds it. The framing reader's error is sticky, so
// a later Read returns it without touching the file.
func (p *Process) closeOut() {
	p.closeOutOnce.Do(func() { p.outF.Close() })
}

func (p *Process) notMessage(line []byte) {
	// One Write per line: a Notes writer takes each whole. Escaped: a hostile
	// server's ESC, BEL and ^A reached the terminal showing the proxy's stderr raw
	// (TestStrayLineIsEscapedOnNotes).
	shown := termtext.Line(string(line))
	b := make([]byte, 0, len(p.name)+len(shown)+4)
	b = append(append(append(append(b, '['), p.name...), "] "...), shown...)
	_, _ = p.notes.Write(append(b, '\n'))
}

// Buffered reports whether Read will return a message without waiting. A buffered line
// that is not a message would make Read wait after all, so it is dealt with here.
func (p *Process) Buffered() bool {
	for p.next == nil {
		if !p.out.Buffered() {
			return false
		}
		msg, err := p.out.Read()
		if err != nil {
			return false // not reached: a buffered line is returned without reading
		}
		// Lexed as it is checked: ReadLexed hands the lex on.
		if p.isMessage(msg, &p.nextLx) {
			p.next = msg
		} else {
			p.notMessage(msg)
		}
	}
	return true
}

// Capabilities says what a child process can do: all but what only HTTP has (a
// session id, holding across a re-initialized session). A message written is copied
// into the writer's buffer, or written out, before Write or Hold returns.
func (p *Process) Capabilities() Capabilities {
	return Capabilities{
		Batcher: p, Terminator: p, Exiter: p, ExitDescriber: p,
		LexedReader: p, Streamer: p, LineWriter: p,
		CopiesWrites: true,
	}
}

// Hold sends one message to the server, possibly held until the next Write.
func (p *Process) Hold(msg []byte) error {
	if err := p.in.Hold(msg); err != nil {
		return p.writeFailed(err)
	}
	return nil
}

// Flush writes out what Hold held (upstream.Batcher).
func (p *Process) Flush() error {
	if err := p.in.Flush(); err != nil {
		return p.writeFailed(err)
	}
	return nil
}

// Write sends one message to the server.
func (p *Process) Write(msg []byte) error {
	if err := p.in.Write(msg); err != nil {
		return p.writeFailed(err)
	}
	return nil
}

// writeExitWait bounds how long a write that found the server's stdin closed waits
// for the server to be seen exited, to say how it ended.
const writeExitWait = time.Second

// writeFailed is the error of a failed write. A write meets EPIPE the moment a dying
// server's stdin closes, before its exit is reaped: the host got "write |1: broken
// pipe" instead of how the server ended (docs/revive.md). So for EPIPE the exit is
// waited for, briefly (only a dead or dying server costs the wait), and the error
// says it, with the server's last stderr lines; session.Conn, seeing the process has
// exited, words it its own way.
func (p *Process) writeFailed(err error) error {
	if errors.Is(err, syscall.EPIPE) && p.waitExit(writeExitWait, nil) {
		msg := "server " + p.name + " " + p.exitHow
		if words := StderrWords(p.StderrTail(60), 4); words != "" {
			msg += " (" + words + ")"
		}
		return errors.New(msg)
	}
	return fmt.Errorf("writing to %s: %w", p.name, err)
}

// Exited reports whether the server process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// ExitCode waits for the server to have exited and returns its status: its code, or
// 128+signal when a signal ended it (as a shell reports it).
func (p *Process) ExitCode() int {
	<-p.exited
	return p.exitCode
}

// CloseInput closes the server's stdin: the MCP stdio way of saying the session is over.
func (p *Process) CloseInput() {
	p.closeIn.Do(func() { p.inFile.Close() })
}

// Close stops the server gently (SPEC §6): stdin closed, InputGrace to exit on its own,
// then SIGTERM to its process group, TermGrace, then SIGKILL. It returns once the
// process has exited; a Read then returns what the server wrote and io.EOF (within
// orphanGrace, whoever still holds the pipe), a Write fails. Calling it again waits
// for the same stop.
func (p *Process) Close() error {
	p.stop(p.inputGrace)
	return nil
}

// Terminate stops the server at once: stdin closed and SIGTERM together, then SIGKILL
// after TermGrace. It is the answer to the proxy itself being told to stop, and it cuts
// short a gentle stop already under way (a host that closed stdin and then, impatient,
// sends SIGTERM must not wait out the stdin grace).
func (p *Process) Terminate() {
	p.hurryOnce.Do(func() { close(p.hurry) })
	p.stop(0)
}

func (p *Process) stop(inputGrace time.Duration) {
	p.stopOnce.Do(func() {
		p.CloseInput()
		if !p.waitExit(inputGrace, p.hurry) {
			p.log.Debug("server still running after stdin closed; sending SIGTERM")
			signalGroup(p.cmd, sigTerm)
			if !p.waitExit(p.termGrace, nil) {
				p.log.Warn("server ignored SIGTERM; killing it")
				p.kill()
				<-p.exited
			}
		}
		// Anything the server left behind in its group goes too: every process
		// started is ended.
		signalGroup(p.cmd, sigKill)
	})
	<-p.exited
}

// supervisorGrace bounds how long a supervisor told to kill everything may take
// before it is killed itself.
const supervisorGrace = time.Second

// kill ends the server and everything it started. A supervisor is asked first: killed
// outright, it could not end the server's descendants that left its process group.
func (p *Process) kill() {
	if p.supervised {
		_ = p.cmd.Process.Signal(sigKillAll)
		if p.waitExit(supervisorGrace, nil) {
			return
		}
	}
	signalGroup(p.cmd, sigKill)
}

// waitExit waits up to d for the server to exit, or until cut is closed.
func (p *Process) waitExit(d time.Duration, cut <-chan struct{}) bool {
	if d <= 0 {
		return p.Exited()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-cut:
		return p.Exited()
	case <-t.C:
		return false
	}
}

// ExitReason waits for the server to have exited and says how, in words: "exited with
// status 1", "was killed by signal 9 (killed)".
func (p *Process) ExitReason() string {
	<-p.exited
	return p.exitHow
}

// StderrTail returns up to n of the last lines the server wrote to stderr, once what
// it wrote before it exited has been read (waiting at most a moment for that).
func (p *Process) StderrTail(n int) []string {
	if p.Exited() {
		t := time.NewTimer(orphanGrace)
		defer t.Stop()
		select {
		case <-p.errDone:
		case <-t.C:
		}
	}
	return p.errTail.lines(n)
}

// Pid is the server's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

func exitHow(st *os.ProcessState, err error) string {
	if st == nil {
		if err != nil {
			return "could not be waited for: " + err.Error()
		}
		return "exited"
	}
	if code := st.ExitCode(); code >= 0 {
		return "exited with status " + strconv.Itoa(code)
	}
	if sig, ok := signalOf(st); ok {
		return fmt.Sprintf("was killed by signal %d (%s)", sig, signalName(sig))
	}
	return "exited abnormally"
}

func exitCode(st *os.ProcessState, err error) int {
	if st == nil {
		if err != nil {
			return 1
		}
		return 0
	}
	if code := st.ExitCode(); code >= 0 {
		return code
	}
	if sig, ok := signalOf(st); ok {
		return 128 + sig
	}
	return 1
}

// tailBuffer keeps the last tailSize bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4 << 10

func (t *tailBuffer) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= tailSize {
		t.buf = append(t.buf[:0], p[len(p)-tailSize:]...)
		return
	}
	if over := len(t.buf) + len(p) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
}

// lines returns up to n of the last non-blank lines, each cut to a readable length.
func (t *tailBuffer) lines(n int) []string {
	t.mu.Lock()
	text := string(t.buf)
	t.mu.Unlock()
	var out []string
	all := strings.Split(text, "\n")
	for i := len(all) - 1; i >= 0 && len(out) < n; i-- {
		l := strings.TrimSpace(all[i])
		if l == "" {
			continue
		}
		if len(l) > 300 {
			l = l[:300] + "…"
		}
		out = append(out, l)
	}
	slices.Reverse(out)
	return out
}

// tooLongOf is err as a *framing.TooLongError, or nil. The pointer errors.As fills
// escapes to the heap; declared in the read loop, it was one allocation for every
// message read, error or not.
func tooLongOf(err error) *framing.TooLongError {
	if err == nil {
		return nil
	}
	var e *framing.TooLongError
	if errors.As(err, &e) {
		return e
	}
	return nil
}
