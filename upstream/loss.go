package upstream

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// lossState is the settle handshake of a remoteConn's lost sessions: the connection
// says a loss (a ReplacedError in the inbox), the reader answers what the old session
// owed and calls Settled, and only then does anything go to the new session. It also
// keeps what an expired session refused for the next one (Held), and the keys of the
// requests the reader answered, whose late answers are dropped.
//
// Its fields are guarded by mu, the connection's own lock: the connection changes
// them together with its pending requests (hold, sessionLost).
type lossState struct {
	mu *sync.Mutex
	// unread counts the ReplacedErrors in the inbox that Read has still to return;
	// epoch counts the losses the reader has settled (Settled).
	unread int
	epoch  atomic.Uint64
	// held are the host's messages refused by a session that expired (a 404: not run),
	// to be sent again on the next one; Held gives them to the reader, which then does
	// not answer them, and heldTaken says it has (a message refused after that was
	// answered by the reader, and is not sent again).
	held      []*outMsg
	heldTaken bool
	// lost are the keys of the requests the last lost session owed, which the reader
	// answered: an answer to one that the old session still sends is dropped (the host
	// has its answer already).
	lost map[string]bool
	// lossSettled is closed by Settled: a new session is used only once the reader
	// has settled the old one's loss, or a message written for the old one could go.
	lossSettled chan struct{}
}

// said notes a loss put in the inbox, for the reader to settle.
func (l *lossState) said() {
	l.mu.Lock()
	l.unread++
	if l.lossSettled == nil {
		l.lossSettled = make(chan struct{})
	}
	l.mu.Unlock()
}

// read notes that Read returned a loss said.
func (l *lossState) read() {
	l.mu.Lock()
	l.unread--
	l.mu.Unlock()
}

// settled is remoteConn.Settled: what the host wrote before it is the old session's,
// answered already, and is not sent, but for what Held gave the reader.
func (l *lossState) settled() {
	l.mu.Lock()
	l.epoch.Add(1)
	l.held, l.heldTaken = nil, false
	if l.lossSettled != nil && l.unread == 0 {
		close(l.lossSettled)
		l.lossSettled = nil
	}
	l.mu.Unlock()
}

// settleWait bounds how long a new session waits for the reader to settle the old
// one's loss: a reader busy writing to a slow host takes a while, and must not hold
// the session for ever.
const settleWait = 5 * time.Second

// wait waits until the reader has settled every loss said (Settled), at most
// settleWait, or until ctx ends.
func (l *lossState) wait(ctx context.Context, log *slog.Logger) {
	l.mu.Lock()
	ch := l.lossSettled
	l.mu.Unlock()
	if ch == nil {
		return
	}
	t := time.NewTimer(settleWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		log.Warn("the session was lost and the reader has not settled it; going on")
	case <-ctx.Done():
	}
}

// take is remoteConn.Held: the raw messages held for the next session, which the
// reader then does not answer.
func (l *lossState) take() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.heldTaken = true
	var raws [][]byte
	for _, m := range l.held {
		m.spared = true
		raws = append(raws, m.raw)
	}
	return raws
}

// answered reports whether the reader answered m when it settled a lost session, so
// that it must not be sent (again): the host wrote it before that, and it was not
// held for the next session.
func (l *lossState) answered(m *outMsg) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return m.epoch != l.epoch.Load() && !m.spared
}

// unhold takes m back from what is held: no next session will take it.
func (l *lossState) unhold(m *outMsg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = slices.DeleteFunc(l.held, func(h *outMsg) bool { return h == m })
}

// maxForgotten bounds the keys kept of requests the reader answered (lost): a server
// whose POSTs fail all day must not grow the proxy. Past it the oldest failures' late
// answers, which no server sends in practice, would reach the host.
const maxForgotten = 4096

// forgetLocked records that the reader answers the request with key: a late answer
// from the server is dropped. mu is held.
func (l *lossState) forgetLocked(key string) {
	if l.lost == nil || len(l.lost) >= maxForgotten {
		l.lost = make(map[string]bool)
	}
	l.lost[key] = true
}
