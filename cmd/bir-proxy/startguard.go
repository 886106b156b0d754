package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/upstream"
)

// Hosts show a server's stderr to almost nobody: when the server cannot start, or
// exits before it has answered anything, the host's only clue is "Connection closed"
// (or nothing at all). startGuard turns that into an answer the host shows: each
// request the host sent gets a JSON-RPC error naming the server and the cause (the
// exec error, or the exit status and the last lines it printed on stderr). Once the
// server has answered a request (in the session era, initialize) the guard is a
// plain pass-through, and a server that goes away later is the relay's to handle
// (and, with revival, the reviving Conn's: the guard wraps whatever Conn main holds).
//
// The relay forwards the guard's answers as if the server had sent them, so a
// tools/call among the requests is recorded as an rpc_error carrying the cause.
type startGuard struct {
	up   upstream.Conn // nil: the server never started
	log  *slog.Logger
	code int // exit status when up is nil: 127 not found, 126 otherwise
	// cause says why the server went away; it may wait (boundedly) for the exit
	// status and the last stderr lines.
	cause func() string

	ready atomic.Bool // the server has answered: from now on, a pure pass-through

	mu       sync.Mutex
	pending  map[string][]byte // host request ids written, not yet answered, by IDKey
	gone     bool              // the server went away before answering
	reason   string
	goneAt   time.Time
	queue    [][]byte // error answers for the host, not yet read
	answered int
	lastAt   time.Time
	closed   bool          // Close or Terminate: no more requests will come
	wake     chan struct{} // signalled when queue grows or closed is set
}

// Windows in which the host's requests are answered once the server is known gone.
// A host writes initialize the moment it has started the proxy, so the first request
// comes within milliseconds; after answering, a short settle catches a request
// written alongside (a batch, a ping) before the proxy exits.
const (
	answerWindow = 2 * time.Second
	answerSettle = 100 * time.Millisecond
)

// errNoServer is what Write returns once the guard stopped answering: the relay
// then answers the request itself with this reason.
type errNoServer struct{ reason string }

func (e errNoServer) Error() string { return e.reason }

// guardStarted wraps the Conn of a server that started.
func guardStarted(up upstream.Conn, cause func() string, log *slog.Logger) *startGuard {
	return &startGuard{up: up, cause: cause, log: log, pending: map[string][]byte{}, wake: make(chan struct{}, 1)}
}

// guardFailed is the Conn of a server that could not be started: every request the
// host sends in the answer window gets reason.
func guardFailed(reason string, code int, log *slog.Logger) *startGuard {
	g := &startGuard{code: code, log: log, pending: map[string][]byte{}, wake: make(chan struct{}, 1)}
	g.gone, g.reason, g.goneAt = true, reason, time.Now()
	return g
}

func (g *startGuard) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// Read returns the server's messages, then, if it went away before answering, an
// error answer for each request of the host's, then io.EOF.
func (g *startGuard) Read() ([]byte, error) {
	if g.ready.Load() {
		return g.up.Read()
	}
	g.mu.Lock()
	gone := g.gone
	g.mu.Unlock()
	if !gone {
		msg, err := g.up.Read()
		switch {
		case err == nil:
			g.noteServer(msg)
			return msg, nil
		case isReplaced(err):
			// The relay answers what the old server owed; the new one starts afresh.
			g.mu.Lock()
			clear(g.pending)
			g.mu.Unlock()
			return nil, err
		}
		g.goneBeforeAnswering(err)
	}
	return g.nextAnswer()
}

func isReplaced(err error) bool {
	_, ok := upstream.IsReplaced(err)
	return ok
}

// noteServer makes the guard a pass-through once the server has answered anything.
func (g *startGuard) noteServer(msg []byte) {
	answered := false
	jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) { answered = answered || f.IsResponse() })
	if answered {
		g.mu.Lock()
		g.pending = nil
		g.mu.Unlock()
		g.ready.Store(true)
	}
}

// goneBeforeAnswering turns every request written so far into an error answer.
func (g *startGuard) goneBeforeAnswering(readErr error) {
	reason := g.cause() // outside the lock: it waits for the exit status
	if readErr != nil && !errors.Is(readErr, io.EOF) {
		reason += " (" + readErr.Error() + ")"
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gone, g.reason, g.goneAt = true, reason, time.Now()
	for _, id := range g.pending {
		g.queue = append(g.queue, relay.ErrorResponse(id, relay.ServerErrorCode, reason))
	}
	g.pending = nil
	g.log.Warn("the server went away before answering; the host's requests get the reason", "reason", reason, "requests", len(g.queue))
}

// nextAnswer returns the next queued answer, waiting for more within the answer
// window, or io.EOF once it is over.
func (g *startGuard) nextAnswer() ([]byte, error) {
	for {
		g.mu.Lock()
		if len(g.queue) > 0 {
			msg := g.queue[0]
			g.queue = g.queue[1:]
			g.answered++
			g.lastAt = time.Now()
			g.mu.Unlock()
			return msg, nil
		}
		deadline := g.goneAt.Add(answerWindow)
		if g.answered > 0 {
			deadline = g.lastAt.Add(answerSettle)
		}
		if g.closed || !time.Now().Before(deadline) {
			g.closed = true // requests from now on are the relay's to answer
			g.mu.Unlock()
			return nil, io.EOF
		}
		g.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-g.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (g *startGuard) Write(msg []byte) error { return g.send(msg, false) }

func (g *startGuard) Hold(msg []byte) error { return g.send(msg, true) }

func (g *startGuard) send(msg []byte, hold bool) error {
	if g.ready.Load() {
		return g.write(msg, hold)
	}
	var ids [][]byte
	jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) {
		if f.IsRequest() {
			ids = append(ids, bytes.Clone(f.ID))
		}
	})
	g.mu.Lock()
	if g.gone {
		defer g.mu.Unlock()
		if g.closed {
			return errNoServer{g.reason}
		}
		for _, id := range ids {
			g.queue = append(g.queue, relay.ErrorResponse(id, relay.ServerErrorCode, g.reason))
		}
		g.signal()
		return nil
	}
	if g.pending != nil {
		for _, id := range ids {
			g.pending[jsonlex.IDKey(id)] = id
		}
	}
	g.mu.Unlock()
	err := g.write(msg, hold)
	if err == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		// The server went away while this was written, and its requests were taken
		// into the answers already: answering here too would answer them twice.
		return nil
	}
	for _, id := range ids {
		delete(g.pending, jsonlex.IDKey(id))
	}
	return err
}

func (g *startGuard) write(msg []byte, hold bool) error {
	if g.up == nil {
		return errNoServer{g.reason}
	}
	if b, ok := g.up.(upstream.Batcher); ok && hold {
		return b.Hold(msg)
	}
	return g.up.Write(msg)
}

// Buffered reports whether Read will return without waiting.
func (g *startGuard) Buffered() bool {
	if !g.ready.Load() {
		g.mu.Lock()
		gone, queued := g.gone, len(g.queue) > 0
		g.mu.Unlock()
		if gone {
			return queued
		}
	}
	b, ok := g.up.(upstream.Batcher)
	return ok && b.Buffered()
}

// Close ends the answer window (the host closed its side) and closes the server.
func (g *startGuard) Close() error {
	g.mu.Lock()
	g.closed = true
	g.signal()
	g.mu.Unlock()
	if g.up == nil {
		return nil
	}
	return g.up.Close()
}

// Terminate is Close at once: the proxy was told to stop.
func (g *startGuard) Terminate() {
	g.mu.Lock()
	g.closed = true
	g.signal()
	g.mu.Unlock()
	if t, ok := g.up.(upstream.Terminator); ok {
		t.Terminate()
	} else if g.up != nil {
		g.up.Close()
	}
}

// ExitCode is the server's exit status, or 127/126 for one that never started.
func (g *startGuard) ExitCode() int {
	if g.up == nil {
		return g.code
	}
	if e, ok := g.up.(upstream.Exiter); ok {
		return e.ExitCode()
	}
	return 0
}

// exitWait bounds how long the cause waits for the exit status after the server
// closed its stdout: one that closed it and lives on is described without one.
const exitWait = time.Second

// tailLines is how many of the server's last stderr lines the host is shown.
const tailLines = 6

// exitCause describes a server that went away before answering: how it ended and the
// last lines it printed on stderr (upstream.ExitDescriber keeps them).
func exitCause(name string, command []string, conn upstream.Conn) func() string {
	return func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "bir-proxy: the MCP server %q (%s) ", name, commandLine(command))
		d, ok := conn.(upstream.ExitDescriber)
		if !ok {
			b.WriteString("closed its output before answering")
			return b.String()
		}
		how := make(chan string, 1)
		go func() { how <- d.ExitReason() }()
		select {
		case h := <-how:
			b.WriteString(h + " before answering")
		case <-time.After(exitWait):
			b.WriteString("closed its output before answering")
		}
		var lines []string
		for _, l := range d.StderrTail(tailLines) {
			if l = cleanLine([]byte(l)); l != "" {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			b.WriteString("; its last stderr lines: " + strings.Join(lines, " | "))
		} else {
			b.WriteString("; it printed nothing on stderr")
		}
		return b.String()
	}
}

// startFailure describes a server command that could not be started, and the exit
// status the proxy ends with (what a shell says for the same failure).
func startFailure(name string, command []string, err error) (string, int) {
	code := 126
	hint := ""
	if errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "executable file not found") {
		code = 127
		hint = " (is it installed, and on the PATH the host starts its servers with?)"
	}
	return fmt.Sprintf("bir-proxy: cannot start the MCP server %q (%s): %v%s", name, commandLine(command), err, hint), code
}

// cleanLine is a stderr line fit for a message: colours and other escape sequences
// out, control characters out, surrounding space trimmed.
func cleanLine(p []byte) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == 0x1b && i+1 < len(p) && p[i+1] == '[': // CSI: ESC [ params final
			i += 2
			for i < len(p) && (p[i] < 0x40 || p[i] > 0x7e) {
				i++
			}
		case c == '\t':
			b.WriteByte(' ')
		case c < ' ' || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	return strings.ToValidUTF8(strings.TrimSpace(b.String()), "?")
}
