package session

import (
	"bytes"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/upstream"
)

// ownTable is the re-handshake's requests to the current server whose answers Read
// takes, and until when it waits for them. Touched by the reading goroutine only, but
// for n, which Buffered and the stream handler read.
type ownTable struct {
	m     map[string]ownReq
	n     atomic.Int64 // len(m)
	until time.Time    // when m is forgotten
}

// ownReq is a request of the re-handshake's whose answer Read takes.
type ownReq struct {
	answered func(answer []byte) // nil: nothing to look at
}

// waiting reports whether an answer of ours may be next (one atomic load).
func (o *ownTable) waiting() bool { return o.n.Load() > 0 }

func (o *ownTable) add(id []byte, r ownReq) {
	if o.m == nil {
		o.m = make(map[string]ownReq)
	}
	o.m[jsonlex.IDKey(id)] = r
	o.n.Store(int64(len(o.m)))
}

func (o *ownTable) forget() {
	clear(o.m)
	o.n.Store(0)
}

// take swallows an answer to a request of ours, acting on it; it reports whether
// msg was one. Requests still unanswered after Policy.Handshake are forgotten (their
// late answers are in the relay's id namespace, which it never shows the host).
func (o *ownTable) take(msg []byte) bool {
	if time.Now().After(o.until) {
		o.forget()
		return false
	}
	f, ok := jsonlex.TopFields(msg)
	if !ok || !f.IsResponse() {
		return false
	}
	k := jsonlex.IDKey(f.ID)
	r, ok := o.m[k]
	if !ok {
		return false
	}
	delete(o.m, k)
	o.n.Store(int64(len(o.m)))
	if r.answered != nil {
		r.answered(bytes.Clone(msg)) // msg may be lent until the next Read
	}
	return true
}

// ownRequest reports whether msg is a request of the proxy's own: its id is in the
// relay's namespace (the prefix revive and the relay share).
func ownRequest(ids *upstream.OwnIDs, msg []byte) bool {
	f, ok := jsonlex.TopFields(msg)
	if !ok || f.ID == nil {
		return false
	}
	id, ok := jsonlex.DecodeString(f.ID)
	return ok && ids.Mine(id)
}
