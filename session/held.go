package session

import (
	"bytes"
	"slices"
	"sync"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// holdQueue is the host's messages accepted while no server could take them (between
// a server's death and the next one's handshake), oldest first: they go to the next
// server before anything written after them (upstream.Holder). Its fields are guarded
// by mu, the Conn's: what is held is looked at with the state. The methods named
// ...Locked are called with mu held; the others take it.
type holdQueue struct {
	mu *sync.Mutex
	// flushMu is held while a held message is being written to a new server, so that
	// Held never misses one that is neither held nor written.
	flushMu sync.Mutex
	msgs    [][]byte
	bytes   int
	since   time.Time // when the oldest was held
}

// pushLocked holds msg, which is the queue's from now on.
func (q *holdQueue) pushLocked(msg []byte) {
	if len(q.msgs) == 0 {
		q.since = time.Now()
	}
	q.msgs = append(q.msgs, msg)
	q.bytes += len(msg)
}

// popLocked drops the oldest, once written.
func (q *holdQueue) popLocked() {
	q.bytes -= len(q.msgs[0])
	q.msgs[0] = nil
	q.msgs = q.msgs[1:]
}

// snapshot is what is held now (upstream.Holder's Held).
func (q *holdQueue) snapshot() [][]byte {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.msgs)
}

// expire takes what has been held longer than wait, or everything when all is set,
// for the reader to answer (nil when nothing is due).
func (q *holdQueue) expire(all bool, wait time.Duration) [][]byte {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) == 0 || (!all && time.Since(q.since) < wait) {
		return nil
	}
	msgs := q.msgs
	q.msgs, q.bytes = nil, 0
	return msgs
}

// due is when what is held is due to be answered (held wait long), or nil when
// nothing is held.
func (q *holdQueue) due(wait time.Duration) <-chan time.Time {
	q.mu.Lock()
	n, since := len(q.msgs), q.since
	q.mu.Unlock()
	if n == 0 {
		return nil
	}
	return time.After(max(time.Until(since.Add(wait)), 0))
}

// dueIn is how long until what is held is due to be answered (held wait long),
// and false when nothing is held.
func (q *holdQueue) dueIn(wait time.Duration) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) == 0 {
		return 0, false
	}
	return max(time.Until(q.since.Add(wait)), 0), true
}

// cancelLocked drops the held request that msg, the host's notifications/cancelled,
// cancels, and reports whether it did: the cancel is then not held either. A request
// a session refused unrun (its 404), cancelled by the host while the next session was
// being set up, went to that session after the cancel and ran a tool the host had
// given up on (the relay no longer waits for its answer). Called with flushMu held:
// a flush under way pops the oldest once written.
func (q *holdQueue) cancelLocked(msg []byte) bool {
	f, ok := jsonlex.TopFields(msg)
	if !ok || f.ID != nil || f.Method == nil || !jsonlex.KeyIs(f.Method, "notifications/cancelled") {
		return false
	}
	id := jsonlex.Get(f.Params, "requestId")
	if id == nil {
		return false
	}
	key := jsonlex.IDKey(id)
	for i, m := range q.msgs {
		if isBatch(m) {
			continue
		}
		if g, ok := jsonlex.TopFields(m); ok && g.ID != nil && g.Method != nil && jsonlex.IDKey(g.ID) == key {
			q.bytes -= len(m)
			q.msgs = slices.Delete(q.msgs, i, i+1)
			return true
		}
	}
	return false
}

// relistenLocked holds, for the next server, the host's subscriptions/listen
// requests still open when a server died (upstream.Listens.Relisten), as the host
// wrote them: held, the relay registers them in flight again rather than answer them
// as lost (upstream.Holder), and they reach the next server once it is up. One already
// held (a server that died before it was written to, or a listen whose write to the
// dying server failed and was held by its writer) is not held twice: the next server
// would get two streams of one id. Appended, not put first: a flush under way drops
// the oldest once it has written it.
func (q *holdQueue) relistenLocked(reqs [][]byte) {
	for _, req := range reqs {
		if !q.hasLocked(req) {
			q.pushLocked(req) // never changed by Listens: shared, not copied
		}
	}
}

// hasLocked reports whether msg, or the same bytes, is held, alone or as an object
// of a held batch (a listen in a batch held by its writer went to the next server
// twice: TestReviveHoldsAListenOnce). Only asked on a death, of at most 64
// streams.
func (q *holdQueue) hasLocked(msg []byte) bool {
	for _, m := range q.msgs {
		if bytes.Equal(m, msg) || isBatch(m) && batchHas(m, msg) {
			return true
		}
	}
	return false
}

// takeBatchLocked holds batch, a host's batch whose write failed on a dying server, in
// the place of a request of it that the death held alone (relistenLocked): the next
// server gets the request once, in its batch. It reports whether it did.
func (q *holdQueue) takeBatchLocked(batch []byte) bool {
	for i, m := range q.msgs {
		if !isBatch(m) && batchHas(batch, m) {
			q.bytes += len(batch) - len(m)
			q.msgs[i] = bytes.Clone(batch) // the writer may have lent it
			return true
		}
	}
	return false
}

func isBatch(msg []byte) bool {
	i := jsonlex.SkipSpace(msg, 0)
	return i < len(msg) && msg[i] == '['
}

// batchHas reports whether obj, or the same bytes, is an object of batch.
func batchHas(batch, obj []byte) bool {
	if len(obj) > len(batch) || !bytes.Contains(batch, obj) {
		return false // the usual case, without a parse
	}
	found := false
	jsonlex.EachRPC(batch, func(o []byte, _ jsonlex.Fields) {
		found = found || bytes.Equal(o, obj)
	})
	return found
}

// refusedLocked puts first msgs, the host's messages a remote session that ended
// refused unrun (upstream.SessionEndedError), oldest first: they go to the next
// session before anything written after the end. A request of the proxy's own (skip)
// is not held, as holdAfter does not hold one; one held already is not held twice.
func (q *holdQueue) refusedLocked(msgs [][]byte, skip func([]byte) bool) {
	var first [][]byte
	n := 0
	for _, m := range msgs {
		if !skip(m) && !q.hasLocked(m) {
			first = append(first, m) // not copied: the remote Conn made it its own
			n += len(m)
		}
	}
	if len(first) == 0 {
		return
	}
	if len(q.msgs) == 0 {
		q.since = time.Now()
	}
	q.msgs = append(first, q.msgs...)
	q.bytes += n
}
