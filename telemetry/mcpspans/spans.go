// Package mcpspans makes the MCP spans and the operation-duration metric of what the
// proxy's bookkeeping sees (docs/otel.md): it is intercept's Observer, told every
// line either peer sent, and hands finished spans to a telemetry.Exporter. It runs on
// bookkeeping's goroutine, never on the host's path.
package mcpspans

import (
	"bytes"
	"crypto/sha256"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/telemetry"
)

// Tracing configures the Spans: a span of every request bookkeeping sees
// (docs/otel.md): one CLIENT span per request the host or a replay dispatch sends
// upstream, one SERVER span per request the server sends the host (sampling,
// elicitation), by the MCP semantic conventions.
type Tracing struct {
	Exporter *telemetry.Exporter
	// Capture puts the redacted, clipped arguments and result a report would carry in
	// gen_ai.tool.call.arguments and .result (opt-in in the conventions).
	Capture bool
	// Transport is network.transport: "pipe" for stdio, "tcp" for HTTP.
	Transport string
	// ServerAddress and ServerPort are the server's, for a URL; "" and 0 for stdio.
	ServerAddress string
	ServerPort    int
	// SessionID, when set, says the session's mcp.session.id (HTTP), "" when none.
	SessionID func() string
	// Drain bounds, at Close, the time bookkeeping may still spend on spans (default
	// SpanDrain); what it has not got to then is dropped, counted and said once.
	Drain time.Duration
	// Logger says, once, what Close's bound left undone (default slog.Default()).
	Logger *slog.Logger
	// ToolDrift says the pins tell ToolsListed of each answer to the host's
	// tools/list: its span then waits for it (drift.go).
	ToolDrift bool
}

// SpanDrain is Tracing.Drain's default: a second, as the exporter's flush has.
const SpanDrain = time.Second

// Caps on what a span takes from peer input.
const (
	maxSpanText  = 256     // a method, a name, an id, a status message
	maxCapture   = 8 << 10 // one captured arguments or result form
	maxOpenSpans = 100_000 // requests in flight that are followed
	maxSpanKey   = 256     // an open span's id key kept as it is (longer: hashed)
)

// Spans is the span side of bookkeeping: intercept.Options.Observer.
type Spans struct {
	tr       Tracing
	x        *telemetry.Exporter
	open     openSpans
	ids      telemetry.IDs // the spans' and traces' ids (bookkeeping's own generator)
	unsent   []*openSpan   // the last host message's, until its send time
	protocol string
	red      redact.Redactor
	kbuf     []byte
	base     []telemetry.Attr      // the session's attributes every span carries
	mattrs   []telemetry.Attr      // scratch: a span's metric attributes
	names    map[string]recentName // tool and prompt names as spans show them, by raw JSON
	// ops is what a (method, target) pair's spans share: the name, the attributes
	// that are the pair's, the protocol's and the session's (encoded once), and the
	// metric series of its successes (which has those attributes). Cleared when the
	// protocol version is learnt.
	ops    map[opKey]*opInfo
	lastOp *opInfo     // the one op looked up last
	free   []*openSpan // finished spans to reuse: Submit copies what it keeps
	// recent are the last names looked up, tried before the map.
	recent     [2]recentName
	nextRecent int
	// res is what the result of the answer being handled was reduced to, when it
	// streamed to the host (relay.StreamedResult); else nil.
	res relay.StreamedResult
	// shed says the line being handled lost its bytes in the queue (Line.Shed): its
	// result is a stand-in, of no size.
	shed bool
	// tasks are the tools/call spans whose answer was a task handle, by taskId: each
	// ends at the task's end (tasks.go).
	tasks spanTasks
	// off is set when Close's bound on spans passed (Stop): no more span is made.
	off atomic.Bool
	// held are the host's tools/list spans ended by the line at hand, and drifts
	// what the pins told of their answers (drift.go).
	held   []heldList
	drifts driftQueue
}

var _ intercept.Observer = (*Spans)(nil)

// maxNames bounds the tool and prompt names remembered (as the report side's).
const maxNames = 4096

type opKey struct{ method, target string }

type opInfo struct {
	method string
	target string
	name   string
	shared *telemetry.AttrSet // its spans' Shared
	proto  string             // the protocol version shared holds ("": none yet)
	series *telemetry.Series  // nil until a success was recorded
	ready  bool               // series was looked up (it is nil with no metrics)
	// sizes and sizesReady are series and ready of its successes' result sizes.
	sizes      *telemetry.Series
	sizesReady bool
}

// Caps on the hook's caches.
const (
	maxFree = 256
	maxOps  = 512
)

type openSpan struct {
	// ikey is the span's key in openSpans.ints (0: it is key in openSpans.strs).
	ikey   uint64
	key    string
	sp     telemetry.Span
	op     *opInfo
	method string
	target string // tool or prompt name
	tool   bool   // a tools/call
	prompt bool
	// sampled is false when the host's traceparent said not to sample: no span,
	// still the metric.
	sampled bool
	// prev and next link the open spans that are not the server's (openSpans.calls).
	prev, next *openSpan
	// taskID is the task a tasks/* request names, or the task a tools/call became
	// (then task2025 says of which era): such a call's span lasts to the task's end
	// (spanTasks).
	taskID   string
	task2025 bool
	// size is the bytes of the result of a tools/call or tools/list, recorded as
	// its size metric when the span ends (0: none).
	size int64
}

// newSpan is a span to fill: a finished one reused, or a new one.
func (h *Spans) newSpan() *openSpan {
	if n := len(h.free); n > 0 {
		s := h.free[n-1]
		h.free = h.free[:n-1]
		return s
	}
	return &openSpan{sp: telemetry.Span{Attrs: make([]telemetry.Attr, 0, 4)}}
}

// release takes back a finished span: what it held is cleared, its attributes'
// room kept.
func (h *Spans) release(s *openSpan) {
	if len(h.free) >= maxFree || cap(s.sp.Attrs) > 64 {
		return
	}
	clear(s.sp.Attrs) // (past its length it was cleared when last released)
	attrs := s.sp.Attrs[:0]
	*s = openSpan{sp: telemetry.Span{Attrs: attrs}}
	h.free = append(h.free, s)
}

// op is what the spans of (method, target) share.
func (h *Spans) op(method, target string) *opInfo {
	if o := h.lastOp; o != nil && o.method == method && o.target == target && o.proto == h.protocol {
		return o // a host calls one tool many times in a row
	}
	k := opKey{method, target}
	if o, ok := h.ops[k]; ok {
		h.lastOp = o
		return o
	}
	if h.ops == nil || len(h.ops) >= maxOps {
		h.ops = make(map[opKey]*opInfo)
	}
	o := &opInfo{method: method, target: target, name: method, proto: h.protocol}
	if target != "" {
		o.name = method + " " + target
	}
	as := append(h.mattrs[:0], telemetry.String("mcp.method.name", method))
	switch method {
	case "tools/call":
		as = append(as, telemetry.String("gen_ai.operation.name", "execute_tool"), telemetry.String("gen_ai.tool.name", target))
	case "prompts/get":
		as = append(as, telemetry.String("gen_ai.prompt.name", target))
	}
	if h.protocol != "" {
		as = append(as, telemetry.String("mcp.protocol.version", h.protocol))
	}
	as = append(as, h.base...)
	o.shared = telemetry.NewAttrSet(as)
	h.mattrs = as[:0]
	h.ops[k] = o
	h.lastOp = o
	return o
}

// New is the span side of bookkeeping of tr, for intercept.Options.Observer.
func New(tr Tracing) *Spans { return newSpanHook(tr) }

func newSpanHook(tr Tracing) *Spans {
	if tr.Drain <= 0 {
		tr.Drain = SpanDrain
	}
	if tr.Logger == nil {
		tr.Logger = slog.Default()
	}
	h := &Spans{tr: tr, x: tr.Exporter, open: openSpans{ints: make(map[uint64]*openSpan), strs: make(map[string]*openSpan)},
		ids: telemetry.NewIDs()}
	if tr.Transport != "" {
		h.base = append(h.base, telemetry.String("network.transport", tr.Transport))
	}
	if tr.ServerAddress != "" {
		h.base = append(h.base, telemetry.String("server.address", tr.ServerAddress))
		if tr.ServerPort > 0 {
			h.base = append(h.base, telemetry.Int("server.port", int64(tr.ServerPort)))
		}
	}
	h.x.SetSession(h.base)
	return h
}

// Drain is Tracing.Drain (intercept.Observer).
func (h *Spans) Drain() time.Duration { return h.tr.Drain }

// Stop is told when Close's bound passed: no more span is made (intercept.Observer).
func (h *Spans) Stop() { h.off.Store(true) }

// Done counts and says, once, what Close's bound left undone: the spans still open
// (never ended, never exported) and the lines never looked at (intercept.Observer).
func (h *Spans) Done(left int) {
	if !h.off.Load() {
		return
	}
	open := h.open.len() + len(h.held)
	h.x.Dropped(open, "the proxy exited before its bookkeeping made them")
	h.tr.Logger.Warn("OpenTelemetry: bookkeeping did not finish its spans within the exit's bound; the rest are dropped",
		"bound", h.tr.Drain, "open_spans", open, "messages_not_looked_at", left)
}

// Sent gives the host's requests told last their start (intercept.Observer).
func (h *Spans) Sent(at time.Time) {
	if h.off.Load() {
		return
	}
	h.flushUnsent(at)
}

// Line looks at one line before the report side does (intercept.Observer).
func (h *Spans) Line(l *intercept.Line) {
	if h.off.Load() {
		return
	}
	h.res, h.shed = l.Result, l.Shed
	defer func() { h.res, h.shed = nil, false }()
	switch l.From {
	case intercept.FromHost:
		h.flushUnsent(l.At)
		l.Each(func(m *intercept.Message) {
			f := m.Fields
			switch {
			case f.Method != nil:
				if s := h.request(m, "h", l.At, nil, telemetry.KindClient); s != nil {
					h.unsent = append(h.unsent, s)
				}
				h.cancel(f, "h", false, l.At)
			case f.ID != nil:
				h.end("s", f, l.At) // the host's answer to the server's request
			}
		})
	case intercept.FromProxy:
		var origin *string
		if l.Origin != "" {
			origin = &l.Origin
		}
		l.Each(func(m *intercept.Message) {
			if m.Fields.Method != nil {
				h.request(m, "p", l.At, origin, telemetry.KindClient)
				h.cancel(m.Fields, "p", l.TimedOut, l.At)
			}
		})
	case intercept.FromServer:
		l.Each(func(m *intercept.Message) {
			f := m.Fields
			switch {
			case f.Method != nil:
				h.request(m, "s", l.At, nil, telemetry.KindServer)
				if f.ID == nil && h.tasks.len() > 0 {
					h.tasks.notified(h, f, l.At)
				}
			case f.ID != nil:
				h.end("h", f, l.At)
			}
		})
	case intercept.ToProxy:
		l.Each(func(m *intercept.Message) {
			if f := m.Fields; f.Method == nil && f.ID != nil {
				h.end("p", f, l.At)
			}
		})
	}
}

// Lost ends the spans of what was in flight (intercept.Observer).
func (h *Spans) Lost(l *intercept.Lost) {
	if h.off.Load() {
		return
	}
	h.flushUnsent(l.At)
	spared := sparedSet(l.Spared, spanKey)
	for s := range h.open.all() {
		if h.off.Load() {
			return // Close's bound passed: the spans left open are counted there
		}
		if s.prefix() == 'h' && spared != nil {
			if _, ok := spared[s.idKey()]; ok {
				continue
			}
		}
		h.open.del(s)
		h.finish(s, l.At, "upstream_lost", "", "the server went away before answering")
	}
	if l.Final {
		h.tasks.endAll(h, l.At)
	}
}

// sparedSet is the set of the keys spared (each made by key first), nil when none
// are: each span in flight is looked up in it, where a scan of the list made n
// calls and m spared cost n·m steps (32,000 in flight, half spared: 22 times the
// time per call of 4,000).
func sparedSet(spared []string, key func(string) string) map[string]struct{} {
	if len(spared) == 0 {
		return nil
	}
	set := make(map[string]struct{}, len(spared))
	for _, k := range spared {
		set[key(k)] = struct{}{}
	}
	return set
}

func (h *Spans) flushUnsent(at time.Time) {
	for _, s := range h.unsent {
		s.sp.Start = at
	}
	h.unsent = h.unsent[:0]
}

// request starts the span of a request (a notification makes none).
func (h *Spans) request(m *intercept.Message, prefix string, at time.Time, origin *string, kind int) *openSpan {
	f := m.Fields
	if f.ID == nil || h.open.len() >= maxOpenSpans {
		return nil
	}
	method := h.name(f.Method)
	s := h.newSpan()
	s.method, s.sampled = method, true
	s.sp.Kind, s.sp.Start, s.sp.SpanID = kind, at, h.ids.SpanID()
	kb := h.key(f.ID)
	if ik, ok := intKey(prefix, kb); ok {
		s.ikey = ik
	} else {
		s.key = prefix + string(kb)
	}
	switch {
	case f.ID[0] == '"':
		s.sp.Attrs = append(s.sp.Attrs, telemetry.String("jsonrpc.request.id", text(f.ID)))
	case len(f.ID) > 64 || string(f.ID) == "null":
		// No attribute: a number past 64 digits is no id worth its bytes in a span.
	case s.ikey != 0 && string(kb) == string(f.ID):
		// A plain integer below 10^18, its own key: its text is made as the span is
		// encoded (string(f.ID) was a string allocated per span).
		s.sp.Attrs = append(s.sp.Attrs, telemetry.IntString("jsonrpc.request.id", int64(s.ikey&(1<<intKeyShift-1))))
	case len(s.key) == len(prefix)+len(f.ID) && s.key[len(prefix):] == string(f.ID):
		// Another id that is its own key (jsonlex.IDKeyBytes): its text is there.
		s.sp.Attrs = append(s.sp.Attrs, telemetry.String("jsonrpc.request.id", s.key[len(prefix):]))
	default:
		s.sp.Attrs = append(s.sp.Attrs, telemetry.String("jsonrpc.request.id", string(f.ID))) // a number
	}
	var params []byte
	if len(f.Params) > 0 && f.Params[0] == '{' {
		params = f.Params
	}
	switch method {
	case "tools/call":
		s.tool = true
		s.target = h.name(m.ParamsName())
		if h.tr.Capture {
			args := jsonlex.Get(params, "arguments")
			if args == nil {
				args = []byte(`{}`)
			}
			out, _ := h.red.Report(args, maxCapture)
			s.sp.Attrs = append(s.sp.Attrs, telemetry.String("gen_ai.tool.call.arguments", string(out)))
		}
	case "prompts/get":
		s.prompt = true
		s.target = h.name(m.ParamsName())
	case "tasks/get", "tasks/result", "tasks/cancel":
		s.taskID = intercept.TaskID(jsonlex.Get(params, "taskId"))
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if uri := jsonlex.Get(params, "uri"); len(uri) > 0 && uri[0] == '"' {
			s.sp.Attrs = append(s.sp.Attrs, telemetry.String("mcp.resource.uri", redact.Label(jsonlex.StringOf(uri), 2*maxSpanText)))
		}
	}
	s.op = h.op(method, s.target)
	s.sp.Name = s.op.name
	if origin != nil {
		s.sp.Attrs = append(s.sp.Attrs, telemetry.String("bir.dispatch.id", redact.Label(*origin, maxSpanText)))
	}
	h.parent(s, params, kind)
	if old, dup := h.open.find(s.ikey, s.key); dup {
		h.open.del(old)
		h.finish(old, at, "_OTHER", "", "the request id was used again before it was answered")
	}
	h.open.put(s)
	return s
}

// parent gives s its trace: the host's traceparent from params._meta (the
// conventions' propagation), or for a server's request the one call in flight it can
// only have come from, or else a new trace.
func (h *Spans) parent(s *openSpan, params []byte, kind int) {
	if tc, ok := telemetry.FromMeta(params); ok {
		s.sp.TraceID, s.sp.Parent, s.sp.RemoteParent, s.sp.Flags = tc.TraceID, tc.SpanID, true, tc.Flags
		s.sampled = tc.Sampled()
		s.sp.TraceState = tc.State
		return
	}
	if kind == telemetry.KindServer {
		// From the index of the host's and the proxy's requests in flight: a scan of
		// every open span here went through the server's own, 40,000 roots/list the
		// host left unanswered made 800 million steps (the proxy exited 13-50 s after
		// the host left; 100,000 kept a core busy for minutes).
		if only := h.open.onlyCall(); only != nil {
			s.sp.TraceID, s.sp.Parent, s.sp.Flags, s.sampled = only.sp.TraceID, only.sp.SpanID, only.sp.Flags, only.sampled
			s.sp.TraceState = only.sp.TraceState
			return
		}
	}
	s.sp.TraceID, s.sp.Flags = h.ids.TraceID(), 1
}

// isErrorKey is what a result with isError holds, spelt plainly.
var isErrorKey = []byte(`"isError"`)

// unicodeEscape is what any key spelt with escapes holds when the name has no
// character with a one-character escape (\n, \", \/...): "isError".
var unicodeEscape = []byte(`\u`)

// mayHaveKey says whether obj may hold a member named by key (quoted, plainly spelt,
// of letters and '_' only): it holds the plain spelling, or a \u escape, which a
// spelling with escapes needs. Only then is it read (jsonlex.Get, which compares keys
// as the host's JSON.parse does, escapes decoded).
func mayHaveKey(obj, key []byte) bool {
	// The name and its closing quote only: JSON is full of the opening quote's byte,
	// from which bytes.Index would start again and again. (A longer key ending so
	// only makes it read.)
	return bytes.Contains(obj, key[1:]) || bytes.Contains(obj, unicodeEscape)
}

// isToolError says whether a tools/call result says isError: true. The result is
// read only when it may: when some plain "isError" in it is followed by true, or it
// holds a \u escape (a key spelt "is\u0045rror" is the host's isError too). Most
// results have no isError or a false one.
func isToolError(result []byte) bool {
	if lastIsPlainFalse(result) {
		return false // the last "isError" wins, and it is false
	}
	if !plainTrue(result) && !bytes.Contains(result, unicodeEscape) {
		return false
	}
	return intercept.ReadToolResult(result).IsError
}

// lastIsPlainFalse says whether the last member of the object result is, plainly
// spelt, "isError": false, read backwards from its closing brace: where SDKs put it
// when they say it. The brace, the false before it and the colon before that are
// outside any string (result is one JSON value), so the string before the colon is
// the member's key; its opening quote is one when a ',' or '{' comes before it.
func lastIsPlainFalse(result []byte) bool {
	i := skipWSBack(result, len(result))
	if i == 0 || result[i-1] != '}' {
		return false
	}
	i = skipWSBack(result, i-1)
	if !bytes.HasSuffix(result[:i], []byte("false")) {
		return false
	}
	i = skipWSBack(result, i-len("false"))
	if i == 0 || result[i-1] != ':' {
		return false
	}
	i = skipWSBack(result, i-1)
	if !bytes.HasSuffix(result[:i], isErrorKey) {
		return false
	}
	i = skipWSBack(result, i-len(isErrorKey))
	return i > 0 && (result[i-1] == ',' || result[i-1] == '{')
}

// skipWSBack is the index just past the last byte of b[:i] that is not JSON
// whitespace (0 when there is none).
func skipWSBack(b []byte, i int) int {
	for i > 0 && (b[i-1] == ' ' || b[i-1] == '\t' || b[i-1] == '\r' || b[i-1] == '\n') {
		i--
	}
	return i
}

// plainTrue says whether some plainly spelt "isError" in result is followed by a
// colon and true (or a longer name ending so is: then the result is read).
func plainTrue(result []byte) bool {
	key := isErrorKey[1:] // as in mayHaveKey
	for rest := result; ; {
		i := bytes.Index(rest, key)
		if i < 0 {
			return false
		}
		rest = rest[i+len(key):]
		j := skipWS(rest, 0)
		if j < len(rest) && rest[j] == ':' {
			j = skipWS(rest, j+1)
			if bytes.HasPrefix(rest[j:], []byte("true")) {
				return true
			}
		}
	}
}

// skipWS is the index of the first byte of b at or past i that is not JSON
// whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// cancel ends the span of the request a notifications/cancelled names.
func (h *Spans) cancel(f jsonlex.Fields, prefix string, timedOut bool, at time.Time) {
	if f.ID != nil || !jsonlex.KeyIs(f.Method, "notifications/cancelled") || len(f.Params) == 0 || f.Params[0] != '{' {
		return
	}
	s, ok := h.open.take(prefix, h.key(jsonlex.Get(f.Params, "requestId")))
	if !ok {
		return
	}
	if timedOut {
		h.finish(s, at, "timeout", "", "the dispatch's timeout passed")
		return
	}
	h.finish(s, at, "cancelled", "", "cancelled")
}

// end ends the span a response answers.
func (h *Spans) end(prefix string, f jsonlex.Fields, at time.Time) {
	s, ok := h.open.take(prefix, h.key(f.ID))
	if !ok {
		return
	}
	if h.res != nil {
		if e := h.res.Error(); e != nil {
			f.Error = e
		}
	}
	switch {
	case f.Error != nil:
		code := jsonlex.Get(f.Error, "code")
		errType, rpcCode := "_OTHER", ""
		if _, err := strconv.ParseInt(string(code), 10, 64); err == nil {
			errType, rpcCode = string(code), string(code)
		}
		if s.taskID != "" && s.method == "tasks/result" {
			h.tasks.failed(h, s.taskID, f.Error, at)
		}
		h.finish(s, at, errType, rpcCode, text(jsonlex.Get(f.Error, "message")))
		return
	case s.method == "initialize" && prefix != "s":
		h.learn(f.Result)
	case s.taskID != "":
		h.tasks.answer(h, s, f.Result, at)
	}
	if (s.tool || s.method == "tools/list") && !h.shed {
		s.size = int64(len(f.Result))
		if h.res != nil {
			s.size = h.res.ResultBytes() // counted as it streamed past
		}
	}
	if s.tool && h.res == nil {
		if ri := intercept.ReadToolResult(f.Result); ri.Task {
			s.size = 0 // a handle: the size is the task's result's (tasks.go)
			// A handle, not the call's end: the span lasts to the task's.
			s.taskID, s.task2025 = ri.TaskID, ri.Task2025
			h.tasks.open(h, s, at)
			return
		}
	}
	if s.tool {
		if h.toolError(f.Result) {
			h.capture(s, f.Result)
			h.finish(s, at, "tool_error", "", toolErrorText(f.Result))
			return
		}
		h.capture(s, f.Result)
	}
	h.finish(s, at, "", "", "")
}

func (h *Spans) capture(s *openSpan, result []byte) {
	if !h.tr.Capture || result == nil {
		return
	}
	var out []byte
	if h.res != nil {
		if out, _ = h.res.Report(maxCapture); out == nil {
			return
		}
	} else {
		out, _ = h.red.Report(result, maxCapture)
	}
	s.sp.Attrs = append(s.sp.Attrs, telemetry.String("gen_ai.tool.call.result", string(out)))
}

// toolErrorText is a tool error's status message: the text of its first text content,
// redacted and clipped as the span's labels are ("" when it has none, or its answer
// streamed past and is not here).
func toolErrorText(result []byte) string {
	var msg string
	jsonlex.EachElement(jsonlex.Get(result, "content"), func(item []byte) {
		if msg == "" && jsonlex.StringOf(jsonlex.Get(item, "type")) == "text" {
			msg = text(jsonlex.Get(item, "text"))
		}
	})
	return msg
}

// toolError says the result of the answer being handled is a tool's error.
func (h *Spans) toolError(result []byte) bool {
	if h.res != nil {
		_, isError := h.res.Kind()
		return isError
	}
	return isToolError(result)
}

// learn takes the protocol version and serverInfo from the initialize answer.
func (h *Spans) learn(result []byte) {
	if len(result) == 0 || result[0] != '{' {
		return
	}
	if v := jsonlex.Get(result, "protocolVersion"); len(v) > 0 && v[0] == '"' {
		h.protocol = redact.Label(jsonlex.StringOf(v), 64)
		clear(h.ops) // their series are of no protocol version
		h.x.SetSession(append(append([]telemetry.Attr(nil), h.base...), telemetry.String("mcp.protocol.version", h.protocol)))
	}
	if info := jsonlex.Get(result, "serverInfo"); len(info) > 0 && info[0] == '{' {
		h.x.SetServer(text(jsonlex.Get(info, "name")), text(jsonlex.Get(info, "version")))
	}
}

// finish sends the span and records the metric; errType "" is a success.
func (h *Spans) finish(s *openSpan, at time.Time, errType, rpcCode, msg string) {
	sp := &s.sp
	sp.End = at
	if sp.End.Before(sp.Start) {
		sp.End = sp.Start
	}
	o := s.op
	if o.proto != h.protocol {
		// Begun before the protocol version was learnt, it ends with it.
		o = h.op(s.method, s.target)
	}
	sp.Shared = o.shared
	if h.tr.SessionID != nil {
		if id := h.tr.SessionID(); id != "" {
			sp.Attrs = append(sp.Attrs, telemetry.String("mcp.session.id", redact.Label(id, maxSpanText)))
		}
	}
	if rpcCode != "" {
		sp.Attrs = append(sp.Attrs, telemetry.String("rpc.response.status_code", rpcCode))
	}
	if errType != "" {
		sp.Attrs = append(sp.Attrs, telemetry.String("error.type", errType))
		sp.Status, sp.StatusMsg = telemetry.StatusError, msg
	}
	if sp.Kind == telemetry.KindClient {
		switch {
		case errType == "" && o.ready:
			o.series.Record(sp.End.Sub(sp.Start))
		case errType == "":
			h.mattrs = metricAttrs(metricAttrs(h.mattrs[:0], o.shared.Attrs()), sp.Attrs)
			o.series, o.ready = h.x.Series(h.mattrs), true
			o.series.Record(sp.End.Sub(sp.Start))
		default:
			h.mattrs = metricAttrs(metricAttrs(h.mattrs[:0], o.shared.Attrs()), sp.Attrs)
			h.x.Record(h.mattrs, sp.End.Sub(sp.Start))
		}
		if s.size > 0 {
			h.recordSize(s, o, errType)
		}
	}
	// An answer can come before its request's send time: the span is not to get
	// that time once it is another's.
	for i, u := range h.unsent {
		if u == s {
			h.unsent = append(h.unsent[:i], h.unsent[i+1:]...)
			break
		}
	}
	if h.tr.ToolDrift && s.method == "tools/list" && s.prefix() == 'h' {
		h.held = append(h.held, heldList{s, at}) // sent by Looked, with its drift
		return
	}
	if s.sampled {
		h.x.Submit(*sp)
	}
	h.release(s)
}

// recordSize records s's result size (s.size) in the histogram of its method, with
// the duration metric's attributes.
func (h *Spans) recordSize(s *openSpan, o *opInfo, errType string) {
	name := telemetry.ToolResultSize
	if s.method == "tools/list" {
		name = telemetry.ToolsListSize
	}
	if errType == "" {
		if !o.sizesReady {
			h.mattrs = metricAttrs(metricAttrs(h.mattrs[:0], o.shared.Attrs()), s.sp.Attrs)
			o.sizes, o.sizesReady = h.x.SizeSeries(name, h.mattrs), true
		}
		o.sizes.Add(float64(s.size))
		return
	}
	h.mattrs = metricAttrs(metricAttrs(h.mattrs[:0], o.shared.Attrs()), s.sp.Attrs)
	h.x.RecordSize(name, h.mattrs, s.size)
}

// metricAttrs are the span's attributes the duration metric carries: the
// low-cardinality ones of the conventions' table.
func metricAttrs(out, as []telemetry.Attr) []telemetry.Attr {
	for _, a := range as {
		switch a.Key {
		case "mcp.method.name", "error.type", "gen_ai.prompt.name", "gen_ai.tool.name", "rpc.response.status_code",
			"gen_ai.operation.name", "mcp.protocol.version", "network.transport", "server.address", "server.port":
			out = append(out, a)
		}
	}
	return out
}

// name is a tool's or prompt's name as spans show it, from its raw JSON string: a
// server has a handful, named again and again, each decoded and redacted once.
func (h *Spans) name(raw []byte) string {
	// The method and the tool of the call before are most often this call's too.
	for i := range h.recent {
		if r := &h.recent[i]; r.raw == string(raw) && r.raw != "" {
			return r.name
		}
	}
	n, ok := h.lookName(raw)
	if ok {
		h.recent[h.nextRecent] = n
		h.nextRecent = (h.nextRecent + 1) % len(h.recent)
	}
	return n.name
}

// recentName is a raw name and the name spans show for it.
type recentName struct{ raw, name string }

// lookName is name from the cache of all names; ok says it is (or now is) in it, its
// raw a string of its own.
func (h *Spans) lookName(raw []byte) (n recentName, ok bool) {
	if n, ok := h.names[string(raw)]; ok {
		return n, true
	}
	if h.names == nil || len(h.names) >= maxNames {
		h.names = make(map[string]recentName)
	}
	n = recentName{name: text(raw)}
	if len(raw) <= 4*maxSpanText {
		n.raw = string(raw)
		h.names[n.raw] = n
		return n, true
	}
	return n, false
}

// key is an id's jsonlex.IDKey: in raw for the usual ids, else in h's scratch.
// An IDKey past maxSpanKey bytes is kept as '#' and its SHA-256 (no IDKey starts with
// '#'): a host's ids are of any length, and up to maxOpenSpans of them are kept.
func (h *Spans) key(raw []byte) []byte {
	kb, ok := jsonlex.IDKeyBytes(raw)
	if !ok {
		h.kbuf = append(h.kbuf[:0], jsonlex.IDKey(raw)...)
		kb = h.kbuf
	}
	if len(kb) > maxSpanKey {
		sum := sha256.Sum256(kb)
		h.kbuf = append(append(h.kbuf[:0], '#'), sum[:]...)
		return h.kbuf
	}
	return kb
}

// spanKey is what key makes of an IDKey.
func spanKey(k string) string {
	if len(k) > maxSpanKey {
		sum := sha256.Sum256([]byte(k))
		return "#" + string(sum[:])
	}
	return k
}

// openSpans are the spans of the requests in flight, by prefix ("h" the host's, "p"
// the proxy's own, "s" the server's) and jsonlex.IDKey. A key that is a plain
// non-negative integer of at most 18 digits, as hosts number their requests, is in
// ints (intKey: no string is made, hashed and compared per request); any other is in
// strs, as prefix + key. A key is in one of them only: it is an integer's or not.
type openSpans struct {
	ints map[uint64]*openSpan
	strs map[string]*openSpan
	// calls links the open spans of prefix 'h' and 'p' (the requests a server's request
	// can have come from), ncalls of them: a server's request asks whether there is
	// exactly one, in a step whatever the number of the server's own.
	calls  *openSpan
	ncalls int
}

// intKey is ints' key of a prefix and an IDKey that is a plain integer below 10^18
// (its own key: no leading zero, no sign); ok false for any other.
func intKey(prefix string, key []byte) (uint64, bool) {
	if len(key) == 0 || len(key) > 18 || (key[0] == '0' && len(key) > 1) {
		return 0, false
	}
	var v uint64
	for _, c := range key {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	var p uint64
	switch prefix {
	case "h":
		p = 1
	case "p":
		p = 2
	case "s":
		p = 3
	default:
		return 0, false
	}
	return p<<intKeyShift | v, true // never 0: p is not
}

// intKeyShift puts the prefix above any 18-digit value (10^18 < 2^60).
const intKeyShift = 60

func (o *openSpans) len() int { return len(o.ints) + len(o.strs) }

// find is the span of an ikey, or of a string key when ikey is 0.
func (o *openSpans) find(ikey uint64, key string) (*openSpan, bool) {
	if ikey != 0 {
		s, ok := o.ints[ikey]
		return s, ok
	}
	s, ok := o.strs[key]
	return s, ok
}

// take removes and returns the span of prefix and key (an IDKey).
func (o *openSpans) take(prefix string, key []byte) (*openSpan, bool) {
	if ik, ok := intKey(prefix, key); ok {
		s, ok := o.ints[ik]
		if ok {
			o.del(s)
		}
		return s, ok
	}
	if len(o.strs) == 0 {
		return nil, false
	}
	var b [64]byte
	k := append(append(b[:0], prefix...), key...) // on the stack for the usual ids
	s, ok := o.strs[string(k)]
	if ok {
		o.del(s)
	}
	return s, ok
}

func (o *openSpans) put(s *openSpan) {
	if s.prefix() != 's' {
		s.prev, s.next = nil, o.calls
		if o.calls != nil {
			o.calls.prev = s
		}
		o.calls = s
		o.ncalls++
	}
	if s.ikey != 0 {
		o.ints[s.ikey] = s
		return
	}
	o.strs[s.key] = s
}

func (o *openSpans) del(s *openSpan) {
	o.unlink(s)
	if s.ikey != 0 {
		delete(o.ints, s.ikey)
		return
	}
	delete(o.strs, s.key)
}

// unlink takes s, leaving the open spans, out of calls.
func (o *openSpans) unlink(s *openSpan) {
	if s.prefix() == 's' {
		return
	}
	if s.prev != nil {
		s.prev.next = s.next
	} else if o.calls == s {
		o.calls = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	}
	s.prev, s.next = nil, nil
	o.ncalls--
}

// onlyCall is the one open span of the host's or the proxy's, nil when there are
// none or more than one.
func (o *openSpans) onlyCall() *openSpan {
	if o.ncalls != 1 {
		return nil
	}
	return o.calls
}

// all is every open span (one may be deleted as it is yielded).
func (o *openSpans) all() func(yield func(*openSpan) bool) {
	return func(yield func(*openSpan) bool) {
		for _, s := range o.ints {
			if !yield(s) {
				return
			}
		}
		for _, s := range o.strs {
			if !yield(s) {
				return
			}
		}
	}
}

// prefix is the span's key's prefix: 'h', 'p' or 's'.
func (s *openSpan) prefix() byte {
	if s.ikey != 0 {
		return "?hps"[s.ikey>>intKeyShift]
	}
	return s.key[0]
}

// idKey is the span's request id's jsonlex.IDKey.
func (s *openSpan) idKey() string {
	if s.ikey != 0 {
		return strconv.FormatUint(s.ikey&(1<<intKeyShift-1), 10)
	}
	return s.key[1:]
}

// text is the string a raw JSON string holds, redacted and clipped for a span; a
// non-string is "".
func text(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 && raw[len(raw)-1] == '"' {
		return redact.Label(string(raw[1:len(raw)-1]), maxSpanText)
	}
	return redact.Label(jsonlex.StringOf(raw), maxSpanText)
}
