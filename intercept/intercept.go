// Package intercept watches tools/call as it passes: on the host's path it removes the
// correlation key the host hook added (the only edit the proxy ever makes to a
// message); after forwarding, off that path, it pairs each call with its end,
// fingerprints and redacts it, and hands one step report per call to a sink.
package intercept

import (
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/report"
)

// Options configure an Interceptor.
type Options struct {
	// CorrelationKey is the argument removed from every tools/call (default
	// DefaultCorrelationKey).
	CorrelationKey string
	// Sink receives reports. Nil means a pure pipe (BIR_OFF): the key is still
	// removed, and nothing else is done.
	Sink report.Sink
	// ReportCap bounds one report's JSON size (default 64 KiB).
	ReportCap int
	// QueueBytes bounds the message bytes waiting for bookkeeping (default 256 MiB).
	// Past it, events are still queued — no call goes unreported — but without their
	// bytes, and their reports say so.
	QueueBytes int64
	Logger     *slog.Logger
	// Observer, when set, is told every line bookkeeping looks at (observer.go):
	// the spans (telemetry/mcpspans). It works with or without a Sink.
	Observer Observer
	// Cassette, with a Sink, also records each host tools/call raw (cassette.go);
	// CassetteRedact records its arguments redacted instead.
	Cassette       Cassette
	CassetteRedact bool
	// ToolsListed, with a Sink, is told each answer to the host's tools/list, on
	// bookkeeping's goroutine (never the host's path): its result (a view, valid
	// during the call), and whether the request began a listing (no cursor). The
	// tool pins' warn mode (pins.Watcher.Listed).
	ToolsListed func(result []byte, first bool)
}

// Interceptor implements relay.Interceptor.
type Interceptor struct {
	key string

	// sentPending is set by FromHost when it queued a message, for Forwarded. Both
	// run on the one host pump, in turn, so it needs no lock.
	sentPending bool
	// lx is the lex of a message FromHost or FromProxy is given unlexed (an
	// interceptor wrapping this one, replay.Gate, does not pass the relay's lex on);
	// never used by two at once (relay.Interceptor's contract), so reused.
	lx jsonlex.Line

	// interested counts host requests whose answers bookkeeping wants (calls in
	// flight, handshake requests). While it is zero the upstream path queues nothing.
	interested atomic.Int64
	// parked is set by bookkeeping while a call that already ended waits for its send
	// time (an answer that came before Forwarded).
	parked atomic.Bool

	q       *queue
	tracker *tracker
	done    chan struct{}

	// obs is Options.Observer (nil: none); line is what tell hands it, reused.
	// obsOff is set when Close's bound on it passed (Observer.Drain): it is told
	// nothing more, and obsLeft counts the lines it was not told.
	obs     Observer
	line    Line
	obsOff  atomic.Bool
	obsLeft int

	// traceOnly: observing with no Sink; the tracker's reports would go nowhere.
	traceOnly bool
	log       *slog.Logger

	// handshakes are the host's handshake requests awaiting answers, whose answers
	// are never reduced (AnswerWanted).
	handshakes handshakeIDs
}

// New returns an Interceptor; with a Sink it starts its bookkeeping goroutine, which
// Close ends.
func New(o Options) *Interceptor {
	if o.CorrelationKey == "" {
		o.CorrelationKey = DefaultCorrelationKey
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ic := &Interceptor{key: o.CorrelationKey, log: o.Logger}
	if o.Observer != nil {
		ic.obs = o.Observer
		if o.Sink == nil {
			o.Sink, ic.traceOnly = nopSink{}, true
		}
	}
	if o.Sink == nil {
		return ic
	}
	if o.ReportCap <= 0 {
		o.ReportCap = DefaultReportCap
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 256 << 20
	}
	ic.q = newQueue(o.QueueBytes)
	ic.tracker = newTracker(o.Sink, o.ReportCap, &ic.interested, o.Logger)
	ic.tracker.later = ic.q.wakeSoon
	ic.tracker.parked = &ic.parked
	if o.Cassette != nil {
		ic.tracker.cassette = &cassetteHook{c: o.Cassette, redact: o.CassetteRedact}
	}
	ic.tracker.listed = o.ToolsListed
	ic.done = make(chan struct{})
	go ic.run()
	return ic
}

// FromHost removes the correlation key from tools/call requests and returns the bytes
// to forward. It only scans and splices; nothing here waits.
//
// The message is queued for bookkeeping now, before it is forwarded: its answer can
// be read (and queued by the upstream pump) before the write to the upstream even
// returns, and a call must be known before its answer. Forwarded then supplies the
// time it was sent.
func (ic *Interceptor) FromHost(msg []byte, readAt time.Time) []byte {
	ic.lx.Lex(msg)
	return ic.FromHostLexed(msg, &ic.lx, readAt)
}

// FromHostLexed is FromHost of a message the relay has already lexed into lx
// (relay.LexedInterceptor): the host's path reads each message once. lx then
// describes the bytes returned; it is the relay's, and not kept.
func (ic *Interceptor) FromHostLexed(msg []byte, lx *jsonlex.Line, readAt time.Time) []byte {
	out, sc := stripLexed(msg, ic.key, lx, ic.q != nil && !ic.traceOnly)
	noting := ic.q != nil && sc.want&(wantHandshake|wantTask) != 0 // note, below, takes the cancels
	if !noting {
		ic.handshakes.cancelled(out, lx) // (lx describes out now)
	}
	if ic.q != nil && (sc.want != 0 || ic.obs != nil) {
		if !ic.traceOnly {
			ic.interested.Add(sc.awaiting)
		}
		if noting {
			// Its cancels too, in the line's order: a batch's cancel of a request
			// before it was looked at before the request was noted, and kept it.
			ic.handshakes.note(out)
		}
		ev := event{kind: evHost, msg: out, scan: sc, at: readAt}
		if len(lx.Objs) == 1 && len(lx.RPC()) == 1 && !lx.Objs[0].Recheck && len(out) <= math.MaxInt32 {
			ev.top = spansOf(&lx.Objs[0])
		}
		ic.q.push(ev, sc.ends)
		ic.sentPending = true
	}
	return out
}

// Passive reports that nothing is recorded (no Sink): no time the relay gives is
// read, and no message kept past the call (relay.Capabilities).
func (ic *Interceptor) Passive() bool { return ic.q == nil }

// KeepsBriefly reports that, tracing with nothing recording, a host message is kept
// only until bookkeeping has looked at it (relay.Capabilities): no span holds its bytes.
func (ic *Interceptor) KeepsBriefly() bool { return ic.traceOnly }

// Forwarded records when the bytes FromHost last returned reached the upstream.
func (ic *Interceptor) Forwarded(sentAt time.Time) {
	if !ic.sentPending {
		return
	}
	if !ic.q.sent(sentAt) {
		ic.q.push(event{kind: evSent, at: sentAt}, false)
	}
	// A call of this message may already have ended (its answer beat this send
	// time); its report waits for the event just queued, so have it looked at.
	if ic.parked.Load() {
		ic.q.wakeSoon()
	}
	ic.sentPending = false
}

// FromUpstream queues a message the upstream sent, when bookkeeping may want it.
func (ic *Interceptor) FromUpstream(msg []byte, readAt time.Time) {
	ic.handshakes.answered(msg)
	if ic.q == nil || ic.interested.Load() == 0 && ic.obs == nil {
		return
	}
	ic.q.push(event{kind: evUpstream, msg: msg, at: readAt}, true)
}

// FromUpstreamLexed is FromUpstream of a message the upstream has lexed into lx
// (relay.LexedUpstreamInterceptor). Where each of a lone message's members lies goes
// with it to bookkeeping, which then does not read the message again to find them.
func (ic *Interceptor) FromUpstreamLexed(msg []byte, lx *jsonlex.Line, readAt time.Time) {
	ic.handshakes.answeredLexed(msg, lx)
	if ic.q == nil || ic.interested.Load() == 0 && ic.obs == nil {
		return
	}
	ev := event{kind: evUpstream, msg: msg, at: readAt}
	if len(lx.Objs) == 1 && len(lx.RPC()) == 1 && len(msg) <= math.MaxInt32 && lexOf(msg, &lx.Objs[0]) {
		ev.top = spansOf(&lx.Objs[0])
	}
	ic.q.push(ev, true)
}

// FromProxy removes the correlation key from a request of the proxy's own (a replay
// dispatch may carry one: the upstream never sees it) and queues it for bookkeeping
// with its origin, which its report carries as dispatchId. Its send time is sentAt:
// the relay calls this just before the write, under the lock the host pump's
// FromHost/Forwarded pair also runs under, so the two never race on the queue order.
// A notifications/cancelled marked TimedOut ends its call as a timeout.
func (ic *Interceptor) FromProxy(msg []byte, own relay.Own, sentAt time.Time) []byte {
	ic.lx.Lex(msg)
	out, sc := stripLexed(msg, ic.key, &ic.lx, ic.q != nil && !ic.traceOnly)
	if ic.q != nil && (sc.want != 0 || ic.obs != nil) {
		if !ic.traceOnly {
			ic.interested.Add(sc.awaiting)
		}
		ic.q.push(event{kind: evProxy, msg: out, scan: sc, at: sentAt, origin: own.Origin, timedOut: own.TimedOut}, sc.ends)
	}
	return out
}

// ToProxy queues an answer to a request of the proxy's own, when bookkeeping may want
// it.
func (ic *Interceptor) ToProxy(msg []byte, readAt time.Time) {
	if ic.q == nil || ic.interested.Load() == 0 && ic.obs == nil {
		return
	}
	ic.q.push(event{kind: evToProxy, msg: msg, at: readAt}, true)
}

// UpstreamLost ends every call in flight with outcome upstream_lost.
func (ic *Interceptor) UpstreamLost(at time.Time) {
	if ic.q == nil {
		return
	}
	ic.q.push(event{kind: evLost, at: at}, true)
}

// Close ends bookkeeping after every queued event has been reported; calls still in
// flight are reported as upstream_lost at the moment of Close (the upstream is gone
// or going when the proxy closes). It does not close the sink.
//
// The observer gets Observer.Drain: past it it is stopped, told nothing more, and
// the spans it had left are counted as dropped and said once. (Bookkeeping once had 40,000 spans of a server's requests
// to get through at exit, each looking through every other: the proxy exited 13-51 s
// after the host left, 100,000 kept it running for minutes after SIGTERM.)
func (ic *Interceptor) Close() {
	if ic.q == nil {
		return
	}
	ic.q.push(event{kind: evLost, at: time.Now(), final: true}, false)
	ic.q.close()
	if ic.obs == nil {
		<-ic.done
		return
	}
	bound := time.NewTimer(ic.obs.Drain())
	defer bound.Stop()
	select {
	case <-ic.done:
	case <-bound.C:
		ic.obsOff.Store(true)
		ic.obs.Stop()
		<-ic.done // the event at hand, then what is left only counted
	}
}

func (ic *Interceptor) run() {
	defer close(ic.done)
	var batch []event
	for {
		var ok bool
		batch, ok = ic.q.pop(batch)
		for i := range batch {
			ev := &batch[i]
			ic.look(ev)
			if ev.kind == evHost && !ev.sent.IsZero() {
				// Its send time, set in place by Forwarded (queue.sent).
				ic.look(&event{kind: evSent, at: ev.sent})
			}
			// Its bytes go now, not with the batch: a batch is everything that came
			// while bookkeeping was busy, thousands of requests whose reports need
			// none of their bytes once described.
			batch[i].msg = nil
		}
		if !ok {
			if ic.obs != nil {
				ic.obs.Done(ic.obsLeft)
			}
			return
		}
	}
}

// look has bookkeeping look at one event.
func (ic *Interceptor) look(ev *event) {
	var res relay.StreamedResult
	if ev.streamed && ev.kind == evUpstream {
		res = ev.res
	}
	if ic.obs != nil {
		ic.tell(ev, res)
	}
	if !ic.traceOnly {
		ic.tracker.res = res
		ic.tracker.handle(*ev)
		ic.tracker.res = nil
	}
	if ic.obs != nil && !ic.obsOff.Load() {
		ic.obs.Looked()
	}
}

type eventKind uint8

const (
	evHost eventKind = iota
	evSent           // the last evHost's message reached the upstream at the event's time
	evUpstream
	evLost
	evProxy   // a request of the proxy's own, sent at the event's time
	evToProxy // an answer to one
)

// event is one thing bookkeeping must look at. msg is nil when the queue was over its
// byte budget (shed says so).
type event struct {
	kind eventKind
	msg  []byte
	shed bool
	scan hostScan
	at   time.Time
	// sent is an evHost's send time when Forwarded could set it in place (queue.sent):
	// bookkeeping then reads the evSent that would have followed from it.
	sent time.Time
	// origin is who asked for an evProxy request (a dispatch id, or ""); timedOut
	// says an evProxy cancel was sent because the request's deadline passed.
	origin   string
	timedOut bool
	// top is where an evUpstream message's members lie, when the upstream's lex said.
	top rpcSpans
	// spared are the keys of the host's calls an evLost does not end (UpstreamLostSparing).
	spared []string
	// final says an evLost is the session's end (Close), which also ends the calls
	// kept open past their first answer (later.go).
	final bool

	// streamed says an evHost call's arguments were reduced as they streamed to the
	// server (FromHostStreamed): args; or an evUpstream answer's result as it
	// streamed to the host (FromUpstreamStreamed): res.
	streamed bool
	args     relay.StreamedArgs
	res      relay.StreamedResult
	// weight is what the event holds besides msg (a reduction), counted against the
	// queue's budget as msg is.
	weight int64
}

// rpcSpans is where the JSON-RPC members of a message that is one object lie in it,
// and a request's params.name and params.arguments (ok false: not known, and
// bookkeeping reads the message itself). Spans of int32, not a jsonlex.Obj: every
// event queued carries one.
type rpcSpans struct {
	ok                                   bool
	obj, method, id, params, result, err span32
	name, arguments                      span32
}

type span32 [2]int32

// lexOf is a cheap check that o was lexed from msg (a reader that hands on a lex of
// another line would have bookkeeping read members that are not there).
func lexOf(msg []byte, o *jsonlex.Obj) bool {
	return o.End <= len(msg) && o.Start < o.End && msg[o.Start] == '{' && msg[o.End-1] == '}'
}

func spansOf(o *jsonlex.Obj) rpcSpans {
	sp := func(s jsonlex.Span) span32 { return span32{int32(s.Start), int32(s.End)} }
	return rpcSpans{ok: true, obj: sp(o.Span), method: sp(o.Method), id: sp(o.ID), params: sp(o.Params),
		result: sp(o.Result), err: sp(o.Error), name: sp(o.Name), arguments: sp(o.Arguments)}
}

// in is the bytes of msg s spans; nil for an absent member (jsonlex.Obj's zero Span).
func (s span32) in(msg []byte) []byte {
	if s == (span32{}) {
		return nil
	}
	return msg[s[0]:s[1]]
}

// fields is what jsonlex.TopFields reads of the message's object, from the spans.
func (r *rpcSpans) fields(msg []byte) jsonlex.Fields {
	return jsonlex.Fields{Method: r.method.in(msg), ID: r.id.in(msg), Params: r.params.in(msg),
		Result: r.result.in(msg), Error: r.err.in(msg)}
}

// queue hands events from the pumps to bookkeeping. push never waits: it appends
// under a lock held only for the append, and past the byte budget it keeps the event
// but drops its bytes, so memory stays bounded while the backlog still yields one
// report per call.
type queue struct {
	mu     sync.Mutex
	events []event
	bytes  int64
	budget int64
	pile   int64 // bytes waiting past which bookkeeping is woken at once (pileAt)
	closed bool
	armed  bool // the wake-up timer is pending
	// hostAt is the index in events of the evHost pushed last, while nothing was
	// pushed after it (else -1): Forwarded then gives it its send time in place
	// rather than queueing an evSent.
	hostAt int
	wake   chan struct{}
	// timer is the one wake-up timer, reset for each burst: an AfterFunc per burst
	// allocated a timer and a closure for every sequential call.
	timer *time.Timer
}

func newQueue(budget int64) *queue {
	q := &queue{hostAt: -1, budget: budget, pile: min(budget/pileFraction, pileMax), wake: make(chan struct{}, 1)}
	q.timer = time.AfterFunc(time.Hour, q.fire)
	q.timer.Stop()
	return q
}

// fire is the wake-up timer's function.
func (q *queue) fire() {
	q.mu.Lock()
	q.armed = false
	q.mu.Unlock()
	q.signal()
}

// push queues ev. ends says ev may end a call, so bookkeeping should run soon; other
// events (a request just forwarded) wait for the answer that will end them. Waking
// bookkeeping for a request would put its work on the CPUs exactly while the server
// is answering, the one moment the host is waiting on.
func (q *queue) push(ev event, ends bool) {
	q.mu.Lock()
	if q.closed {
		// After Close nothing is looked at (a host request the relay answers while
		// the proxy exits): kept, it would only be held until exit, and arm a timer.
		q.mu.Unlock()
		return
	}
	if ev.msg != nil && q.bytes+int64(len(ev.msg))+ev.weight > q.budget {
		// Over budget: rare, and only then is the message read here, outside the lock.
		q.mu.Unlock()
		ev.msg, ev.shed = shed(ev), true
		if ev.kind == evUpstream && ev.streamed {
			// A long answer's reduction goes too: shed made its stand-in an answer
			// that says it was not recorded.
			ev.streamed, ev.res = false, nil
		}
		ev.args = nil // a call's: its report says it was not recorded
		ev.weight = 0
		// The spans were of the bytes just dropped: applied to what replaced them
		// they read past its end (a slice bounds panic that took the proxy and every
		// later report down) or members that are not there. Bookkeeping reads the
		// replacement itself.
		ev.top = rpcSpans{}
		q.mu.Lock()
	}
	q.bytes += int64(len(ev.msg)) + ev.weight
	q.events = append(q.events, ev)
	q.hostAt = -1
	if ev.kind == evHost {
		q.hostAt = len(q.events) - 1
	}
	large := (ev.kind == evHost || ev.kind == evProxy) && len(ev.msg) >= holdMax
	piling := q.bytes >= q.pile
	// The wake-up timer is armed under the same lock (wakeSoon's, taken once).
	arm := ends && !large && !piling && !q.armed
	if arm {
		q.armed = true
	}
	q.mu.Unlock()
	switch {
	case large:
		q.signal() // a large request is looked at now, so its bytes can go
	case piling:
		// Requests whose answers are slow to come (a server that never answers) would
		// otherwise wait here, whole, for an answer to wake bookkeeping: 100,000 of
		// them filled the budget, and the rest lost their arguments. Looked at now,
		// each keeps only what its report will hold.
		q.signal()
	case arm:
		q.timer.Reset(wakeDelay)
	}
}

// sent gives the evHost pushed last its send time in place, when nothing was pushed
// after it and bookkeeping has not taken it yet; false: push an evSent.
func (q *queue) sent(at time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.hostAt < 0 || q.hostAt != len(q.events)-1 || q.closed {
		return false
	}
	q.events[q.hostAt].sent = at
	q.hostAt = -1
	return true
}

// wakeSoon wakes bookkeeping wakeDelay from now, unless a wake-up is already due.
func (q *queue) wakeSoon() {
	q.mu.Lock()
	arm := !q.armed
	q.armed = true
	q.mu.Unlock()
	if arm {
		q.timer.Reset(wakeDelay)
	}
}

// shed is what is kept of an event whose bytes do not fit the queue's budget: nothing
// of a request (its report says it was not recorded), and of an answer only its id and
// how it ended, so the call it answers still ends.
func shed(ev event) []byte {
	if ev.kind != evUpstream && ev.kind != evToProxy {
		return nil
	}
	var out []byte
	jsonlex.EachMessage(ev.msg, func(m []byte) {
		f, ok := jsonlex.TopFields(m)
		if !ok || f.ID == nil || f.Method != nil {
			return
		}
		if out == nil {
			out = []byte{'['}
		} else {
			out = append(out, ',')
		}
		out = append(append(append(out, `{"id":`...), f.ID...), ',')
		if f.Error != nil {
			out = append(out, `"error":{"code":-32603,"message":"not recorded: the proxy's bookkeeping fell behind"}}`...)
		} else {
			out = append(out, `"result":{"_bir":"not recorded: the proxy's bookkeeping fell behind"}}`...)
		}
	})
	if out == nil {
		return nil
	}
	return append(out, ']')
}

// pileFraction: once the bytes waiting pass this fraction of the budget (or pileMax),
// bookkeeping runs without waiting for an answer to wake it.
const pileFraction = 8

// pileMax caps what waits for an answer to wake bookkeeping. At an eighth of the
// default budget (32 MiB), 2,000 unanswered 16 KB requests sat whole in the queue, and
// as many more arrived while bookkeeping went through them: with the GC's headroom on
// top, a host sending 20,000 such calls to a server that never answers held the proxy
// at 240 MB where what the reports need is 60 (at 4 MiB, 145-193 MiB; at 1 MiB,
// 128-168). 1 MiB is 64 requests of 16 KB waiting, or thousands of small ones: a host
// with a few small calls in flight never reaches it, so its bookkeeping still waits
// for the answer.
const pileMax = 1 << 20

// holdMax is the largest request left waiting in the queue for its answer; a larger
// one is looked at at once, so its bytes can go while the tool runs.
const holdMax = 64 << 10

// wakeDelay is how long an ended call waits before bookkeeping starts on it: long
// enough for the host to have its answer and send the next request, short enough for
// the recorder to have the report within a few milliseconds. (5 ms for the journal was
// tried: its sequential p99 went 1.06–1.40x -> 1.41–1.53x BIR_OFF=1's for no p50 or
// CPU gain.)
const wakeDelay = time.Millisecond

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop returns everything queued, waiting for something if empty; ok is false once the
// queue is closed and drained. done is the batch pop returned last, handled: its array
// becomes the queue's again, so the pumps' appends do not grow a new one for every
// batch (the largest allocation per report, in bytes, of a sequential host).
func (q *queue) pop(done []event) (batch []event, ok bool) {
	clear(done) // the messages' bytes must not outlive their events
	if cap(done) > maxKeptEvents {
		done = nil // one burst must not pin its array for the rest of the session
	}
	for {
		q.mu.Lock()
		if len(q.events) > 0 || q.closed {
			batch, q.events, q.bytes, q.hostAt = q.events, done[:0], 0, -1
			closed := q.closed
			q.mu.Unlock()
			return batch, !closed
		}
		q.mu.Unlock()
		<-q.wake
	}
}

// maxKeptEvents bounds the event array pop hands back to the queue.
const maxKeptEvents = 16384 // 2 MiB of events

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.timer.Stop() // nothing of bookkeeping outlives Close
	q.signal()
}
