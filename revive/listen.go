package revive

import "time"

// holdListensLocked holds, for the next server, the host's subscriptions/listen
// requests still open when a server died (upstream.Listens.Relisten), as the host wrote
// them: held, the relay registers them in flight again rather than answer them as
// lost (upstream.Holder), and they reach the next server once it is up. One already
// held (a server that died before it was written to) is not held twice. Appended, not
// put first: a flush under way removes held[0] once written. Called with c.mu.
func (c *Conn) holdListensLocked(reqs [][]byte) {
	for _, req := range reqs {
		if heldHas(c.held, req) {
			continue
		}
		if len(c.held) == 0 {
			c.heldSince = time.Now()
		}
		c.held = append(c.held, req) // never changed by Listens: shared, not copied
		c.heldBytes += len(req)
	}
}

// heldHas reports whether req, the very slice, is among held.
func heldHas(held [][]byte, req []byte) bool {
	for _, m := range held {
		if len(m) == len(req) && len(m) > 0 && &m[0] == &req[0] {
			return true
		}
	}
	return false
}
