package replay

import (
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/report"
)

// dispatch is one tool call the recorder asked for.
type dispatch struct {
	id       string
	tool     string
	args     []byte        // raw, as the recorder sent it; nil when it sent none
	timeout  time.Duration // 0: none
	arrived  time.Time
	deadline time.Time // arrived + timeout; zero when none
	size     int       // bytes it holds, for the queue's budget

	// Set when it starts running.
	cancel    func(error)
	lostSince uint64 // the gate's lostSeq then: a later loss is the one that ends it
}

// pollAnswer is what one poll brought.
type pollAnswer struct {
	dispatches []*dispatch
	cancels    []string
	bad        int // dispatches without a dispatchId: nothing can be posted for them
}

// parsePoll reads a poll answer (SPEC §5: {dispatches: [{dispatchId, tool, arguments,
// timeoutMs?}], cancel: [dispatchId]}). It is the recorder's answer, not a relayed
// message, so reading it with gjson is fine; the arguments are kept as their raw
// bytes and reach the upstream as the recorder wrote them.
func parsePoll(body []byte, now time.Time) (pollAnswer, bool) {
	var a pollAnswer
	if !gjson.ValidBytes(body) {
		return a, false
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return a, false
	}
	root.Get("dispatches").ForEach(func(_, v gjson.Result) bool {
		id := v.Get("dispatchId")
		if id.Type != gjson.String || id.Str == "" {
			a.bad++
			return true
		}
		d := &dispatch{id: id.Str, tool: v.Get("tool").String(), arrived: now}
		if args := v.Get("arguments"); args.Exists() {
			d.args = []byte(args.Raw)
		}
		if ms := v.Get("timeoutMs"); ms.Type == gjson.Number && ms.Float() > 0 {
			d.timeout = time.Duration(ms.Float() * float64(time.Millisecond))
			d.deadline = now.Add(d.timeout)
		}
		d.size = len(d.args) + len(d.tool) + len(d.id) + 128
		a.dispatches = append(a.dispatches, d)
		return true
	})
	root.Get("cancel").ForEach(func(_, v gjson.Result) bool {
		if v.Type == gjson.String {
			a.cancels = append(a.cancels, v.Str)
		}
		return true
	})
	return a, true
}

// callParams are the params of the tools/call a dispatch becomes: its tool and
// arguments, and in the stateless era the host's protocol _meta. No progressToken:
// progress for it would be sent to the host, which never asked.
func callParams(d *dispatch, meta []byte) []byte {
	b := make([]byte, 0, 64+len(d.tool)+len(d.args)+len(meta))
	b = append(b, `{"name":`...)
	b = jsonlex.AppendString(b, d.tool)
	if d.args != nil {
		b = append(b, `,"arguments":`...)
		b = append(b, d.args...)
	}
	if meta != nil {
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
	case jsonlex.StringOf(jsonlex.Get(f.Result, "resultType")) == "input_required":
		return outcome{name: report.OutcomeInputRequired, result: f.Result}
	case string(jsonlex.Get(f.Result, "isError")) == "true":
		return outcome{name: report.OutcomeToolError, result: f.Result}
	default:
		return outcome{name: report.OutcomeOK, result: f.Result}
	}
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
	if !gjson.ValidBytes(raw) {
		return []byte(`"[not valid JSON; omitted]"`)
	}
	return raw
}
