package e2e

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/sjson"
)

// TestReportProblems proves the report checks the suite relies on catch each kind of
// wrong report; a checker that passed everything would make the proxied runs prove
// nothing about reporting.
func TestReportProblems(t *testing.T) {
	id := func(s string) *string { return &s }
	calls := hostCalls{
		Calls: []expectedCall{
			{Tool: "echo", CallID: id("c-1"), ArgsFingerprint: "sha256:aa", Outcome: "ok"},
			{Tool: "confirm", CallID: id("c-2"), ArgsFingerprint: "sha256:bb", Outcome: "input_required"},
			{Tool: "confirm", CallID: id("c-2"), ArgsFingerprint: "sha256:bb", Outcome: "ok"},
		},
		Secrets: []string{"hunter2"},
	}
	report := func(seq int, callID, tool, fp, outcome string) string {
		return `{"proxyId":"p1","server":"srv","seq":` + strconv.Itoa(seq) + `,"callId":"` + callID + `","tool":"` + tool +
			`","args":{"x":1},"argsFingerprint":"` + fp + `","argsClipped":false,` +
			`"receivedAt":"2026-01-01T00:00:00.1Z","startedAt":"2026-01-01T00:00:00.2Z","endedAt":"2026-01-01T00:00:00.3Z",` +
			`"durationMs":100,"outcome":"` + outcome + `","resultClipped":false,"dispatchId":null}`
	}
	set := func(r, path string, v any) string {
		out, err := sjson.Set(r, path, v)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// The two rounds of c-2 are one call (SPEC §3.5).
	good := func() []string {
		return []string{
			report(1, "c-1", "echo", "sha256:aa", "ok"),
			set(report(2, "c-2", "confirm", "sha256:bb", "ok"), "rounds", 2),
		}
	}
	check := func(reports []string) []string {
		bodies := make([][]byte, len(reports))
		for i, r := range reports {
			bodies[i] = []byte(r)
		}
		return reportProblems("srv", calls, bodies, calls.Secrets)
	}

	if p := check(good()); len(p) != 0 {
		t.Fatalf("correct reports were flagged: %v", p)
	}

	cases := []struct {
		name   string
		mutate func(r []string) []string
		want   string
	}{
		{"missing report", func(r []string) []string { return r[:1] }, `no report for the call with callId "c-2"`},
		{"extra report", func(r []string) []string { return append(r, report(3, "c-1", "echo", "sha256:aa", "ok")) }, "3 step reports for 2"},
		{"wrong fingerprint", func(r []string) []string { r[0] = set(r[0], "argsFingerprint", "sha256:ab"); return r }, "argsFingerprint"},
		{"wrong outcome", func(r []string) []string { r[1] = set(r[1], "outcome", "input_required"); return r }, "outcome"},
		{"rounds reported apart", func(r []string) []string {
			return []string{r[0], report(2, "c-2", "confirm", "sha256:bb", "input_required"), report(3, "c-2", "confirm", "sha256:bb", "ok")}
		}, "3 step reports for 2"},
		{"rounds miscounted", func(r []string) []string { r[1] = set(r[1], "rounds", 3); return r }, "rounds is 3"},
		{"rounds on a one-round call", func(r []string) []string { r[0] = set(r[0], "rounds", 1); return r }, "rounds is 1"},
		{"wrong tool", func(r []string) []string { r[0] = set(r[0], "tool", "echo2"); return r }, "tool"},
		{"wrong server", func(r []string) []string { r[0] = set(r[0], "server", "other"); return r }, "server"},
		{"no callId", func(r []string) []string { r[0] = set(r[0], "callId", nil); return r }, "callId null"},
		{"secret in args", func(r []string) []string { r[0] = set(r[0], "args.password", "hunter2"); return r }, `secret "hunter2"`},
		{"correlation key left in args", func(r []string) []string { r[0] = set(r[0], "args._bir_call_id", "c-1"); return r }, "correlation key"},
		{"dispatchId set", func(r []string) []string { r[0] = set(r[0], "dispatchId", "d-1"); return r }, "dispatchId"},
		{"dispatchId missing", func(r []string) []string {
			out, _ := sjson.Delete(r[0], "dispatchId")
			r[0] = out
			return r
		}, "dispatchId"},
		{"seq gap", func(r []string) []string { r[1] = set(r[1], "seq", 4); return r }, "without gaps"},
		{"timestamps out of order", func(r []string) []string {
			r[0] = set(r[0], "endedAt", "2026-01-01T00:00:00.15Z")
			return r
		}, "out of order"},
		{"bad timestamp", func(r []string) []string { r[0] = set(r[0], "startedAt", "yesterday"); return r }, "not RFC 3339"},
		{"over the cap", func(r []string) []string {
			r[0] = set(r[0], "result", strings.Repeat("x", reportCap))
			return r
		}, "over the"},
		{"not JSON", func(r []string) []string { r[0] = r[0][:20]; return r }, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			problems := check(c.mutate(good()))
			for _, p := range problems {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Errorf("want a problem mentioning %q, got %q", c.want, problems)
		})
	}
}
