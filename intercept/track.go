package intercept

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/upstream"
)

// tracker pairs each tools/call with its end and reports it. It runs on the
// bookkeeping goroutine only.
type tracker struct {
	sink       report.Sink
	cap        int
	interested *atomic.Int64
	log        *slog.Logger
	// A call that ended before its send time was queued waits for evSent. parked says
	// so to Forwarded, which then wakes bookkeeping; later covers the case where evSent
	// was queued before parked was set.
	later  func()
	parked *atomic.Bool

	calls map[string]*call // by jsonlex.IDKey
	// trims are the host's answers the result budget cut (trimmed.go).
	trims trimNotes
	// handshake requests awaiting their answer, by jsonlex.IDKey → method
	handshake map[string]string
	// unsent are the calls of the last host message, until its evSent gives them
	// their startedAt; one that ends before that waits here for it.
	unsent  []*call
	facts   report.ServerFacts
	scratch scratch
	// kbuf holds the map key of the id being looked up: a lookup by string(kbuf)
	// allocates nothing.
	kbuf      []byte
	sawInit   bool
	sawTools  bool
	warnedShd bool
	cassette  *cassetteHook // nil without --cassette
	// listed is Options.ToolsListed: told every tools/list answer of the host's.
	listed func(result []byte, first bool)
	// res is what the result of the answer being handled was reduced to, when it
	// streamed to the host (FromUpstreamStreamed); else nil.
	res relay.StreamedResult
	// open is the calls kept open past their first answer: tasks and rounds
	// (later.go).
	open openCalls
}

// call is a tools/call in flight.
type call struct {
	// No raw id: a view of the message kept every pending call's whole request
	// alive (20,000 unanswered 16 KB calls held the proxy at 340 MB), and key
	// (a copy) is all pairing needs.
	key        string  // its key in tracker.calls
	msg        []byte  // the request as forwarded (key removed); nil when shed
	args       []byte  // params.arguments within msg
	tool       string  // as reports show it (redacted, clipped)
	toolLen    int     // the length of the name as the host sent it, decoded
	callID     *string // as the host sent it
	callIDOut  *string // as reports show it
	dispatchID *string // the origin of a request of the proxy's own; nil for the host's
	receivedAt time.Time
	startedAt  time.Time // zero until the message is known to have been sent

	// What the report says of the arguments, worked out when the call is seen
	// (describeArgs), after which msg and args are dropped.
	fingerprint string
	argsOut     json.RawMessage
	argsClipped bool

	// A call that ended before its send time was known keeps its end here.
	ended   bool
	endedAt time.Time
	outcome string
	result  json.RawMessage
	rpcErr  json.RawMessage

	cass *rawCall // the raw call, for the cassette (cassette.go)

	// A call kept open past its first answer (later.go): the rounds before its
	// current one, the task it became and the last status seen of it, and the
	// input_required result of a round awaiting the host's retry.
	rounds      int
	taskID      string
	taskStatus  string
	task2025    bool
	roundResult json.RawMessage
	// roundReported says roundResult is in its report's form already (redacted,
	// clipped), roundClipped whether it was clipped: a round's answer kept open.
	roundReported, roundClipped bool
	// keptSeq is the seq of its latest entry in open.order (later.go).
	keptSeq int64
	// res is what its result was reduced to, when the answer streamed to the host:
	// the report's result is taken from it.
	res relay.StreamedResult
	// sentBytes, when not 0, is the report's resultBytes where the value the call
	// ends with is not the server's as sent: a round's input_required result kept in
	// its report's form, or -1 for an error the proxy made up (a failed task
	// that gave none). Else the size is the ending value's.
	sentBytes int64
	// trimmed says the host got the result cut to the result budget, spill where
	// the whole answer is (trimmed.go).
	trimmed bool
	spill   string
}

func newTracker(sink report.Sink, cap int, interested *atomic.Int64, log *slog.Logger) *tracker {
	return &tracker{
		sink:       sink,
		cap:        cap,
		interested: interested,
		log:        log,
		calls:      make(map[string]*call),
		handshake:  make(map[string]string),
	}
}

func (t *tracker) handle(ev event) {
	if ev.shed && !t.warnedShd {
		t.warnedShd = true
		t.log.Warn("bookkeeping fell behind; some reports carry no arguments or result")
	}
	switch ev.kind {
	case evHost:
		// The relay pairs every FromHost with a Forwarded; an unpaired call (a caller
		// that does not) must still not wait forever for its send time.
		t.flushUnsent(ev.at)
		t.host(ev)
	case evSent:
		t.flushUnsent(ev.at)
	case evProxy:
		t.host(ev)
	case evUpstream:
		if ev.timedOut {
			t.timedOut(ev.msg, ev.at) // policy.go
			return
		}
		if ev.top.ok {
			t.answer(ev.top.fields(ev.msg), ev.at, "")
			return
		}
		jsonlex.EachMessage(ev.msg, func(m []byte) { t.upstream(m, ev.at, "") })
	case evToProxy:
		jsonlex.EachMessage(ev.msg, func(m []byte) { t.upstream(m, ev.at, ownKey) })
	case evLost:
		spared := sparedSet(ev.spared, nil)
		for k, c := range t.calls {
			if _, ok := spared[k]; ok {
				continue // held back from the lost server: the next one answers it
			}
			t.finish(c, ev.at, report.OutcomeUpstreamLost, nil, nil)
			delete(t.calls, k)
		}
		for k := range t.handshake {
			t.forgetHandshake(k)
		}
		for k := range t.open.reqs {
			t.forgetTaskRequest(k)
		}
		t.flushUnsent(ev.at)
		if ev.final {
			// A task or a round outlives a server that is replaced (the host may go
			// on following it), not the session.
			t.endAll(ev.at)
		}
	}
}

// forgetHandshake stops waiting for the answer to a handshake request that will not
// get one, so the upstream path stops queueing messages for it.
func (t *tracker) forgetHandshake(k string) {
	if _, ok := t.handshake[k]; ok {
		delete(t.handshake, k)
		t.interested.Add(-1)
	}
}

// flushUnsent gives the last host message's calls their send time and reports those
// that already ended.
func (t *tracker) flushUnsent(sentAt time.Time) {
	for _, c := range t.unsent {
		c.startedAt = sentAt
		if c.ended && c.endedAt.Before(sentAt) {
			c.endedAt = sentAt // an end the proxy decided itself (no id, backlog)
		}
		if c.ended {
			t.report(c, c.endedAt, c.outcome, c.result, c.rpcErr)
		}
	}
	t.unsent = t.unsent[:0]
	t.parked.Store(false)
}

// listedPage is the handshake method of a tools/list request carrying a cursor: a
// page after the first.
const listedPage = "tools/list (a later page)"

// ownKey starts the tracker's key of an id of the proxy's own requests, so that
// however the host chose its ids, the two namespaces never meet here.
const ownKey = "p"

// host handles the requests in a host message (evHost) or in one of the proxy's own
// (evProxy).
func (t *tracker) host(ev event) {
	own := ev.kind == evProxy
	keyPrefix := ""
	var origin *string
	if own {
		keyPrefix = ownKey
		if ev.origin != "" {
			// A copy: a pointer into ev moved every event to the heap.
			o := ev.origin
			origin = &o
		}
	}
	// pend waits for the host message's send time; the proxy's own were sent at ev.at.
	pend := func(c *call) {
		c.dispatchID = origin
		if own {
			c.startedAt = ev.at
			return
		}
		t.unsent = append(t.unsent, c)
	}
	var args relay.StreamedArgs
	if ev.streamed {
		args = ev.args
	}
	if ev.msg == nil {
		// Shed: the bytes are gone, but the call still gets its report.
		for _, id := range ev.scan.callIDs {
			if own {
				id = nil
			}
			c := &call{callID: id, receivedAt: ev.at}
			t.scratch.describeArgs(c, t.cap)
			pend(c)
			t.finish(c, ev.at, report.OutcomeRPCError, nil,
				json.RawMessage(`{"code":-32603,"message":"not recorded: the proxy's bookkeeping fell behind"}`))
		}
		t.interested.Add(-ev.scan.awaiting + int64(len(ev.scan.callIDs)))
		return
	}
	n := 0 // index into ev.scan.callIDs
	// each handles one request: f its members; for a tools/call, name and args are
	// its params' (lexed says they were found already, so are not read again).
	streamed := args
	each := func(m []byte, f jsonlex.Fields, lexed bool, name, args []byte) {
		switch method := methodOf(f.Method); method {
		case "tools/call":
			var callID *string
			// A dispatch's report has no callId (SPEC §5): the key a recorder may
			// have left in its arguments is removed, and is not the host's call.
			if n < len(ev.scan.callIDs) && !own {
				callID = ev.scan.callIDs[n]
			}
			n++
			c := &call{
				msg:        m,
				callID:     callID,
				receivedAt: ev.at,
			}
			if f.Params != nil && f.Params[0] == '{' {
				if !lexed {
					name, args = jsonlex.Get(f.Params, "name"), jsonlex.Get(f.Params, "arguments")
				}
				t.scratch.tool(c, name)
				c.args = args
			}
			if streamed != nil {
				t.scratch.describeStreamed(c, streamed, t.cap)
			} else {
				t.scratch.describeArgs(c, t.cap)
			}
			if f.ID != nil {
				if prev := t.join(f.Params, c.tool, c.fingerprint); prev != nil {
					// The host's retry of a call that asked for input: its next round,
					// under a new id. The report keeps the first round's callId,
					// arguments and times (SPEC §3.5).
					t.track(prev, keyPrefix, f.ID, ev.at)
					return
				}
			}
			pend(c)
			if t.cassette != nil && !own && f.ID != nil && f.Params != nil && f.Params[0] == '{' { // a notification is no call to replay
				t.cassette.seen(c, f.Params, name, args)
			}
			if f.ID == nil {
				// A tools/call without an id is a notification: no answer will ever
				// come. It is still reported (never dropped), as the invalid request
				// it is.
				t.finish(c, ev.at, report.OutcomeRPCError, nil,
					json.RawMessage(`{"code":-32600,"message":"tools/call without an id: a notification, which gets no answer"}`))
				return
			}
			t.track(c, keyPrefix, f.ID, ev.at)
		case "notifications/cancelled":
			if f.Params == nil || f.Params[0] != '{' {
				return
			}
			k := keyPrefix + jsonlex.IDKey(jsonlex.Get(f.Params, "requestId"))
			if c, ok := t.calls[k]; ok {
				delete(t.calls, k)
				outcome := report.OutcomeCancelled
				if own && ev.timedOut {
					// The proxy gave up on its own request at its deadline (a replay
					// dispatch's timeoutMs): the recorder must not read it as a cancel.
					outcome = report.OutcomeTimeout
				}
				t.finish(c, ev.at, outcome, nil, nil)
			}
			t.forgetHandshake(k)
			t.forgetTaskRequest(k)
		case "tasks/get", "tasks/result", "tasks/cancel":
			if f.ID != nil {
				t.taskRequest(method, f.ID, f.Params, keyPrefix)
			}
		case "initialize", "tools/list", "server/discover":
			if f.ID != nil {
				if method == "tools/list" && jsonlex.Get(f.Params, "cursor") != nil {
					// A later page: the pins' listing goes on (listedPage).
					method = listedPage
				}
				t.handshake[keyPrefix+jsonlex.IDKey(f.ID)] = method
				if t.cassette != nil && !own {
					t.cassette.handshake(method, f.Params)
				}
			}
		}
	}
	if ev.top.ok {
		sp := &ev.top
		each(sp.obj.in(ev.msg), sp.fields(ev.msg), true, sp.name.in(ev.msg), sp.arguments.in(ev.msg))
		return
	}
	jsonlex.EachMessage(ev.msg, func(m []byte) {
		if f, ok := jsonlex.TopFields(m); ok {
			each(m, f, false, nil, nil)
		}
	})
}

// track keeps c in flight under the request id raw.
func (t *tracker) track(c *call, keyPrefix string, raw []byte, at time.Time) {
	k := t.idKey(keyPrefix, raw)
	if old, dup := t.calls[string(k)]; dup {
		// The host reused an id still in flight; the two can no longer be told
		// apart, so the older one ends here.
		t.finish(old, at, report.OutcomeRPCError, nil, json.RawMessage(`{"code":-32600,"message":"the host reused this request id before it was answered"}`))
	}
	c.key = string(k)
	t.calls[c.key] = c
}

// upstream handles a message from the upstream: one for the host (keyPrefix ""), or an
// answer to the proxy's own request (ownKey).
func (t *tracker) upstream(m []byte, at time.Time, keyPrefix string) {
	f, ok := jsonlex.TopFields(m)
	if !ok {
		return
	}
	t.answer(f, at, keyPrefix)
}

// answer is upstream of a message whose members f has.
func (t *tracker) answer(f jsonlex.Fields, at time.Time, keyPrefix string) {
	if f.Method != nil {
		// A request or notification of the server's own; a task's state may come
		// in a notification.
		if f.ID == nil && len(t.open.tasks) > 0 && (jsonlex.KeyIs(f.Method, "notifications/tasks") ||
			jsonlex.KeyIs(f.Method, "notifications/tasks/status")) {
			t.taskNotification(f.Params, at)
		}
		return
	}
	if f.ID == nil {
		return
	}
	k := t.idKey(keyPrefix, f.ID)
	if c, ok := t.calls[string(k)]; ok {
		delete(t.calls, c.key)
		if keyPrefix == "" {
			c.spill, c.trimmed = t.trims.take(f.ID)
		}
		var ri resultInfo
		if t.res != nil {
			// The answer streamed to the host: what its result and error were
			// reduced to stands for them. (A task handle or a request for input
			// is never that long: its parts are read from it whole.)
			if e := t.res.Error(); e != nil {
				f.Error = e
			}
			ri.inputRequired, ri.isError = t.res.Kind()
			c.res = t.res
		} else {
			ri = readResult(f.Result)
		}
		switch {
		case f.Error != nil:
			t.finish(c, at, report.OutcomeRPCError, nil, f.Error)
		case ri.task:
			t.openTask(c, ri, at)
		case ri.inputRequired && c.res == nil && keyPrefix == "":
			// A dispatch's input_required is its end: the recorder decides what
			// comes next, as another dispatch (SPEC §4).
			t.openRound(c, ri, f.Result, at)
		case ri.inputRequired:
			t.finish(c, at, report.OutcomeInputRequired, f.Result, nil)
		case ri.isError:
			t.finish(c, at, report.OutcomeToolError, f.Result, nil)
		default:
			t.finish(c, at, report.OutcomeOK, f.Result, nil)
		}
		return
	}
	if len(t.open.reqs) > 0 && t.taskAnswer(string(k), f, at) {
		return
	}
	if method, ok := t.handshake[string(k)]; ok {
		t.forgetHandshake(string(k))
		// An answer reduced as it streamed has no result here, only a stand-in for
		// it (its head's id was not the handshake's, docs/ARCHITECTURE.md): nothing
		// is learned from it, and a later answer read whole still is.
		if f.Result != nil && t.res == nil {
			if t.listed != nil && keyPrefix == "" && (method == "tools/list" || method == listedPage) {
				t.listed(f.Result, method == "tools/list")
			}
			if method == listedPage {
				// Register learns from the first tools/list answer it sees, a later
				// page's too (TestAServerRequestWithAHandshakesIDLeavesItsAnswerWhole).
				method = "tools/list"
			}
			if t.cassette != nil && keyPrefix == "" {
				t.cassette.c.ServerResult(method, f.Result)
			}
			t.learn(method, f.Result)
		}
	}
}

// learn collects what register wants from the handshake answers passing by. It reads
// them with jsonlex, as everything of a peer's is read: iteratively (a result nested
// millions deep is skipped, not recursed into), and with the one duplicate-key rule,
// the last member winning as in the host's JSON.parse (gjson's first-wins registered
// a tool under a name the host never saw).
func (t *tracker) learn(method string, result []byte) {
	if len(result) == 0 || result[0] != '{' {
		return
	}
	changed := false
	switch method {
	case "initialize":
		if !t.sawInit {
			t.sawInit, changed = true, true
			t.facts.ServerInfo = jsonValue(jsonlex.Get(result, "serverInfo"))
			t.facts.ProtocolVersion = stringValue(jsonlex.Get(result, "protocolVersion"))
		}
	case "server/discover":
		if !t.sawInit {
			t.sawInit, changed = true, true
			meta := jsonlex.Get(result, "_meta")
			t.facts.ServerInfo = jsonValue(jsonlex.Get(meta, "io.modelcontextprotocol/serverInfo"))
			var last []byte
			jsonlex.EachElement(jsonlex.Get(result, "supportedVersions"), func(v []byte) { last = v })
			t.facts.ProtocolVersion = stringValue(last)
		}
	case "tools/list":
		if !t.sawTools {
			t.sawTools, changed = true, true
			t.facts.Tools = upstream.ToolNames(jsonlex.Get(result, "tools"))
		}
	}
	if len(t.facts.ServerInfo) == 0 {
		t.facts.ServerInfo = nil
	}
	if changed {
		t.sink.Learned(t.facts)
	}
}

// jsonValue is raw as a fact the register body carries verbatim: nil unless it is
// one whole JSON value (an answer past the upstream's full check is checked by its
// ends only, and a broken one would break the register body around it).
func jsonValue(raw []byte) json.RawMessage {
	if len(raw) == 0 || !jsonlex.Valid(raw) {
		return nil
	}
	return bytes.Clone(raw) // not a view that pins the answer for the session
}

// stringValue is the string raw holds, or "" when it holds none.
func stringValue(raw []byte) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	return jsonlex.StringOf(raw)
}

func (t *tracker) finish(c *call, endedAt time.Time, outcome string, result, rpcErr json.RawMessage) {
	t.interested.Add(-1)
	if c.startedAt.IsZero() {
		c.ended, c.endedAt, c.outcome, c.result, c.rpcErr = true, endedAt, outcome, result, rpcErr
		t.parked.Store(true)
		t.later()
		return
	}
	t.report(c, endedAt, outcome, result, rpcErr)
}

func (t *tracker) report(c *call, endedAt time.Time, outcome string, result, rpcErr json.RawMessage) {
	if t.cassette != nil {
		t.cassette.ended(c, endedAt, outcome, result, rpcErr)
	}
	t.sink.Submit(t.scratch.buildStep(c, endedAt, outcome, result, rpcErr, t.cap))
}

// idKey returns the key in calls (or handshake) of the id raw under prefix, in t's
// scratch: valid until the next call, for lookups by string(key), which allocate
// nothing; a key that is kept is copied.
func (t *tracker) idKey(prefix string, raw []byte) []byte {
	t.kbuf = append(t.kbuf[:0], prefix...)
	if kb, ok := jsonlex.IDKeyBytes(raw); ok {
		t.kbuf = append(t.kbuf, kb...)
	} else {
		t.kbuf = append(t.kbuf, jsonlex.IDKey(raw)...)
	}
	return t.kbuf
}

// methodOf is the method a request's raw "method" value names, for the methods
// bookkeeping follows, without allocating for the usual unescaped names; any other
// method may come back as "".
func methodOf(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return jsonlex.StringOf(raw)
	}
	switch string(raw[1 : len(raw)-1]) {
	case "tools/call":
		return "tools/call"
	case "notifications/cancelled":
		return "notifications/cancelled"
	case "initialize":
		return "initialize"
	case "tools/list":
		return "tools/list"
	case "server/discover":
		return "server/discover"
	case "tasks/get":
		return "tasks/get"
	case "tasks/result":
		return "tasks/result"
	case "tasks/cancel":
		return "tasks/cancel"
	}
	return ""
}

// resultKind says whether a tools/call result asks for input or is a tool's error
// (readResult's first two answers).
func resultKind(result []byte) (inputRequired, isError bool) {
	ri := readResult(result)
	return ri.inputRequired, ri.isError
}
