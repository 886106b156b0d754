package intercept

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jcs"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/report"
)

// DefaultReportCap bounds one step report's JSON size (SPEC §3.3).
const DefaultReportCap = 64 << 10

// minPart is the least any part of a report is given: enough for a clip marker.
const minPart = 256

// Host-chosen strings, redacted and cut by redact.Label, that must not blow the cap.
const (
	maxTool   = 256
	maxCallID = 1024
)

// scratch is what bookkeeping reuses from one report to the next: redaction's and the
// fingerprint's buffers (allocated afresh for every value, they were most of a report's
// allocations), and the names of the tools already seen.
type scratch struct {
	red    redact.Redactor // arguments, then results: behind Step.Result until the next report
	errRed redact.Redactor // errors: behind Step.Error until the next report
	fp     jcs.Fingerprinter
	tools  map[string]toolName // by the name's raw JSON string
}

// toolName is a tool's name as reports show it (decoded, redacted, cut to maxTool), and
// the length of the decoded name, which the report's size bound counts.
type toolName struct {
	shown string
	n     int
}

// maxTools bounds the tool names remembered; past it the map starts again.
const maxTools = 4096

// tool sets c's tool from the raw JSON string naming it. A server has a handful of
// tools, called again and again: each name is decoded and redacted once, not once per
// call.
func (sc *scratch) tool(c *call, raw []byte) {
	t, ok := sc.tools[string(raw)]
	if !ok {
		if sc.tools == nil || len(sc.tools) >= maxTools {
			sc.tools = make(map[string]toolName)
		}
		name := jsonlex.StringOf(raw)
		t = toolName{shown: redact.Label(name, maxTool), n: len(name)}
		sc.tools[string(raw)] = t
	}
	c.tool, c.toolLen = t.shown, t.n
}

// describeArgs fills in what a report says about a call's arguments, as soon as the
// call is seen: the fingerprint over the raw arguments (key already removed, nothing
// redacted), then the arguments redacted and clipped to half a report. Doing it then,
// rather than when the call ends, lets the message's bytes go: a 50 MB call would
// otherwise be held for as long as the tool runs.
func (sc *scratch) describeArgs(c *call, capBytes int) {
	if c.msg != nil {
		// Fingerprint errors mean arguments that are not JSON; the report still goes,
		// with an empty fingerprint the recorder cannot match (it joins by callId).
		c.fingerprint, _ = sc.fp.Fingerprint(c.args)
	}
	args := c.args
	if args == nil {
		args = json.RawMessage(`{}`)
	}
	out, clipped := sc.red.Report(args, max((capBytes-fixedSize(c))/2, minPart))
	c.argsOut, c.argsClipped = bytes.Clone(out), clipped // kept while the call is in flight
	c.callIDOut = clipID(c.callID)
	c.msg, c.args = nil, nil
}

// buildStep makes the report for a finished call: its arguments as describeArgs left
// them, the result and error redacted and clipped into the rest of capBytes. The
// result and error are in sc's buffers, valid until the next call (report.Sink says
// so).
func (sc *scratch) buildStep(c *call, endedAt time.Time, outcome string, result, rpcErr json.RawMessage, capBytes int) report.Step {
	st := report.Step{
		CallID:          c.callIDOut,
		Tool:            c.tool,
		Args:            c.argsOut,
		ArgsFingerprint: c.fingerprint,
		ArgsClipped:     c.argsClipped,
		ReceivedAt:      c.receivedAt.UTC(),
		StartedAt:       c.startedAt.UTC(),
		EndedAt:         endedAt.UTC(),
		DurationMs:      float64(endedAt.Sub(c.startedAt).Microseconds()) / 1000,
		Outcome:         outcome,
		DispatchID:      c.dispatchID,
		TaskID:          c.taskID,
		TaskStatus:      c.taskStatus,
		Trimmed:         c.trimmed,
		Spill:           c.spill,
		RawChecked:      true, // every raw field below is redact.Report's
	}
	if c.rounds > 0 {
		st.Rounds = c.rounds + 1
	}
	switch {
	case c.res != nil:
		st.ResultBytes = c.res.ResultBytes() // counted as it streamed past
	case c.sentBytes != 0:
		st.ResultBytes = max(c.sentBytes, 0)
	case rpcErr != nil:
		st.ResultBytes = int64(len(rpcErr))
	case result != nil:
		st.ResultBytes = int64(len(result))
	}
	avail := capBytes - fixedSize(c) - len(st.Args)
	if rpcErr != nil {
		st.Error, _ = sc.errRed.Report(rpcErr, max(avail/4, minPart))
		avail -= len(st.Error)
	}
	switch {
	case result == nil:
	case c.roundReported && outcome == report.OutcomeInputRequired:
		st.Result, st.ResultClipped = result, c.roundClipped // made when the round was kept
	case c.res != nil:
		st.Result, st.ResultClipped = c.res.Report(max(avail, minPart))
	default:
		st.Result, st.ResultClipped = sc.red.Report(result, max(avail, minPart))
	}
	return st
}

// clipID redacts and clips a callId: host hooks have put tokens there.
func clipID(id *string) *string {
	if id == nil {
		return nil
	}
	s := redact.Label(*id, maxCallID)
	if s == *id {
		return id
	}
	return &s
}

// fixedSize bounds what a report takes besides its args, result and error: the
// members' names, the timestamps and ids at their longest, and the host-chosen strings
// with every byte escaped.
func fixedSize(c *call) int {
	return 1024 + 6*min(c.toolLen, maxTool) + 6*min(len(deref(c.callID)), maxCallID) + 6*len(c.taskID)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
