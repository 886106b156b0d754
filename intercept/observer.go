package intercept

import (
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/mcptask"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/report"
)

// Observer is told what bookkeeping looks at, for spans (telemetry/mcpspans makes
// the MCP spans from it; docs/otel.md): every line of JSON-RPC of either peer's and
// the proxy's own, the time the host's requests reached the server, the server's
// loss. It is told on bookkeeping's goroutine, never on a pump's, in the order the
// pumps saw the lines, each before the report side looks at it; its calls must not
// wait (they hold up reports, not the host). With Options.Observer set, every
// message is queued for bookkeeping, not only tools/call's.
//
// The events are messages, not calls: a span is made of each request of any method,
// from either side, and parented by what its own message carries (params._meta), so
// the observer reads the messages itself; what bookkeeping reads of a tools/call
// result it shares through ReadToolResult and TaskID, so a span and its report agree.
type Observer interface {
	// Line is one line a peer sent (or the proxy sent): Line.Each walks its
	// messages. The line is the observer's only during the call.
	Line(l *Line)
	// Sent says the host's line told last reached the server at at (its requests'
	// start). A host line told before its Sent has none yet.
	Sent(at time.Time)
	// Lost says the server went away at l.At: what was in flight to it will not be
	// answered, but for l.Spared; l.Final says it is the session's end (Close).
	Lost(l *Lost)
	// Looked is told when the report side has looked at the line told last
	// (Options.ToolsListed was told its tools/list answer): what the observer held
	// back for that may go.
	Looked()
	// Drain is how long Close waits for bookkeeping's last events to be told; past
	// it Stop is called, from Close's goroutine, while a call may be under way.
	Drain() time.Duration
	// Stop asks the observer to stop now: what it still does returns soon, and what
	// it is told after is only counted (by Done's left).
	Stop()
	// Done is told last, on bookkeeping's goroutine, when the session's events are
	// over: left is the lines with messages not told since Stop (0 when Stop was
	// not called).
	Done(left int)
}

// From says whose a Line is.
type From uint8

const (
	// FromHost is a line the host sent toward the server: its requests, and its
	// answers to the server's requests.
	FromHost From = iota + 1
	// FromServer is a line the server sent: its answers to the host's requests, its
	// requests and notifications.
	FromServer
	// FromProxy is a request or notification of the proxy's own (a replay dispatch,
	// its cancel), sent at the Line's At.
	FromProxy
	// ToProxy is the server's answer to a request of the proxy's own.
	ToProxy
)

// Line is one line of JSON-RPC bookkeeping looks at: one message or a batch.
type Line struct {
	From From
	// At is when it was read (FromHost, FromServer, ToProxy) or sent (FromProxy).
	At time.Time
	// Raw is the line as it crossed (a host tools/call without its correlation
	// key); nil when the queue shed its bytes (then Each tells nothing).
	Raw []byte
	// Origin is who asked for a FromProxy request: a dispatch id, or "".
	Origin string
	// TimedOut says a FromProxy notifications/cancelled was sent because its
	// request's deadline passed.
	TimedOut bool
	// Result is, for a FromServer answer that streamed to the host, what its result
	// was reduced to (relay.StreamedResult: its kind, error, captured report); then
	// Raw's result is a stand-in. Nil otherwise.
	Result relay.StreamedResult
	// Shed says the queue was over its byte budget: Raw is what was kept (an
	// answer's id and how it ended, with a stand-in result), not what crossed.
	Shed bool

	top rpcSpans // where the members of a lone message lie, from the pump's lex
	msg Message  // Each's, reused
}

// Message is one JSON-RPC message of a Line.
type Message struct {
	// Raw is the message, one JSON object.
	Raw []byte
	// Fields are its JSON-RPC members, as jsonlex.TopFields reads them.
	Fields jsonlex.Fields

	lexed bool   // the pump's lex said where params.name lies
	name  []byte // then it (nil: absent)
}

// ParamsName is the raw JSON of params' "name" member (nil when params is not an
// object or has none): from the pump's lex when there was one (the report side
// takes the tool's name from there too), else read here.
func (m *Message) ParamsName() []byte {
	p := m.Fields.Params
	if len(p) == 0 || p[0] != '{' {
		return nil
	}
	if m.lexed {
		return m.name
	}
	return jsonlex.Get(p, "name")
}

// Each calls f with each JSON-RPC message of the line, a batch's in order; the
// Message is f's only during the call. A member that is not an object is skipped.
func (l *Line) Each(f func(m *Message)) {
	if l.Raw == nil {
		return // shed: the bytes are gone
	}
	if l.top.ok {
		// Where the members lie, from the pump's lex: not read again here.
		l.msg = Message{Raw: l.top.obj.in(l.Raw), Fields: l.top.fields(l.Raw), lexed: true, name: l.top.name.in(l.Raw)}
		f(&l.msg)
		l.msg = Message{}
		return
	}
	jsonlex.EachMessage(l.Raw, func(m []byte) {
		if fl, ok := jsonlex.TopFields(m); ok {
			l.msg = Message{Raw: m, Fields: fl}
			f(&l.msg)
		}
	})
	l.msg = Message{}
}

// Lost is the server's loss (Observer.Lost).
type Lost struct {
	At time.Time
	// Spared are the jsonlex.IDKeys of the host's requests the upstream held back
	// from the server that went away, for the next one: they are still in flight.
	Spared []string
	// Final says the session ended (Close): calls kept open past their first
	// answer (a task's) end too.
	Final bool
}

// tell tells ic's observer the event. It is look's, before the tracker's turn (the
// bytes are still there).
func (ic *Interceptor) tell(ev *event, res relay.StreamedResult) {
	if ic.obsOff.Load() {
		if ev.msg != nil {
			ic.obsLeft++
		}
		return
	}
	o := ic.obs
	switch ev.kind {
	case evSent:
		o.Sent(ev.at)
		return
	case evLost:
		o.Lost(&Lost{At: ev.at, Spared: ev.spared, Final: ev.final})
		return
	}
	l := &ic.line
	*l = Line{At: ev.at, Raw: ev.msg, Shed: ev.shed}
	switch ev.kind {
	case evHost:
		l.From = FromHost
	case evUpstream:
		l.From, l.Result = FromServer, res
	case evProxy:
		l.From, l.Origin, l.TimedOut = FromProxy, ev.origin, ev.timedOut
	case evToProxy:
		l.From = ToProxy
	}
	if ev.top.ok && ev.msg != nil {
		l.top = ev.top
	}
	o.Line(l)
	*l = Line{}
}

// ToolResult is what bookkeeping reads of a tools/call result: what its report's
// outcome is made of, for a span to end as its report does.
type ToolResult struct {
	// InputRequired: resultType "input_required" (a round of a multi-round call).
	InputRequired bool
	// IsError: isError true (the last member of the name wins, as in JSON.parse).
	IsError bool
	// Task says the result is a task handle (SPEC §3.5) the host can follow, by
	// TaskID; Task2025 that it is 2025-11-25's ({"task": {...}}, its result from
	// tasks/result) rather than resultType "task".
	Task, Task2025 bool
	TaskID         string
}

// ReadToolResult reads a tools/call result as bookkeeping does.
func ReadToolResult(result []byte) ToolResult {
	ri := readResult(result)
	return ToolResult{InputRequired: ri.inputRequired, IsError: ri.isError, Task: ri.task, Task2025: ri.task2025, TaskID: ri.taskID}
}

// TaskID is a task id as bookkeeping keys it, from its raw JSON: the decoded string,
// or "" for anything that is not a string of at most 1,024 bytes.
func TaskID(raw []byte) string { return mcptask.IDString(raw) }

// MaxOpenTasks bounds the calls kept open past their first answer (tasks, rounds):
// past it the oldest ends task_unfinished. A span kept open for a task takes the
// same bound, so it ends as its report does.
const MaxOpenTasks = maxLaterCalls

// nopSink is the Sink of an Interceptor that observes with nothing recording.
type nopSink struct{}

func (nopSink) Submit(report.Step)         {}
func (nopSink) Learned(report.ServerFacts) {}
