package upstream

import (
	"context"
	"time"

	"github.com/bir-dev/bir-proxy/internal/backoff"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// A host's subscriptions/listen stream over Streamable HTTP (stateless era, MCP
// 2026-07-28: the POST's event stream stays open) is carried across what ends it
// without an answer, as a stdio server's revival carries it (docs/revive.md): a
// server that restarts and drops the stream is POSTed the request again, as the host
// wrote it (same id, same params), and the new acknowledgment and what the host may
// have missed are judged by Listens in deliver. (A session that ends is the session
// room's to replace: it carries the streams to the next one, as after a revival.)

// maxRelistens bounds the POSTs of one listen stream in a row that no acknowledgment
// followed: a server that stays down, or refuses the stream, gets the host an error
// answer after that many, as before (a stdio stream is answered after session.Conn's
// Wait).
const maxRelistens = maxResumes

// relistenFloor is the least wait before a listen stream is POSTed again: a server
// that acknowledges each stream and drops it at once gets at most four POSTs a
// second of each, not a loop (reconnectWait's full jitter may draw nothing).
const relistenFloor = 250 * time.Millisecond

// relisten POSTs m again, later, when it is an open listen stream (Listens remembers
// it) of a Streamable HTTP connection that is not stopping, whose exchange ended
// without an answer for why, and a server had taken it (acknowledged it); it reports
// whether it will, and fail then answers nothing. The n-th POST in a row without an
// acknowledgment waits reconnectWait(n) (at least relistenFloor).
func (c *remoteConn) relisten(m *outMsg, why string) bool {
	c.mu.Lock()
	md := c.mode
	c.mu.Unlock()
	if m.method != "subscriptions/listen" || len(m.ids) != 1 || c.ctx.Err() != nil || md != modeStreamable {
		return false
	}
	select {
	case <-c.closing:
		return false // the host is gone: its streams end with it
	default:
	}
	c.mu.Lock()
	pending := c.pending[jsonlex.IDKey(m.ids[0])] != nil
	c.mu.Unlock()
	if !pending {
		return false // answered, or cancelled by the host
	}
	open, acked := c.setup.Listens().Again(m.ids[0])
	switch {
	case !open:
		return false // not remembered (past the bounds): answered as before
	case !acked && m.relistens == 0:
		// Refused or dropped before any server took it (no acknowledgment): the
		// host's own request failed, and is answered at once, as before.
		return false
	case acked:
		m.relistens = 0 // it was working: a new run of tries
	}
	m.relistens++
	if m.relistens > maxRelistens {
		c.log.Warn("a listen stream could not be opened again", "tries", m.relistens-1, "err", why)
		return false
	}
	c.log.Debug("a listen stream ended without an answer; opening it again", "err", why, "try", m.relistens)
	// The caller runs on a goroutine the connection counts (an exchange, the sender):
	// Close has not finished waiting, so this Add is not after its Wait.
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if !backoff.Sleep(c.ctx, max(reconnectWait(m.relistens), relistenFloor)) || !c.waitReady() {
			return
		}
		c.http.repost(m)
	}()
	return true
}

// repost sends m, a listen stream's request still pending, again: an exchange of its
// own, which a stateless-era cancel ends as it would the first.
func (st *streamableHTTP) repost(m *outMsg) {
	c := st.c
	ctx := c.ctx
	key := jsonlex.IDKey(m.ids[0])
	var abort context.CancelFunc
	var done chan struct{}
	if m.version != "" {
		ctx, abort = context.WithCancel(c.ctx)
		done = make(chan struct{})
		defer close(done)
		defer abort()
	}
	c.mu.Lock()
	p := c.pending[key]
	if p == nil || p.msg != m {
		// Cancelled meanwhile, or its id is another request's now (the host may use
		// it again once it cancelled): POSTed, the stream took that request's entry
		// and the host got its acknowledgment (TestRemoteListenIDReusedWhileWaiting).
		c.mu.Unlock()
		return
	}
	if done != nil {
		p.abort, p.done, p.conn = abort, done, nil
	}
	c.mu.Unlock()
	m.ex.renew()
	st.exchange(ctx, m, nil, nil)
}
