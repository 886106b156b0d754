package upstream

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// A remote connection is one session: it ends when the server says the session is
// gone (a 404 for its Mcp-Session-Id, on a POST or the GET stream, or the end of the
// HTTP+SSE event stream), as a child's stdout ends with the child. What it does then
// mirrors a dead pipe, so that the session room (package session) replaces a session
// as it replaces a child, the one owner of holding, re-handshaking and settling:
//   - Write fails from the end on (errSessionOver, an io.ErrClosedPipe): the room
//     holds the message for the next session.
//   - Every exchange and stream of the session is ended at once: the answers of the
//     requests under way will never come (the reader answers them, upstream_lost).
//   - Read returns what the session sent before its end, then a *SessionEndedError
//     with the host's messages the session refused unrun (its 404s, and what was
//     still queued), in the order the host wrote them: the room sends them first to
//     the next session. A request that may have run is never among them.

// SessionEndedError is what a remote Conn's Read returns once its session ended (the
// server forgot it): the Conn is done, as a Conn whose child exited. Msgs are the
// host's requests the session refused without running them, oldest first, for the
// next session; every other request written is lost with the session.
type SessionEndedError struct {
	// Reason says how it ended, to follow the server's name: "at URL: the server's
	// session expired (HTTP 404)".
	Reason string
	Msgs   [][]byte
}

func (e *SessionEndedError) Error() string { return e.Reason }

// errSessionOver is a Write after the session ended: a closed pipe, which the session
// room reads as a server gone (its write is held for the next one).
var errSessionOver = fmt.Errorf("the server's session ended: %w", io.ErrClosedPipe)

// sessionEnd is a connection's end: why, what was refused, and the barriers that keep
// a refused message from being lost or sent twice.
type sessionEnd struct {
	// ended is closed at the end: Write fails, the sender stops.
	ended chan struct{}
	// over is closed once nothing of the session runs and what was queued is taken:
	// Read returns the SessionEndedError after the inbox is empty.
	over chan struct{}
	// writes is read-locked by each Write while it queues; the end write-locks it
	// once, so no Write queues after the queue is taken.
	writes sync.RWMutex
	// is is set with ended, for a look without a select.
	is atomic.Bool

	mu      sync.Mutex
	why     string
	refused []*outMsg // requests the session refused unrun
	taken   bool      // Read returned them: a later refusal is the reader's loss
}

func (e *sessionEnd) init() {
	e.ended = make(chan struct{})
	e.over = make(chan struct{})
}

// ended reports whether the session ended.
func (c *remoteConn) ended() bool { return c.end.is.Load() }

// endSession ends the session: why says how ("its session expired (HTTP 404)"); m,
// when not nil, is a message it refused unrun (its 404), for the next session. Only
// the first call ends it; later ones add what else the session refused. It never
// waits: it runs on the exchanges and streams it ends.
func (c *remoteConn) endSession(why string, m *outMsg) {
	e := &c.end
	e.mu.Lock()
	first := e.why == ""
	if first {
		e.why = why
		e.is.Store(true)
	}
	e.mu.Unlock()
	if m != nil {
		c.refuse(m)
	}
	if !first {
		return
	}
	c.log.Debug("the server's session ended", "why", why)
	close(e.ended)
	// Outside wg, which it waits for (Close waits for over instead): the caller is
	// an exchange or a stream of the session, which it ends.
	go func() {
		// Every Write under way has queued its message or failed: none queues after
		// the queue is taken below.
		e.writes.Lock()
		e.writes.Unlock() // a barrier, not a critical section
		c.cancel()
		// Nothing of the session runs now: nothing more is refused, sent or put in
		// the inbox. What is still queued was written after everything the sender
		// took, so it is numbered after it.
		c.wg.Wait()
		for drained := false; !drained; {
			select {
			case m := <-c.out:
				c.seq++
				m.seq = c.seq
				c.refuse(m)
			default:
				drained = true
			}
		}
		close(e.over)
	}()
}

// refuse keeps m, a message the ended session never sent, for the next one. A
// message without a request is dropped (a notification or an answer meant for this
// session). It reports whether m is the next session's.
func (c *remoteConn) refuse(m *outMsg) bool {
	if !c.ended() {
		return false
	}
	e := &c.end
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.taken {
		return false // the reader answered it with the session's other requests
	}
	if m.method == "notifications/cancelled" {
		// The host cancelled a request the session never sent (queued behind it, or
		// refused before the cancel came): it is not carried either, or the next
		// session would run a tool the host gave up on.
		if id := jsonlex.Get(m.params, "requestId"); id != nil {
			key := jsonlex.IDKey(id)
			e.refused = slices.DeleteFunc(e.refused, func(r *outMsg) bool {
				return len(r.ids) == 1 && jsonlex.IDKey(r.ids[0]) == key
			})
		}
	}
	if !m.isRequest {
		c.log.Debug("dropped a message meant for the session that ended", "method", m.method)
		return true
	}
	c.mu.Lock()
	pending := !m.sent
	for _, id := range m.ids {
		k := jsonlex.IDKey(id)
		if c.pending[k] != nil {
			pending = true
			delete(c.pending, k)
		}
	}
	c.mu.Unlock()
	if !pending {
		return true // sent, then answered or cancelled by the host: nothing to carry
	}
	if !slices.Contains(e.refused, m) {
		e.refused = append(e.refused, m)
	}
	return true
}

// endError is Read's last word: how the session ended, and, the first time, what it
// refused.
func (c *remoteConn) endError() error {
	e := &c.end
	e.mu.Lock()
	defer e.mu.Unlock()
	var msgs [][]byte
	if !e.taken {
		e.taken = true
		slices.SortFunc(e.refused, func(a, b *outMsg) int { return cmp.Compare(a.seq, b.seq) })
		for _, m := range e.refused {
			msgs = append(msgs, m.raw)
		}
		e.refused = nil
	}
	return &SessionEndedError{Reason: fmt.Sprintf("at %s: %s", c.shownURL, c.scrub.Replace(e.why)), Msgs: msgs}
}

// wait waits, when the session ended, for the end to be over (Close's last step).
func (e *sessionEnd) wait() {
	if e.is.Load() {
		<-e.over
	}
}

// getLosses records the sessions whose GET stream the server answered 404 within
// reinitMax of their start. A server whose every new session's GET stream gets a 404
// (its POSTs working) drove ~1,000 initialize POSTs a second before renewals backed
// off; after maxReinits such sessions in a row, the next one is kept for requests
// without a GET stream (server-initiated messages then come only with calls).
type getLosses struct {
	mu     sync.Mutex
	inARow int
}

// getLost records that the GET stream of a session started at started got a 404,
// and reports whether the session is kept rather than ended.
func (sh *remoteShared) getLost(started time.Time) (keep bool) {
	g := &sh.gets
	g.mu.Lock()
	if time.Since(started) > reinitMax {
		g.inARow = 0 // it lasted: a new run
	}
	keep = g.inARow >= maxReinits
	if !keep {
		g.inARow++
	}
	n := g.inARow
	g.mu.Unlock()
	if keep {
		sh.log.Warn("giving up starting new sessions: the server refused the GET stream of each of the last new sessions at once (HTTP 404); keeping this one for requests, server-initiated messages now come only with calls",
			"sessions", n)
	}
	return keep
}

// getWorked records that a session's GET stream opened: a later 404 starts afresh.
func (sh *remoteShared) getWorked() {
	sh.gets.mu.Lock()
	sh.gets.inARow = 0
	sh.gets.mu.Unlock()
}
