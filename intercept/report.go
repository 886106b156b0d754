package intercept

import (
	"encoding/json"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jcs"
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

// describeArgs fills in what a report says about a call's arguments, as soon as the
// call is seen: the fingerprint over the raw arguments (key already removed, nothing
// redacted), then the arguments redacted and clipped to half a report. Doing it then,
// rather than when the call ends, lets the message's bytes go: a 50 MB call would
// otherwise be held for as long as the tool runs.
func describeArgs(c *call, capBytes int) {
	if c.msg != nil {
		// Fingerprint errors mean arguments that are not JSON; the report still goes,
		// with an empty fingerprint the recorder cannot match (it joins by callId).
		c.fingerprint, _ = jcs.Fingerprint(c.args)
	}
	args := c.args
	if args == nil {
		args = json.RawMessage(`{}`)
	}
	c.argsOut, c.argsClipped = redact.Report(args, max((capBytes-fixedSize(c))/2, minPart))
	c.msg, c.args = nil, nil
}

// buildStep makes the report for a finished call: its arguments as describeArgs left
// them, the result and error redacted and clipped into the rest of capBytes.
func buildStep(c *call, endedAt time.Time, outcome string, result, rpcErr json.RawMessage, capBytes int) report.Step {
	st := report.Step{
		CallID:          clipID(c.callID),
		Tool:            redact.Label(c.tool, maxTool),
		Args:            c.argsOut,
		ArgsFingerprint: c.fingerprint,
		ArgsClipped:     c.argsClipped,
		ReceivedAt:      c.receivedAt.UTC(),
		StartedAt:       c.startedAt.UTC(),
		EndedAt:         endedAt.UTC(),
		DurationMs:      float64(endedAt.Sub(c.startedAt).Microseconds()) / 1000,
		Outcome:         outcome,
		DispatchID:      c.dispatchID,
	}
	avail := capBytes - fixedSize(c) - len(st.Args)
	if rpcErr != nil {
		st.Error, _ = redact.Report(rpcErr, max(avail/4, minPart))
		avail -= len(st.Error)
	}
	if result != nil {
		st.Result, st.ResultClipped = redact.Report(result, max(avail, minPart))
	}
	return st
}

// clipID redacts and clips a callId: host hooks have put tokens there.
func clipID(id *string) *string {
	if id == nil {
		return nil
	}
	s := redact.Label(*id, maxCallID)
	return &s
}

// fixedSize bounds what a report takes besides its args, result and error: the
// members' names, the timestamps and ids at their longest, and the host-chosen strings
// with every byte escaped.
func fixedSize(c *call) int {
	return 1024 + 6*min(len(c.tool), maxTool) + 6*min(len(deref(c.callID)), maxCallID)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
