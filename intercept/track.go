package intercept

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math/big"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/report"
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

	calls map[string]*call // by idKey
	// handshake requests awaiting their answer, by idKey → method
	handshake map[string]string
	// unsent are the calls of the last host message, until its evSent gives them
	// their startedAt; one that ends before that waits here for it.
	unsent    []*call
	facts     report.ServerFacts
	sawInit   bool
	sawTools  bool
	warnedShd bool
}

// call is a tools/call in flight.
type call struct {
	id         []byte // raw id, as the host sent it
	msg        []byte // the request as forwarded (key removed); nil when shed
	args       []byte // params.arguments within msg
	tool       string
	callID     *string
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
		forEachMessage(ev.msg, func(m []byte) { t.upstream(m, ev.at, "") })
	case evToProxy:
		forEachMessage(ev.msg, func(m []byte) { t.upstream(m, ev.at, ownKey) })
	case evLost:
		for k, c := range t.calls {
			t.finish(c, ev.at, report.OutcomeUpstreamLost, nil, nil)
			delete(t.calls, k)
		}
		for k := range t.handshake {
			t.forgetHandshake(k)
		}
		t.flushUnsent(ev.at)
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

// forEachMessage calls f for each object in msg: the message, each element of a batch,
// and so on for every value on the line (as strip looks at them).
func forEachMessage(msg []byte, f func([]byte)) {
	for i := skipSpace(msg, 0); i < len(msg); {
		end := skipValue(msg, i)
		if end < 0 {
			return
		}
		switch msg[i] {
		case '{':
			f(msg[i:end])
		case '[':
			elems, _ := elements(msg, i)
			for _, e := range elems {
				if msg[e.start] == '{' {
					f(msg[e.start:e.end])
				}
			}
		}
		i = skipSpace(msg, end)
	}
}

// fields are the top-level members bookkeeping reads, as subslices of the message
// (nil when absent). Slicing, not gjson: gjson copies what it returns, and a result can
// be 100 MB.
type fields struct {
	method, id, params, result, err []byte
}

func topFields(m []byte) (f fields, ok bool) {
	ms, _, ok := members(m, 0)
	if !ok {
		return f, false
	}
	get := func(name string) []byte {
		if v, ok := last(m, ms, name); ok {
			return m[v.start:v.end]
		}
		return nil
	}
	return fields{method: get("method"), id: get("id"), params: get("params"), result: get("result"), err: get("error")}, true
}

// memberOf returns the value of obj's last member named name, or nil.
func memberOf(obj []byte, name string) []byte {
	ms, _, ok := members(obj, 0)
	if !ok {
		return nil
	}
	if v, ok := last(obj, ms, name); ok {
		return obj[v.start:v.end]
	}
	return nil
}

func stringOf(lit []byte) string {
	if len(lit) == 0 || lit[0] != '"' {
		return ""
	}
	s, _ := decodeString(lit)
	return s
}

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
			origin = &ev.origin
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
	if ev.msg == nil {
		// Shed: the bytes are gone, but the call still gets its report.
		for _, id := range ev.scan.callIDs {
			if own {
				id = nil
			}
			c := &call{callID: id, receivedAt: ev.at}
			describeArgs(c, t.cap)
			pend(c)
			t.finish(c, ev.at, report.OutcomeRPCError, nil,
				json.RawMessage(`{"code":-32603,"message":"not recorded: the proxy's bookkeeping fell behind"}`))
		}
		t.interested.Add(-ev.scan.awaiting + int64(len(ev.scan.callIDs)))
		return
	}
	n := 0 // index into ev.scan.callIDs
	forEachMessage(ev.msg, func(m []byte) {
		f, ok := topFields(m)
		if !ok {
			return
		}
		switch method := stringOf(f.method); method {
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
			pend(c)
			if f.params != nil && f.params[0] == '{' {
				c.tool = stringOf(memberOf(f.params, "name"))
				c.args = memberOf(f.params, "arguments")
			}
			describeArgs(c, t.cap)
			if f.id == nil {
				// A tools/call without an id is a notification: no answer will ever
				// come. It is still reported (never dropped), as the invalid request
				// it is.
				t.finish(c, ev.at, report.OutcomeRPCError, nil,
					json.RawMessage(`{"code":-32600,"message":"tools/call without an id: a notification, which gets no answer"}`))
				return
			}
			c.id = f.id
			k := keyPrefix + idKey(f.id)
			if old, dup := t.calls[k]; dup {
				// The host reused an id still in flight; the two can no longer be told
				// apart, so the older one ends here.
				t.finish(old, ev.at, report.OutcomeRPCError, nil, json.RawMessage(`{"code":-32600,"message":"the host reused this request id before it was answered"}`))
			}
			t.calls[k] = c
		case "notifications/cancelled":
			if f.params == nil || f.params[0] != '{' {
				return
			}
			k := keyPrefix + idKey(memberOf(f.params, "requestId"))
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
		case "initialize", "tools/list", "server/discover":
			if f.id != nil {
				t.handshake[keyPrefix+idKey(f.id)] = method
			}
		}
	})
}

// upstream handles a message from the upstream: one for the host (keyPrefix ""), or an
// answer to the proxy's own request (ownKey).
func (t *tracker) upstream(m []byte, at time.Time, keyPrefix string) {
	f, ok := topFields(m)
	if !ok || f.method != nil || f.id == nil {
		return // a request or notification of the server's own
	}
	k := keyPrefix + idKey(f.id)
	if c, ok := t.calls[k]; ok {
		delete(t.calls, k)
		switch {
		case f.err != nil:
			t.finish(c, at, report.OutcomeRPCError, nil, f.err)
		case f.result != nil && f.result[0] == '{' && stringOf(memberOf(f.result, "resultType")) == "input_required":
			t.finish(c, at, report.OutcomeInputRequired, f.result, nil)
		case f.result != nil && f.result[0] == '{' && string(memberOf(f.result, "isError")) == "true":
			t.finish(c, at, report.OutcomeToolError, f.result, nil)
		default:
			t.finish(c, at, report.OutcomeOK, f.result, nil)
		}
		return
	}
	if method, ok := t.handshake[k]; ok {
		t.forgetHandshake(k)
		if f.result != nil {
			t.learn(method, gjson.ParseBytes(f.result))
		}
	}
}

// learn collects what register wants from the handshake answers passing by.
func (t *tracker) learn(method string, result gjson.Result) {
	if !result.Exists() {
		return
	}
	changed := false
	switch method {
	case "initialize":
		if !t.sawInit {
			t.sawInit, changed = true, true
			t.facts.ServerInfo = json.RawMessage(result.Get("serverInfo").Raw)
			t.facts.ProtocolVersion = result.Get("protocolVersion").String()
		}
	case "server/discover":
		if !t.sawInit {
			t.sawInit, changed = true, true
			t.facts.ServerInfo = json.RawMessage(result.Get(`_meta.io\.modelcontextprotocol/serverInfo`).Raw)
			if v := result.Get("supportedVersions"); v.IsArray() {
				vs := v.Array()
				t.facts.ProtocolVersion = vs[len(vs)-1].String()
			}
		}
	case "tools/list":
		if !t.sawTools {
			t.sawTools, changed = true, true
			t.facts.Tools = []string{}
			result.Get("tools.#.name").ForEach(func(_, v gjson.Result) bool {
				t.facts.Tools = append(t.facts.Tools, v.String())
				return true
			})
		}
	}
	if len(t.facts.ServerInfo) == 0 {
		t.facts.ServerInfo = nil
	}
	if changed {
		t.sink.Learned(t.facts)
	}
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
	t.sink.Submit(buildStep(c, endedAt, outcome, result, rpcErr, t.cap))
}

// idKey identifies a JSON-RPC id the way JSON-RPC matches them: by type and value.
// The string "1" is not the number 1, but a number the server re-printed (1.0 for 1,
// 1e3 for 1000) is the same id, exactly: ids past 2^53 must not collide by rounding.
func idKey(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	switch c := raw[0]; {
	case c == '"':
		s, _ := decodeString(raw)
		return "s" + s
	case c == '-' || (c >= '0' && c <= '9'):
		if plainInteger(raw) {
			return "n" + string(raw) // the common case, already in normal form
		}
		// big.Rat reads exponents by repeated multiplication; bound them so a hostile
		// 1e999999999 costs nothing.
		if len(raw) <= 64 && !hugeExponent(raw) {
			if r, ok := new(big.Rat).SetString(string(raw)); ok {
				return "n" + r.RatString()
			}
		}
		return "n" + string(raw)
	default:
		return "r" + string(raw)
	}
}

// plainInteger reports whether raw is an integer already written the one way big.Rat
// would write it: no fraction, exponent or leading zero, and not -0.
func plainInteger(raw []byte) bool {
	digits := raw
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && (len(digits) > 1 || len(raw) > 1)) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func hugeExponent(raw []byte) bool {
	i := bytes.IndexAny(raw, "eE")
	if i < 0 {
		return false
	}
	exp := strings.TrimLeft(string(raw[i+1:]), "+-0")
	return len(exp) > 4
}
