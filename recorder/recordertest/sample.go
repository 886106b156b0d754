package recordertest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/bir-dev/bir-proxy/report"
)

// StepTime is when SampleStep's step 0 starts.
var StepTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// SampleStep is a plausible report of the i-th call of tool, for tests that need
// reports to deliver or to journal: callId c-i, small arguments {"i":i,...} with text an
// HTML-escaping encoder would change, started i ms after StepTime, 183 ms long, ok.
func SampleStep(tool string, i int) report.Step {
	callID := fmt.Sprintf("c-%d", i)
	started := StepTime.Add(time.Duration(i) * time.Millisecond)
	return report.Step{
		CallID:          &callID,
		Tool:            tool,
		Args:            json.RawMessage(fmt.Sprintf(`{"i":%d,"title":"issue <%d>"}`, i, i)),
		ArgsFingerprint: "sha256:0000",
		ReceivedAt:      started.Add(-time.Millisecond),
		StartedAt:       started,
		EndedAt:         started.Add(183 * time.Millisecond),
		DurationMs:      183.4,
		Outcome:         report.OutcomeOK,
		Result:          json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`),
	}
}
