package intercept

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/relay"
)

// CorrelationKey is the argument FromHost removes from each tools/call
// (relay.KeyedInterceptor): the relay removes it itself from a long call it streams
// to the server.
func (ic *Interceptor) CorrelationKey() string { return ic.key }

// StreamsArgs says a long call may be given without its arguments
// (relay.StreamingInterceptor): not when a cassette records them.
func (ic *Interceptor) StreamsArgs() bool {
	return ic.tracker == nil || ic.tracker.cassette == nil
}

// FromHostStreamed is FromHost of a long call the relay streamed to the server
// (relay.StreamingInterceptor): standIn is the call with its arguments reduced to
// the correlation member, args what the arguments were reduced to as they passed.
// The report takes its fingerprint and arguments from args, waiting for them on
// bookkeeping's goroutine; the host's path only queues.
func (ic *Interceptor) FromHostStreamed(standIn []byte, args relay.StreamedArgs, readAt time.Time) {
	if ic.q == nil {
		return
	}
	ic.lx.Lex(standIn)
	out, sc := stripLexed(standIn, ic.key, &ic.lx, true)
	if sc.want&wantCall == 0 {
		return // not a call after all: nothing to report
	}
	ic.interested.Add(sc.awaiting)
	ev := event{kind: evHost, msg: out, scan: sc, at: readAt, streamed: true, args: args, weight: args.Holds()}
	if len(ic.lx.Objs) == 1 && len(ic.lx.RPC()) == 1 && !ic.lx.Objs[0].Recheck {
		ev.top = spansOf(&ic.lx.Objs[0])
	}
	ic.q.push(ev, sc.ends)
	// Looked at now, as a request read whole over 64 KiB is (its stand-in is small):
	// until bookkeeping has taken its report's parts, the digest holds its buffers,
	// some MB a call, for as long as the tool runs.
	ic.q.signal()
	ic.sentPending = true
}

// AnswerWanted says whether bookkeeping wants the server's answer with this id, and
// whether whole (relay.ResultStreamingInterceptor): not when nothing waits for any
// answer; whole when it answers a handshake request (learn reads it) or a cassette
// records results. Asking forgets nothing: the line may yet turn out to be no answer
// (a later "method"), or to answer another id (a later duplicate); the id is
// forgotten by what the line turned out to answer (FromUpstream, FromUpstreamStreamed).
func (ic *Interceptor) AnswerWanted(id []byte) (want, whole bool) {
	if ic.q == nil || ic.interested.Load() == 0 && ic.obs == nil {
		return false, false
	}
	if ic.tracker != nil && ic.tracker.cassette != nil {
		return true, true
	}
	return true, ic.handshakes.has(id)
}

// FromUpstreamStreamed is FromUpstream of a long answer that went to the host in
// pieces (relay.ResultStreamingInterceptor): standIn is its id with an empty result,
// res what its result and error were reduced to. Bookkeeping reads res, waiting for
// it on its goroutine.
func (ic *Interceptor) FromUpstreamStreamed(standIn []byte, res relay.StreamedResult, readAt time.Time) {
	// Its id is the line's last, which may not be the head's AnswerWanted was asked
	// of: a handshake's it answers is answered now (reduced: nothing is learned).
	ic.handshakes.answered(standIn)
	if ic.q == nil {
		return
	}
	// The reduction counts for what it may keep: counted as its stand-in's few bytes,
	// one per answer was held without bound while bookkeeping waited on a slow one.
	ic.q.push(event{kind: evUpstream, msg: standIn, at: readAt, streamed: true, res: res, weight: res.Holds()}, true)
}

// handshakeIDs are the ids of the host's handshake requests (initialize, tools/list,
// server/discover) not answered yet, written by the host's path and read by the
// upstream's, so that their answers, which bookkeeping learns from, are never reduced
// as they stream.
type handshakeIDs struct {
	n   atomic.Int32 // len(ids): while 0, answers are not looked at
	mu  sync.Mutex
	ids map[string]uint64 // by jsonlex.IDKey: when noted (seq)
	seq uint64
}

// maxHandshakeIDs bounds the ids kept. A host has a handshake request or two
// unanswered at a time; past this many, the oldest is forgotten (a request the server
// never answered, or the host cancelled): its answer, if it ever comes long, is
// reduced. (A flag that kept every long answer whole once this many had gone
// unanswered was set for good by a server that never answers tools/list.)
const maxHandshakeIDs = 256

// note keeps the ids of the handshake requests in msg (a message or a batch), and
// forgets those its notifications/cancelled name, in the order they come (cancelled's
// work, for a line note is asked of).
func (h *handshakeIDs) note(msg []byte) {
	jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) {
		if f.ID == nil && f.Method != nil && f.Params != nil && jsonlex.KeyIs(f.Method, "notifications/cancelled") {
			if id := jsonlex.Get(f.Params, "requestId"); id != nil && h.n.Load() != 0 {
				h.forget(id)
			}
			return
		}
		if f.ID == nil || !isHandshake(f.Method) {
			return
		}
		h.mu.Lock()
		if h.ids == nil {
			h.ids = make(map[string]uint64)
		}
		k := jsonlex.IDKey(f.ID)
		if _, ok := h.ids[k]; !ok && len(h.ids) >= maxHandshakeIDs {
			oldest, at := "", ^uint64(0)
			for k, s := range h.ids {
				if s < at {
					oldest, at = k, s
				}
			}
			delete(h.ids, oldest)
		}
		h.seq++
		h.ids[k] = h.seq
		h.n.Store(int32(len(h.ids)))
		h.mu.Unlock()
	})
}

// answered forgets the ids msg answers (a message or a batch of the server's read
// whole, or a streamed answer's stand-in).
func (h *handshakeIDs) answered(msg []byte) {
	if h.n.Load() == 0 {
		return
	}
	jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) {
		if f.IsResponse() {
			h.forget(f.ID)
		}
	})
}

// answeredLexed is answered of a message the upstream's pump lexed into lx: the ids
// are where the lex says, not read again.
func (h *handshakeIDs) answeredLexed(msg []byte, lx *jsonlex.Line) {
	if h.n.Load() == 0 {
		return
	}
	objs := lx.RPC()
	if len(objs) == 0 || !lexOf(msg, &objs[len(objs)-1]) {
		h.answered(msg) // not a lex of msg: read it
		return
	}
	for i := range objs {
		if o := &objs[i]; o.Method.End == 0 && o.ID.End != 0 {
			h.forget(msg[o.ID.Start:o.ID.End])
		}
	}
}

// cancelled forgets the ids the host's notifications/cancelled in msg (lexed into
// lx) name: a server need not answer a cancelled request, and its id, kept, had
// every message the server sends read once more until maxHandshakeIDs newer ones
// pushed it out.
func (h *handshakeIDs) cancelled(msg []byte, lx *jsonlex.Line) {
	if h.n.Load() == 0 {
		return
	}
	objs := lx.RPC()
	if len(objs) == 0 || !lexOf(msg, &objs[len(objs)-1]) {
		return
	}
	for i := range objs {
		o := &objs[i]
		if o.ID.End != 0 || o.Method.End == 0 || o.Params.End == 0 || !jsonlex.KeyIs(msg[o.Method.Start:o.Method.End], "notifications/cancelled") {
			continue
		}
		if id := jsonlex.Get(msg[o.Params.Start:o.Params.End], "requestId"); id != nil {
			h.forget(id)
		}
	}
}

// has says an answer with this id must be kept whole.
func (h *handshakeIDs) has(id []byte) bool {
	if h.n.Load() == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.ids[jsonlex.IDKey(id)]
	return ok
}

// forget forgets the id: its answer is here.
func (h *handshakeIDs) forget(id []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.ids, jsonlex.IDKey(id))
	h.n.Store(int32(len(h.ids)))
}

// isHandshake says the answers to a request of this method are read whole: the
// handshake's, which register learns from, and tasks/get's and tasks/result's, which
// hold a task's status and final result (later.go).
func isHandshake(method []byte) bool {
	return method != nil && (jsonlex.KeyIs(method, "initialize") || jsonlex.KeyIs(method, "tools/list") ||
		jsonlex.KeyIs(method, "server/discover") || jsonlex.KeyIs(method, "tasks/get") || jsonlex.KeyIs(method, "tasks/result"))
}

// describeStreamed is describeArgs of a call whose arguments streamed past.
func (sc *scratch) describeStreamed(c *call, args relay.StreamedArgs, capBytes int) {
	c.fingerprint = args.Fingerprint()
	out, clipped := args.Report(max((capBytes-fixedSize(c))/2, minPart))
	c.argsOut, c.argsClipped = bytes.Clone(out), clipped
	c.callIDOut = clipID(c.callID)
	c.msg, c.args = nil, nil
}
