package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// hostTask is what the task host got of one task it followed (its calls file's
// `tasks`): the call's correlation id, the task's id, its last status, and the text of
// the final result's first content block.
type hostTask struct {
	CallID string  `json:"callId"`
	TaskID string  `json:"taskId"`
	Status string  `json:"status"`
	Text   *string `json:"text"`
}

// taskScenarios are the task server and host in each era the official SDKs speak
// tasks in: 2025-11-25 on SDK 1.x (its experimental tasks, a runtime on both sides),
// 2026-07-28 on SDK 2.4.0 (the server SDK passes a handle through; the client refuses
// it, so the host polls tasks/get itself through the SDK). See docs/e2e.md.
func taskScenarios() []scenario {
	var out []scenario
	for _, era := range []struct{ rev, name string }{{"2025-11-25", "session"}, {"2026-07-28", "stateless"}} {
		out = append(out, scenario{
			name: "tasks-" + era.rev, host: "task-host.mjs", scenario: "tasks-" + era.rev, era: era.name,
			server: func(s *suite, _ string) []string {
				return []string{s.node, filepath.Join(s.dir, "servers", "task-server.mjs"), "--era", era.rev}
			},
		})
	}
	return out
}

// TestSDKTaskIsJournaledWithItsResult: a task-returning tool of the official SDK,
// called by the official SDK client through bir-proxy (no recorder: the journal),
// is journaled once, when the host has seen the task end, with outcome ok, the
// task's id, taskStatus completed and the final result; the host gets the same
// bytes as without the proxy, and the server the same bytes as the host sent
// (the final result shows the raw lines the server read).
func TestSDKTaskIsJournaledWithItsResult(t *testing.T) {
	s := newSuite(t)
	proxy := testutil.BuildRace(t, "./cmd/bir-proxy")
	for _, sc := range taskScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			direct := s.runDirect(t, sc)
			checkTaskFollowed(t, "run directly", direct)

			r := s.runHost(t, sc, launch{
				mode:    "proxy-journal",
				wrap:    func(sc scenario) []string { return []string{proxy, "--server", sc.name, "--"} },
				callIDs: true,
			})
			if err := compareTranscripts(direct.transcript, r.transcript); err != nil {
				t.Errorf("%s (%s era) through bir-proxy differs from the direct run at\n%v\n%s\nhost and proxy stderr ends:\n%s",
					sc.name, sc.era, err, r.hostFailure(), tail(r.stderr, 30))
			} else if f := r.hostFailure(); f != "" {
				t.Fatalf("%s through bir-proxy: %s", sc.name, f)
			}
			task := checkTaskFollowed(t, "through bir-proxy", r)

			reports, err := journalReports(r.state, sc.name)
			if err != nil {
				t.Fatalf("%v (files under XDG_STATE_HOME: %v)", err, filesUnder(r.state))
			}
			// One call, one report, joined by callId, outcome ok (the host saw the
			// task complete), fingerprint, seq, timestamps, no correlation key.
			for _, p := range reportProblems(sc.name, r.calls, reports, r.calls.Secrets) {
				t.Error(p)
			}
			if len(reports) != 1 {
				t.Fatalf("the journal has %d reports, want exactly 1 (the task's call):\n%s", len(reports), joinReports(reports))
			}
			rep := gjson.ParseBytes(reports[0])
			for _, c := range []struct{ path, want string }{
				{"callId", task.CallID},
				{"tool", "research"},
				{"outcome", "ok"},
				{"taskId", task.TaskID},
				{"taskStatus", "completed"},
				{"result.content.0.text", *task.Text},
			} {
				if got := rep.Get(c.path); got.Type != gjson.String || got.String() != c.want {
					t.Errorf("journal report: %s is %s, want %q\nreport: %s", c.path, got.Raw, c.want, rep.Raw)
				}
			}
		})
	}
}

// checkTaskFollowed requires the host to have followed exactly one task to its final
// result, and returns it.
func checkTaskFollowed(t *testing.T, how string, r *run) hostTask {
	t.Helper()
	if len(r.calls.Tasks) != 1 {
		t.Fatalf("%s: the host followed %d tasks, want 1: %+v\nits stderr ends:\n%s", how, len(r.calls.Tasks), r.calls.Tasks, tail(r.stderr, 20))
	}
	task := r.calls.Tasks[0]
	if task.Status != "completed" || task.Text == nil || !strings.HasPrefix(*task.Text, "research on tides ✓: done after 2 polls") || task.TaskID == "" {
		t.Fatalf("%s: the host did not get the task's final result: %+v (text %v)", how, task, derefOr(task.Text, "<none>"))
	}
	return task
}

func derefOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

func joinReports(reports [][]byte) string {
	var b strings.Builder
	for _, r := range reports {
		b.WriteString(excerpt(string(r), 0))
		b.WriteByte('\n')
	}
	return b.String()
}
