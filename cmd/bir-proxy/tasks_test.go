package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// Calls that outlive their first answer (SPEC §3.5) through the built proxy and the
// raw fixture's task tools (testdata/rawserver/tasks.go): one journal report per call.

// journaled is one report of the journal, the members these tests read.
type journaled struct {
	CallID     *string         `json:"callId"`
	Tool       string          `json:"tool"`
	Outcome    string          `json:"outcome"`
	Result     json.RawMessage `json:"result"`
	Error      json.RawMessage `json:"error"`
	TaskID     string          `json:"taskId"`
	TaskStatus string          `json:"taskStatus"`
	Rounds     int             `json:"rounds"`
	Args       json.RawMessage `json:"args"`
	Print      string          `json:"argsFingerprint"`
}

// startJournaling starts the proxy in front of the raw fixture, its reports in a
// journal; journal reads them once the session has ended.
func startJournaling(t *testing.T, server string) (s *testHost, record string, journal func() []journaled) {
	t.Helper()
	raw := testutil.Build(t, "./testdata/rawserver")
	state := t.TempDir()
	record = filepath.Join(t.TempDir(), "record")
	s = startProxyIn(t, t.TempDir(), []string{"BIR_OFF=0", "XDG_STATE_HOME=" + state, "BIR_RECORDER_URL="},
		"--server", server, "--", raw, "--reply", "--record", record)
	return s, record, func() []journaled {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(state, "bir-proxy", "journal", server+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var out []journaled
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var j journaled
			if err := json.Unmarshal([]byte(line), &j); err != nil {
				t.Fatalf("journal line %q: %v", line, err)
			}
			out = append(out, j)
		}
		return out
	}
}

// byCallID indexes reports by their callId, failing on a call reported twice.
func byCallID(t *testing.T, reports []journaled) map[string]journaled {
	t.Helper()
	m := make(map[string]journaled)
	for _, r := range reports {
		if r.CallID == nil {
			t.Fatalf("a report without callId: %+v", r)
		}
		if _, dup := m[*r.CallID]; dup {
			t.Fatalf("call %s reported twice", *r.CallID)
		}
		m[*r.CallID] = r
	}
	return m
}

// TestTaskIsOneReport: a tools/call answered with a task handle is reported once,
// when the host sees the task end, with its final result and taskId; both eras'
// shapes, every ending, 2 and 8 tasks in flight; a task the host stops following is
// task_unfinished at the session's end. The host's bytes reach the server unchanged
// and the server's reach the host.
func TestTaskIsOneReport(t *testing.T) {
	t.Parallel()
	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		for _, width := range []int{2, 8} {
			t.Run(fmt.Sprintf("%s/%d", era, width), func(t *testing.T) {
				t.Parallel()
				testTasks(t, era == "2025-11-25", width)
			})
		}
	}
}

func testTasks(t *testing.T, era2025 bool, width int) {
	s, record, journal := startJournaling(t, "tasks")
	ends := []string{"completed", "error", "failed", "cancelled", "never"}
	want := map[string]string{"completed": "ok", "error": "tool_error", "failed": "rpc_error", "cancelled": "cancelled", "never": "task_unfinished"}
	// width calls in one write, their ends taken in turn.
	var batch strings.Builder
	endOf := map[int]string{}
	for i := range width {
		end := ends[i%len(ends)]
		endOf[i+1] = end
		// The raw fixture's task tools (testdata/rawserver/tasks.go).
		tool := "task"
		if era2025 {
			tool = "task_legacy"
		}
		if end == "never" {
			tool += "_forever"
		}
		fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"_bir_call_id":"c-%d","end":%q}}}`+"\n", i+1, tool, i+1, end)
	}
	if _, err := s.Stdin.Write([]byte(batch.String())); err != nil {
		t.Fatal(err)
	}
	taskOf := map[int]string{}
	for range width {
		var a struct {
			ID     int `json:"id"`
			Result struct {
				TaskID string `json:"taskId"`
				Task   struct {
					TaskID string `json:"taskId"`
				} `json:"task"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(s.recv()), &a); err != nil {
			t.Fatal(err)
		}
		taskOf[a.ID] = a.Result.TaskID + a.Result.Task.TaskID
	}
	// The host follows each task: polls until terminal (2025-11-25: then asks for
	// the result), cancels the one meant to be cancelled, and stops following the
	// one that never ends after one poll.
	next := 100
	ask := func(method, taskID string) string {
		next++
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"taskId":%q}}`, next, method, taskID))
		return s.recv()
	}
	for i := 1; i <= width; i++ {
		id, end := taskOf[i], endOf[i]
		if id == "" {
			t.Fatalf("call %d: no task handle", i)
		}
		switch end {
		case "never":
			ask("tasks/get", id)
			continue
		case "cancelled":
			ask("tasks/cancel", id)
			if !era2025 {
				ask("tasks/get", id) // 2026-07-28: the ack says nothing; the state does
			}
			continue
		}
		for n := 0; ; n++ {
			got := ask("tasks/get", id)
			if !strings.Contains(got, `"status":"working"`) {
				break
			}
			if n > 5 {
				t.Fatalf("task %s never ends: %s", id, got)
			}
		}
		if era2025 {
			ask("tasks/result", id)
		}
	}
	s.end()

	reports := byCallID(t, journal())
	if len(reports) != width {
		t.Fatalf("%d reports for %d calls", len(reports), width)
	}
	for i := 1; i <= width; i++ {
		r := reports[fmt.Sprintf("c-%d", i)]
		end := endOf[i]
		if r.Outcome != want[end] || r.TaskID != taskOf[i] {
			t.Errorf("call %d (%s): outcome %q task %q, want %q task %q", i, end, r.Outcome, r.TaskID, want[end], taskOf[i])
		}
		switch end {
		case "completed", "error":
			if !strings.Contains(string(r.Result), `\"end\":`) || r.TaskStatus != "completed" {
				t.Errorf("call %d: result %s status %q, want the task's final result", i, r.Result, r.TaskStatus)
			}
		case "failed":
			// 2025-11-25: the host saw the failure in tasks/get and asked no more; the
			// proxy ends the call there (docs/recording.md).
			if !strings.Contains(string(r.Error), "task failed as asked") && !(era2025 && strings.Contains(string(r.Error), "the task failed")) {
				t.Errorf("call %d: error %s, want the task's", i, r.Error)
			}
		case "never":
			if r.TaskStatus != "working" {
				t.Errorf("call %d: taskStatus %q, want the last seen, working", i, r.TaskStatus)
			}
		}
	}
	// Nothing of the proxy's own reached the server, and the key never did.
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "_bir_call_id") || strings.Contains(string(data), `"bir:`) {
		t.Errorf("the server got the key or a request of the proxy's own:\n%s", data)
	}
	if got := strings.Count(string(data), `"method":"tasks/`); got < width {
		t.Errorf("the server got %d task requests, want every one the host sent", got)
	}
}

// TestMultiRoundCallIsOneReport: a call answered input_required and retried with the
// requestState it was given is one report, rounds 2, with the first round's callId
// and fingerprint and the last round's outcome; the key is removed from both rounds.
// A round never retried is input_required at the session's end.
func TestMultiRoundCallIsOneReport(t *testing.T) {
	t.Parallel()
	s, record, journal := startJournaling(t, "rounds")
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"need_input","arguments":{"_bir_call_id":"r-1","q":1}}}`)
	first := s.recv()
	if !strings.Contains(first, `"requestState":"rawserver-state-1"`) {
		t.Fatalf("first round: %s", first)
	}
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"need_input","arguments":{"_bir_call_id":"r-1b","q":1},` +
		`"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"rawserver-state-1"}}`)
	if got := s.recv(); !strings.Contains(got, "got input") {
		t.Fatalf("second round: %s", got)
	}
	// A call that asks for input and is never retried.
	s.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"need_input","arguments":{"_bir_call_id":"r-2"}}}`)
	s.recv()
	s.end()

	reports := byCallID(t, journal())
	if len(reports) != 2 {
		t.Fatalf("%d reports, want 2", len(reports))
	}
	r := reports["r-1"]
	if r.Outcome != "ok" || r.Rounds != 2 || !strings.Contains(string(r.Result), "got input") {
		t.Errorf("the two rounds: %+v, want one ok report of rounds 2 with the last round's result", r)
	}
	if strings.Contains(string(r.Args), "inputResponses") || !strings.Contains(string(r.Args), `"q":1`) {
		t.Errorf("args %s, want the first round's", r.Args)
	}
	if u := reports["r-2"]; u.Outcome != "input_required" || u.Rounds != 0 {
		t.Errorf("the unanswered round: %+v, want input_required", u)
	}
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "_bir_call_id") {
		t.Errorf("the key reached the server:\n%s", data)
	}
	if n := strings.Count(string(data), `"method":"tools/call"`); n != 3 {
		t.Errorf("the server got %d calls, want 3", n)
	}
}
