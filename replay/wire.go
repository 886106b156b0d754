package replay

import (
	"bytes"
	"errors"
	"strconv"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/mcptask"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/report"
)

// dispatch is one tool call the recorder asked for.
type dispatch struct {
	id       string
	tool     string
	args     []byte        // the arguments object, compact (see compactObject); never nil once parsed
	timeout  time.Duration // 0: none
	arrived  time.Time
	deadline time.Time // arrived + timeout; zero when none
	size     int       // bytes it holds, for the queue's budget
	// refused is why the dispatch cannot be run as it came ("" when it can): it is
	// posted rpc_error -32602 at once and never reaches the server (SPEC §4).
	refused string

	// Set when it starts running.
	cancel    func(error)
	lostSince uint64 // the gate's lostSeq then: a later loss is the one that ends it
}

// pollAnswer is what one poll brought.
type pollAnswer struct {
	dispatches []*dispatch
	cancels    []string
	bad        int // dispatches without a dispatchId: nothing can be posted for them
	// excess counts the dispatches past parsePoll's limit: a poll answer of 64 MiB
	// holds millions of tiny ones, more than the results queue could ever hold an
	// answer for, and each parsed would cost a few hundred bytes more.
	excess int
}

// maxTimeout is the longest timeoutMs a dispatch is given (SPEC §4 clamps timeoutMs
// to [1, 3,600,000]): a recorder's 1e300 would otherwise overflow time.Duration to a
// negative wait and time the dispatch out at once.
const maxTimeout = time.Hour

// parsePoll reads a poll answer (SPEC §5: {dispatches: [{dispatchId, tool, arguments,
// timeoutMs?}], cancel: [dispatchId]}) with internal/jsonlex, which walks nesting
// with a loop: a recorder's answer nested ten million levels deep must cost a
// skip, not the stack overflow gjson's recursive validator died of. Each member is
// read by the duplicate-key rule (the last wins). ok is false when the answer is not
// one JSON object. A dispatch whose members are not what SPEC §4 allows is kept with
// refused set, so that the recorder is told why; its arguments are never sent. At
// most limit dispatches are read; the rest are only counted (excess).
func parsePoll(body []byte, now time.Time, limit int) (pollAnswer, bool) {
	var a pollAnswer
	i := jsonlex.SkipSpace(body, 0)
	var dispatches, cancels []byte
	end, ok := jsonlex.EachMember(body, i, func(m jsonlex.Member) bool {
		switch k := body[m.Key.Start:m.Key.End]; {
		case jsonlex.KeyIs(k, "dispatches"):
			dispatches = body[m.Value.Start:m.Value.End]
		case jsonlex.KeyIs(k, "cancel"):
			cancels = body[m.Value.Start:m.Value.End]
		}
		return true
	})
	if !ok || jsonlex.SkipSpace(body, end) != len(body) {
		return a, false
	}
	jsonlex.EachElement(dispatches, func(v []byte) {
		if len(a.dispatches) >= limit {
			a.excess++
			return
		}
		d, ok := parseDispatch(v, now)
		if !ok {
			a.bad++
			return
		}
		a.dispatches = append(a.dispatches, d)
	})
	jsonlex.EachElement(cancels, func(v []byte) {
		if id, ok := stringValue(v); ok {
			a.cancels = append(a.cancels, id)
		}
	})
	return a, true
}

// stringValue decodes v when it is a valid JSON string literal.
func stringValue(v []byte) (string, bool) {
	if len(v) == 0 || v[0] != '"' || !jsonlex.Valid(v) {
		return "", false
	}
	return jsonlex.DecodeString(v)
}

// parseDispatch reads one element of dispatches; ok is false when it has no usable
// dispatchId (nothing can be posted for it).
func parseDispatch(v []byte, now time.Time) (*dispatch, bool) {
	var id, tool, args, timeout []byte
	if _, ok := jsonlex.EachMember(v, 0, func(m jsonlex.Member) bool {
		val := v[m.Value.Start:m.Value.End]
		switch k := v[m.Key.Start:m.Key.End]; {
		case jsonlex.KeyIs(k, "dispatchId"):
			id = val
		case jsonlex.KeyIs(k, "tool"):
			tool = val
		case jsonlex.KeyIs(k, "arguments"):
			args = val
		case jsonlex.KeyIs(k, "timeoutMs"):
			timeout = val
		}
		return true
	}); !ok {
		return nil, false
	}
	dispID, ok := stringValue(id)
	if !ok || dispID == "" {
		return nil, false
	}
	d := &dispatch{id: dispID, arrived: now}
	defer func() { d.size = len(d.args) + len(d.tool) + len(d.id) + 128 }()
	name, ok := stringValue(tool)
	if !ok {
		d.refused = "the dispatch's tool is not a JSON string"
		return d, true
	}
	d.tool = name
	switch {
	case args == nil || string(args) == "null":
		// SPEC §4: absent or null arguments mean {}.
		d.args = []byte("{}")
	case args[0] != '{':
		d.refused = "the dispatch's arguments are not a JSON object"
		return d, true
	case !jsonlex.Valid(args):
		// A raw control character in a string among them (a line feed that would
		// end the stdio line), or any other break: not JSON, and never sent.
		d.refused = "the dispatch's arguments are not valid JSON"
		return d, true
	default:
		d.args = compactObject(args)
	}
	if timeout != nil && string(timeout) != "null" {
		t, ok := timeoutOf(timeout)
		if !ok {
			d.refused = "the dispatch's timeoutMs is not a number"
			return d, true
		}
		d.timeout = t
		d.deadline = now.Add(t)
	}
	return d, true
}

// timeoutOf reads timeoutMs, clamped to [1 ms, maxTimeout] (SPEC §4): a value past
// float64's range reads as infinite and is clamped like any other.
func timeoutOf(raw []byte) (time.Duration, bool) {
	if end, ok := jsonlex.NumberEnd(raw, 0); !ok || end != len(raw) {
		return 0, false
	}
	ms, err := strconv.ParseFloat(string(raw), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	// Compared as milliseconds, before any conversion: ms*1e6 of 1e300 overflows.
	switch {
	case ms >= float64(maxTimeout/time.Millisecond):
		return maxTimeout, true
	case ms <= 1:
		return time.Millisecond, true
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}

// compactObject re-emits the valid JSON object obj without the whitespace between its
// tokens (SPEC §4): strings are copied byte for byte, and since valid JSON has no raw
// control character inside a string, the result holds no line break at all — one
// that survived would end the stdio line and make the rest a message of its own.
func compactObject(obj []byte) []byte {
	out := make([]byte, 0, len(obj))
	for i := 0; i < len(obj); {
		switch c := obj[i]; {
		case jsonlex.IsSpace(c):
			i++
		case c == '"':
			j := jsonlex.SkipString(obj, i)
			out = append(out, obj[i:j]...)
			i = j
		default:
			j := i + 1
			for j < len(obj) && !jsonlex.IsSpace(obj[j]) && obj[j] != '"' {
				j++
			}
			out = append(out, obj[i:j]...)
			i = j
		}
	}
	return out
}

// callParams are the params of the tools/call a dispatch becomes: its tool and
// arguments, and in the stateless era the host's protocol _meta. No progressToken:
// progress for it would be sent to the host, which never asked.
func callParams(d *dispatch, meta []byte) []byte {
	b := make([]byte, 0, 64+len(d.tool)+len(d.args)+len(meta))
	b = append(b, `{"name":`...)
	b = jsonlex.AppendString(b, d.tool)
	b = append(b, `,"arguments":`...)
	b = append(b, d.args...)
	if meta != nil {
		// The host's own bytes, kept as they are (docs/replay.md), but a bare
		// carriage return between their tokens is valid JSON on a host's line and
		// would make relay.Call refuse every dispatch: then they are compacted.
		if bytes.ContainsAny(meta, "\r\n") && meta[0] == '{' && jsonlex.Valid(meta) {
			meta = compactObject(meta)
		}
		b = append(b, `,"_meta":`...)
		b = append(b, meta...)
	}
	return append(b, '}')
}

// outcome is how a dispatch ended, for its POST /proxy/result.
type outcome struct {
	name     string
	result   []byte // raw, from the upstream's answer
	err      []byte // raw JSON-RPC error, or one the proxy made
	clipped  bool
	duration time.Duration // from the request being sent to its end; 0 if never sent
}

// classify reads the upstream's answer as the step report does (intercept): an error
// member is rpc_error; a result with resultType input_required is posted as it is, for
// the recorder to decide what comes next; isError true is tool_error; else ok.
func classify(resp []byte) outcome {
	f, ok := jsonlex.TopFields(resp)
	switch {
	case !ok:
		return outcome{name: report.OutcomeRPCError, err: proxyError("the server's answer could not be read")}
	case f.Error != nil:
		return outcome{name: report.OutcomeRPCError, err: f.Error}
	case f.Result == nil:
		return outcome{name: report.OutcomeRPCError, err: proxyError("the server answered with neither result nor error")}
	}
	return classifyResult(f.Result)
}

// classifyResult reads a tool's result: input_required (posted as it is), tool_error
// (isError true) or ok.
func classifyResult(result []byte) outcome {
	switch {
	case jsonlex.StringOf(jsonlex.Get(result, "resultType")) == "input_required":
		return outcome{name: report.OutcomeInputRequired, result: result}
	case string(jsonlex.Get(result, "isError")) == "true":
		return outcome{name: report.OutcomeToolError, result: result}
	default:
		return outcome{name: report.OutcomeOK, result: result}
	}
}

// invalidDispatch is the JSON-RPC error of a dispatch refused as it came (SPEC §4:
// -32602, invalid params).
func invalidDispatch(message string) []byte {
	b := []byte(`{"code":-32602,"message":`)
	b = jsonlex.AppendString(b, "bir-proxy refused the dispatch: "+message)
	return append(b, '}')
}

// proxyError is a JSON-RPC error object for an end the proxy saw rather than the
// server answered (a timeout, a cancel, the server gone), so the recorder has a
// message to show.
func proxyError(message string) []byte {
	b := []byte(`{"code":-32000,"message":`)
	b = jsonlex.AppendString(b, message)
	return append(b, '}')
}

// maxResultPost bounds the result a POST /proxy/result carries as the upstream sent
// it. A larger one is clipped (and redacted) the way step reports are, and says so
// with resultClipped: a local recorder comparing a replay needs the shape, not 100 MB.
const maxResultPost = 16 << 20

// resultBody is the POST /proxy/result body: the raw result or error spliced in as
// the upstream sent it, never re-encoded.
func resultBody(proxyID string, d *dispatch, o outcome) []byte {
	if len(o.result) > maxResultPost {
		o.result, o.clipped = redact.Report(o.result, maxResultPost)
	}
	b := make([]byte, 0, 160+len(d.id)+len(o.result)+len(o.err))
	b = append(b, `{"proxyId":`...)
	b = jsonlex.AppendString(b, proxyID)
	b = append(b, `,"dispatchId":`...)
	b = jsonlex.AppendString(b, d.id)
	b = append(b, `,"outcome":`...)
	b = jsonlex.AppendString(b, o.name)
	if o.result != nil {
		b = append(b, `,"result":`...)
		b = append(b, validOrNote(o.result)...)
		if o.clipped {
			b = append(b, `,"resultClipped":true`...)
		}
	}
	if o.err != nil {
		b = append(b, `,"error":`...)
		b = append(b, validOrNote(o.err)...)
	}
	b = append(b, `,"durationMs":`...)
	b = strconv.AppendFloat(b, float64(o.duration.Microseconds())/1000, 'f', -1, 64)
	return append(b, '}')
}

// validOrNote returns raw unchanged unless it is not valid JSON (then a string saying
// so: one bad answer must not make the recorder refuse the whole result).
func validOrNote(raw []byte) []byte {
	if !jsonlex.Valid(raw) { // a loop, not gjson's recursion: a server's deep answer must not crash us
		return []byte(`"[not valid JSON; omitted]"`)
	}
	return raw
}

// Tasks are read by package mcptask, shared with verify (which follows a replayed
// call's task the same way); these are its names as this package spells them.
type task = mcptask.Task

const (
	taskExt         = mcptask.Ext
	taskUtil        = mcptask.Util
	taskCompleted   = mcptask.Completed
	taskFailed      = mcptask.Failed
	taskCancelled   = mcptask.Cancelled
	minTaskPoll     = mcptask.MinPoll
	maxTaskPoll     = mcptask.MaxPoll
	defaultTaskPoll = mcptask.DefaultPoll
)

var (
	terminalStatus = mcptask.Terminal
	taskHandle     = mcptask.Handle
)

// taskParams are the params of a tasks/get, tasks/result or tasks/cancel for t: its
// taskId as the server spelled it and, in the stateless era, the host's protocol
// _meta, as the dispatch's tools/call carried it (callParams).
func taskParams(t *task, meta []byte) []byte {
	b := make([]byte, 0, 32+len(t.ID)+len(meta))
	b = append(b, `{"taskId":`...)
	b = append(b, t.ID...)
	if meta != nil {
		if bytes.ContainsAny(meta, "\r\n") && meta[0] == '{' && jsonlex.Valid(meta) {
			meta = compactObject(meta)
		}
		b = append(b, `,"_meta":`...)
		b = append(b, meta...)
	}
	return append(b, '}')
}
