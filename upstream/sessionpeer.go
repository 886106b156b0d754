package upstream

import (
	"context"
	"fmt"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// sessionPeer is a new session of the connection's server as the re-handshake reaches
// it (RehandshakePeer): each request its own exchange, a 404 now a failure rather
// than another expiry.
type sessionPeer struct{ c *remoteConn }

// rehandshake replays what the host did to set the session up (Setup.Replay, the one
// re-handshake, which a revived child uses too: the host's initialize with an id of
// the proxy's own, its notifications/initialized, then its log level and
// subscriptions, swallowing the answers); then reopens the GET stream, and tells the
// host when the server's tools changed.
func (p sessionPeer) rehandshake() bool {
	c := p.c
	done, err := c.setup.Replay(c.ctx, p, c.ids, ReplayHooks{
		Log: c.log,
		Listed: func(_ []byte, changed bool) {
			if changed {
				c.deliver([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
			}
		},
	})
	if done.Init.ProtocolVersion != "" {
		c.mu.Lock()
		c.sess.version = done.Init.ProtocolVersion
		c.mu.Unlock()
	}
	if err != nil {
		c.log.Warn("re-initializing the server failed", "err", c.scrub.Replace(err.Error()))
		return false
	}
	if done.Done && c.modeNow() == modeStreamable {
		c.http.startListen(false)
	}
	return true
}

func (p sessionPeer) Call(_ context.Context, req, _ []byte) ([]byte, error) {
	m := parseOut(req)
	m.retried = true
	ans, err := p.call(m)
	if ans != nil {
		return ans, nil // an error answer too: the re-handshake judges it
	}
	return nil, err
}

// Send waits for the answer to a request (the session's restores go one by one, in
// order, as the host sent them).
func (p sessionPeer) Send(_ context.Context, msg, id []byte, answered func([]byte)) error {
	c := p.c
	m := parseOut(msg)
	m.retried = true
	if id == nil {
		// Bounded as the requests are: a server that takes the POST and never
		// answers its headers must not hold the re-handshake, and every host
		// request waiting on it, for ever.
		ctx, cancel := context.WithTimeout(c.ctx, ownAnswerWait)
		defer cancel()
		c.http.exchange(ctx, m, nil, nil)
		return nil
	}
	ans, err := p.call(m)
	switch {
	case ans != nil:
		if answered != nil {
			answered(ans)
		}
	case err != nil:
		c.log.Warn("the new session did not answer a request of the re-handshake", "method", m.method, "err", c.scrub.Replace(err.Error()))
	}
	return nil
}

// call sends a request of the connection's own and returns its answer, which the
// host never sees.
func (p sessionPeer) call(m *outMsg) ([]byte, error) {
	c := p.c
	key := jsonlex.IDKey(m.ids[0])
	ch := make(chan []byte, 1)
	c.mu.Lock()
	c.own[key] = ch
	c.pending[key] = &pendingReq{id: m.ids[0], method: m.method}
	md := c.mode
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.own, key)
		delete(c.pending, key)
		c.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(c.ctx, ownAnswerWait)
	defer cancel()
	if md == modeLegacy {
		c.sse.post(ctx, m, nil)
	} else {
		c.http.exchange(ctx, m, nil, nil)
	}
	select {
	case ans := <-ch:
		if f, ok := jsonlex.TopFields(ans); ok && f.Error != nil {
			return ans, fmt.Errorf("the server answered %s with an error: %s", m.method, f.Error)
		}
		return ans, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no answer to %s: %w", m.method, ctx.Err())
	}
}

func (c *remoteConn) modeNow() mode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mode
}
