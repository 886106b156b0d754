package intercept

import (
	"encoding/json"
	"time"

	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/redact"
)

// DefaultReportCap bounds one step report's JSON size (SPEC §3.3).
const DefaultReportCap = 64 << 10

// minPart is the least any part of a report is given: enough for a clip marker.
const minPart = 256

// Host-chosen strings that are not clipped by redact but must not blow the cap.
const (
	maxTool   = 256
	maxCallID = 1024
)

// buildStep makes the report for a finished call: fingerprint over the raw arguments
// (key already removed, nothing redacted), then arguments, result and error redacted
// and clipped so the whole report stays within capBytes.
func buildStep(c *call, endedAt time.Time, outcome string, result, rpcErr json.RawMessage, capBytes int) recorder.Step {
	st := recorder.Step{
		CallID:     clipID(c.callID),
		Tool:       clipString(c.tool, maxTool),
		ReceivedAt: c.receivedAt.UTC(),
		StartedAt:  c.startedAt.UTC(),
		EndedAt:    endedAt.UTC(),
		DurationMs: float64(endedAt.Sub(c.startedAt).Microseconds()) / 1000,
		Outcome:    outcome,
	}
	if c.msg != nil {
		// Fingerprint errors mean arguments that are not JSON; the report still goes,
		// with an empty fingerprint the recorder cannot match (it joins by callId).
		st.ArgsFingerprint, _ = Fingerprint(c.args)
	}
	args := c.args
	if args == nil {
		args = json.RawMessage(`{}`)
	}

	// What the fixed fields take, with room for the three members' names and flags.
	fixed, _ := json.Marshal(st)
	avail := capBytes - len(fixed) - 64
	if rpcErr != nil {
		st.Error, _ = redact.Report(rpcErr, max(avail/4, minPart))
		avail -= len(st.Error)
	}
	if result == nil {
		st.Args, st.ArgsClipped = redact.Report(args, max(avail, minPart))
		return st
	}
	// Arguments may take half when both are large; whatever either leaves unused, the
	// other gets.
	st.Args, st.ArgsClipped = redact.Report(args, max(avail/2, minPart))
	st.Result, st.ResultClipped = redact.Report(result, max(avail-len(st.Args), minPart))
	if st.ArgsClipped && len(st.Args)+len(st.Result) < avail {
		st.Args, st.ArgsClipped = redact.Report(args, max(avail-len(st.Result), minPart))
	}
	return st
}

func clipID(id *string) *string {
	if id == nil || len(*id) <= maxCallID {
		return id
	}
	s := clipString(*id, maxCallID)
	return &s
}

// clipString cuts s to at most n bytes on a rune boundary, marking the cut.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
