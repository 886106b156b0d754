package upstream

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Bounds on the listen streams Listens remembers (docs/revive.md): a host that opens
// streams without end, or with huge filters, must not grow the proxy. A stream past
// them is not remembered, and a server's death ends it as before (an error answer).
const (
	maxListens     = 64
	maxListenBytes = 1 << 20 // of the requests and the acknowledged filters kept
	// maxListenNotes bounds the notifications one re-acknowledged stream gets.
	maxListenNotes = 1024
)

const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// Listens remembers the host's subscriptions/listen requests still open (stateless
// era, MCP 2026-07-28: a stream of notifications the request opens, each carrying the
// request's id in _meta as io.modelcontextprotocol/subscriptionId), so that when the
// server behind them is replaced they can be sent to the new one again, same id and
// params, and what the host may have missed meanwhile said to it (SPEC §7).
//
// A stream is open from the host's request until the server answers it (it ended the
// stream) or the host cancels it (notifications/cancelled). Setup feeds it the host's
// messages; the caller shows it the server's (FromServer) while any is open.
type Listens struct {
	n     atomic.Int64 // len(open)
	watch atomic.Int64 // open streams whose acknowledgment from the current server is not yet seen

	mu    sync.Mutex
	open  []*listen // in the order opened
	bytes int       // of every req and ack in open
}

type listen struct {
	key string // jsonlex.IDKey of its id
	id  []byte // raw, as the host wrote it
	// req is the host's request, as it wrote it; never changed (session.Conn finds it
	// by identity).
	req []byte
	ack []byte // the filter of the last acknowledgment the host got; nil before one
	// acked: the current server acknowledged it. again: it was sent to a new server,
	// whose acknowledgment is the proxy's to judge.
	acked, again bool
}

// Open reports whether any stream is open (an atomic load).
func (l *Listens) Open() bool { return l.n.Load() > 0 }

// Watching reports whether an open stream awaits its acknowledgment: the server's
// messages must then be read whole (a Streamer's reader asks).
func (l *Listens) Watching() bool { return l.watch.Load() > 0 }

// opened notes a host's subscriptions/listen request obj, whose raw id is id. One
// whose id is open already is the same stream (revival writing it again).
func (l *Listens) opened(id, obj []byte) {
	k := jsonlex.IDKey(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.find(k) >= 0 || len(l.open) >= maxListens || l.bytes+len(obj) > maxListenBytes {
		return
	}
	l.open = append(l.open, &listen{key: k, id: bytes.Clone(id), req: bytes.Clone(obj)})
	l.bytes += len(obj)
	l.n.Store(int64(len(l.open)))
	l.watch.Add(1)
}

// cancelled notes a host's notifications/cancelled with these params.
func (l *Listens) cancelled(params []byte) {
	if !l.Open() {
		return
	}
	if id := jsonlex.Get(params, "requestId"); len(id) > 0 {
		l.Closed(id)
	}
}

// Closed ends the stream whose raw id is id, if it is open: the server answered it.
func (l *Listens) Closed(id []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeLocked(id)
}

func (l *Listens) closeLocked(id []byte) {
	var i int
	if kb, ok := jsonlex.IDKeyBytes(id); ok {
		i = l.find(string(kb)) // no allocation: the usual id, on a server's answer
	} else {
		i = l.find(jsonlex.IDKey(id))
	}
	if i < 0 {
		return
	}
	e := l.open[i]
	l.bytes -= len(e.req) + len(e.ack)
	if !e.acked {
		l.watch.Add(-1)
	}
	copy(l.open[i:], l.open[i+1:])
	l.open[len(l.open)-1] = nil
	l.open = l.open[:len(l.open)-1]
	l.n.Store(int64(len(l.open)))
}

func (l *Listens) find(key string) int {
	for i, e := range l.open {
		if e.key == key {
			return i
		}
	}
	return -1
}

// Relisten says the server was replaced: every open stream is to be sent to the next
// one, and its acknowledgment judged (FromServer). It returns their requests, in the
// order opened, each the same slice every time (the caller may find it by identity).
func (l *Listens) Relisten() [][]byte {
	if !l.Open() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	reqs := make([][]byte, 0, len(l.open))
	for _, e := range l.open {
		l.againLocked(e)
		reqs = append(reqs, e.req)
	}
	return reqs
}

// Has reports whether the stream whose raw id is id is open and remembered.
func (l *Listens) Has(id []byte) bool {
	if !l.Open() {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.find(jsonlex.IDKey(id)) >= 0
}

// Again is Relisten of one stream, whose raw id is id: it alone is sent to a new
// server (a remote one's stream that broke, or whose session was replaced). open is
// false when the stream is not remembered (past the bounds, or ended): it is then not
// sent again. acked says the server it leaves had acknowledged it.
func (l *Listens) Again(id []byte) (open, acked bool) {
	if !l.Open() {
		return false, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	i := l.find(jsonlex.IDKey(id))
	if i < 0 {
		return false, false
	}
	return true, l.againLocked(l.open[i])
}

// againLocked marks e as sent to a new server, whose acknowledgment is to be judged,
// and reports whether the last server had acknowledged it.
func (l *Listens) againLocked(e *listen) (acked bool) {
	e.again = true
	if e.acked {
		e.acked = false
		l.watch.Add(1)
		return true
	}
	return false
}

// Undelivered forgets the streams whose requests (as Relisten returned them, or the
// same bytes) are among msgs: they reached no server, and the host is answered with
// an error.
func (l *Listens) Undelivered(msgs [][]byte) {
	if !l.Open() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		for _, e := range l.open {
			if bytes.Equal(m, e.req) {
				l.closeLocked(e.id)
				break
			}
		}
	}
}

const methodAcknowledged = "notifications/subscriptions/acknowledged"

// FromServer looks at a message of the server's (a line), which lx describes when not
// nil. An answer to an open stream ends it. An acknowledgment of a stream is noted; of
// a stream sent to a new server, it is passed on (pass) only when its filter differs
// from the last one the host got, and notes are what the host is then told, after it:
// a notifications/*/list_changed for each list the stream listens to and a
// notifications/resources/updated for each resource, with the stream's id in _meta.
// Cheap while no stream is open: call it then too.
func (l *Listens) FromServer(msg []byte, lx *jsonlex.Line) (pass bool, notes [][]byte) {
	pass = true
	if !l.Open() {
		return
	}
	// One message, not a batch: only such a message is kept back.
	single := true
	one := func(f jsonlex.Fields) {
		switch {
		case f.IsResponse():
			l.Closed(f.ID)
		case f.Method != nil && f.ID == nil && l.Watching() && jsonlex.KeyIs(f.Method, methodAcknowledged):
			keep, n := l.acknowledged(f.Params)
			notes = append(notes, n...)
			pass = pass && (keep || !single)
		}
	}
	if lx != nil {
		objs := lx.RPC()
		single = len(objs) == 1
		for i := range objs {
			one(objs[i].Fields(msg))
		}
	} else if len(msg) <= setupScanMax {
		// Unlexed, a large line is not looked at: an acknowledgment, or the answer
		// that ends a stream, is small.
		i := jsonlex.SkipSpace(msg, 0)
		single = i < len(msg) && msg[i] == '{'
		jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) { one(f) })
	}
	return pass, notes
}

// acknowledged notes an acknowledgment with these params.
func (l *Listens) acknowledged(params []byte) (pass bool, notes [][]byte) {
	sid := jsonlex.Get(jsonlex.Get(params, "_meta"), metaSubscriptionID)
	if len(sid) == 0 {
		return true, nil
	}
	k := jsonlex.IDKey(sid)
	filter := bytes.TrimSpace(jsonlex.Get(params, "notifications"))
	l.mu.Lock()
	defer l.mu.Unlock()
	i := l.find(k)
	if i < 0 || l.open[i].acked {
		return true, nil
	}
	e := l.open[i]
	e.acked = true
	l.watch.Add(-1)
	again := e.again
	e.again = false
	pass = !again || !bytes.Equal(filter, e.ack)
	if pass {
		// What the host was given last; one that does not fit is not kept, and the
		// next acknowledgment is passed on.
		l.bytes -= len(e.ack)
		e.ack = nil
		if l.bytes+len(filter) <= maxListenBytes {
			e.ack = bytes.Clone(filter)
			l.bytes += len(filter)
		}
	}
	if again {
		notes = listenNotes(e.id, filter)
	}
	return pass, notes
}

// listenNotes are the notifications that tell a host listening with filter on stream
// id what it may have missed: each list it listens to changed, each resource it
// subscribed was updated.
func listenNotes(id, filter []byte) [][]byte {
	var notes [][]byte
	note := func(method string, uri []byte) {
		b := make([]byte, 0, 128+len(id)+len(uri))
		b = append(b, `{"jsonrpc":"2.0","method":"`...)
		b = append(b, method...)
		b = append(b, `","params":{"_meta":{"`+metaSubscriptionID+`":`...)
		b = append(b, id...)
		b = append(b, '}')
		if uri != nil {
			b = append(b, `,"uri":`...)
			b = append(b, uri...)
		}
		notes = append(notes, append(b, "}}"...))
	}
	for _, list := range [...]struct{ key, method string }{
		{"toolsListChanged", "notifications/tools/list_changed"},
		{"promptsListChanged", "notifications/prompts/list_changed"},
		{"resourcesListChanged", "notifications/resources/list_changed"},
	} {
		if string(jsonlex.Get(filter, list.key)) == "true" {
			note(list.method, nil)
		}
	}
	jsonlex.EachElement(jsonlex.Get(filter, "resourceSubscriptions"), func(uri []byte) {
		// A string, copied as the server wrote it (escapes and all), once checked: a
		// line over 1 MB reached us with only its ends checked (IsMessage).
		if len(notes) < maxListenNotes && len(uri) >= 2 && uri[0] == '"' && jsonlex.Valid(uri) {
			note("notifications/resources/updated", uri)
		}
	})
	return notes
}
