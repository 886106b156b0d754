package intercept

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/bits"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/report"
)

// stepOf is the report of the call whose tool is named tool; it fails unless there is
// exactly one.
func stepOf(t *testing.T, steps []report.Step, tool string) report.Step {
	t.Helper()
	var found []report.Step
	for _, s := range steps {
		if s.Tool == tool {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d reports of %s, want 1", len(found), tool)
	}
	return found[0]
}

// TestTaskEndsByNotification: a task's terminal state in the server's
// notifications/tasks (2026-07-28, on a listen stream) or notifications/tasks/status
// (2025-11-25, status only: its result still comes from tasks/result) ends the call.
func TestTaskEndsByNotification(t *testing.T) {
	s := newSession(t)
	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n26","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t1","status":"working"}}`)
	s.up(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"t1","status":"input_required"}}`)
	s.up(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"t1","status":"completed","result":{"content":[{"type":"text","text":"by notification"}],"isError":true}}}`)

	s.host(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"n25","arguments":{},"task":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":2,"result":{"task":{"taskId":"t2","status":"working"}}}`)
	s.up(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t2","status":"completed"}}`)
	s.host(`{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"t2"}}`)
	s.up(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"from tasks/result"}]}}`)
	steps := s.sink.wait(t, 2)
	s.close()

	n26 := stepOf(t, steps, "n26")
	if n26.Outcome != report.OutcomeToolError || n26.TaskID != "t1" || !strings.Contains(string(n26.Result), "by notification") {
		t.Errorf("2026-07-28: %s %s %s", n26.Outcome, n26.TaskID, n26.Result)
	}
	n25 := stepOf(t, steps, "n25")
	if n25.Outcome != report.OutcomeOK || n25.TaskStatus != "completed" || !strings.Contains(string(n25.Result), "from tasks/result") {
		t.Errorf("2025-11-25: %s %s %s", n25.Outcome, n25.TaskStatus, n25.Result)
	}
}

// TestTaskRequestBeforeItsHandle: the host can ask for a task before bookkeeping has
// seen the answer that made it (the relay writes an answer to the host first); the
// answer to that request still ends it.
func TestTaskRequestBeforeItsHandle(t *testing.T) {
	s := newSession(t)
	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"early","arguments":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"t1"}}`)
	s.up(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t1","status":"working"}}`)
	s.up(`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","taskId":"t1","status":"failed","error":{"code":-32001,"message":"boom"}}}`)
	steps := s.close()
	st := stepOf(t, steps, "early")
	if st.Outcome != report.OutcomeRPCError || !strings.Contains(string(st.Error), "boom") {
		t.Errorf("%s %s", st.Outcome, st.Error)
	}
}

// TestOpenCallsAreBounded: past maxLaterCalls tasks left open, the oldest is reported
// task_unfinished at once; no call is reported twice, and every one once.
func TestOpenCallsAreBounded(t *testing.T) {
	s := newSession(t)
	n := maxLaterCalls + 10
	for i := range n {
		s.host(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t%d","arguments":{}}}`, i, i))
		s.up(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"resultType":"task","taskId":"task-%d","status":"working"}}`, i, i))
	}
	early := s.sink.wait(t, 10)
	if len(early) != 10 || early[0].Tool != "t0" || early[0].Outcome != report.OutcomeTaskUnfinished {
		t.Fatalf("%d reported before the end (first %s %s), want the 10 oldest unfinished", len(early), early[0].Tool, early[0].Outcome)
	}
	steps := s.close()
	if len(steps) != n {
		t.Fatalf("%d reports for %d calls", len(steps), n)
	}
	seen := map[string]bool{}
	for _, st := range steps {
		if seen[st.Tool] {
			t.Fatalf("%s reported twice", st.Tool)
		}
		seen[st.Tool] = true
	}
	if got := s.ic.interested.Load(); got != 0 {
		t.Errorf("interested %d after the session, want 0", got)
	}
}

// TestOpenCallsBoundSaysSoOnce: 8 times maxLaterCalls tasks left open. Every one past
// the bound is reported unfinished, and stderr gets a line per doubling of them, not
// one each (10,000 tasks made 4,945 lines).
func TestOpenCallsBoundSaysSoOnce(t *testing.T) {
	var logs bytes.Buffer
	s := newSessionWith(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	n := 8 * maxLaterCalls
	for i := range n {
		s.host(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t%d","arguments":{}}}`, i, i))
		s.up(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"resultType":"task","taskId":"task-%d","status":"working"}}`, i, i))
	}
	shed := n - maxLaterCalls
	s.sink.wait(t, shed)
	lines := strings.Count(logs.String(), "too many tool calls outlive their first answer")
	if lines == 0 || lines > 1+bits.Len(uint(shed)) {
		t.Errorf("%d lines for %d calls reported unfinished, want one per doubling (at most %d)", lines, shed, 1+bits.Len(uint(shed)))
	}
	s.close()
}

// TestTaskRequestsAreBounded: a host polling tasks the server never answers leaves
// at most maxTaskReqs of them awaited, and none after the session.
func TestTaskRequestsAreBounded(t *testing.T) {
	s := newSession(t)
	for i := range maxTaskReqs * 2 {
		s.host(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":"nope"}}`, i))
	}
	s.host(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"after","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":"x","result":{"content":[]}}`)
	s.sink.wait(t, 1)
	if got := s.ic.interested.Load(); got > maxTaskReqs {
		t.Errorf("interested %d, want at most %d", got, maxTaskReqs)
	}
	s.close()
	if got := s.ic.interested.Load(); got != 0 {
		t.Errorf("interested %d after the session, want 0", got)
	}
}

// TestRoundWithoutRequestState: a server need not give a requestState; the retry of
// the same tool with the same arguments is the next round. A retry of other
// arguments is a call of its own.
func TestRoundWithoutRequestState(t *testing.T) {
	s := newSession(t)
	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"_bir_call_id":"first","a":1}}}`)
	s.up(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"a":2}}}`)
	s.up(`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)
	s.host(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ask","arguments":{"_bir_call_id":"retry","a":1},"inputResponses":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required","inputRequests":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ask","arguments":{"a":1},"inputResponses":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"third"}]}}`)
	steps := s.close()
	if len(steps) != 2 {
		t.Fatalf("%d reports, want 2", len(steps))
	}
	for _, st := range steps {
		switch {
		case st.CallID != nil && *st.CallID == "first":
			if st.Rounds != 3 || st.Outcome != report.OutcomeOK || !strings.Contains(string(st.Result), "third") {
				t.Errorf("rounds %d outcome %s result %s, want 3 rounds ending ok", st.Rounds, st.Outcome, st.Result)
			}
		case st.CallID == nil:
			if st.Rounds != 0 || string(st.Args) != `{"a":2}` {
				t.Errorf("the other call: rounds %d args %s", st.Rounds, st.Args)
			}
		default:
			t.Errorf("a report for callId %s", *st.CallID)
		}
	}
}

// TestOpenCallsOrderStaysBounded: the open calls' order keeps no entry of a call
// long ended. One task left open for the whole session kept every later task's entry
// (and the call it points at, its arguments) in the order: 20,000 tasks that each
// ended at once held 20,000 entries.
func TestOpenCallsOrderStaysBounded(t *testing.T) {
	s := newSession(t)
	s.host(`{"jsonrpc":"2.0","id":"open","method":"tools/call","params":{"name":"forever","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":"open","result":{"resultType":"task","taskId":"forever","status":"working"}}`)
	n := 5000
	for i := range n {
		s.host(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t","arguments":{}}}`, i))
		s.up(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"resultType":"task","taskId":"task-%d","status":"working"}}`, i, i))
		s.up(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"task-%d","status":"completed","result":{"content":[]}}}`, i))
	}
	// The same round, retried with the same requestState again and again.
	for i := range n {
		s.host(fmt.Sprintf(`{"jsonrpc":"2.0","id":"r%d","method":"tools/call","params":{"name":"ask","arguments":{},"requestState":"same"}}`, i))
		s.up(fmt.Sprintf(`{"jsonrpc":"2.0","id":"r%d","result":{"resultType":"input_required","requestState":"same"}}`, i))
	}
	s.host(`{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"last","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":"last","result":{"content":[]}}`)
	s.sink.wait(t, n+1) // the last report is bookkeeping's last work: the order is at rest
	if got := len(s.ic.tracker.open.order); got > 100 {
		t.Errorf("%d entries in the open calls' order with 2 calls open", got)
	}
	if steps := s.close(); len(steps) != n+3 {
		t.Errorf("%d reports, want %d", len(steps), n+3)
	}
}

// TestRoundStateCountsAgainstTheBound: a round's requestState is kept as its key,
// up to 1 MiB each; it counts against maxLaterBytes. Uncounted, 100 rounds of 1 MiB
// held 100 MiB past a bound of 64 MiB, and none was reported early.
func TestRoundStateCountsAgainstTheBound(t *testing.T) {
	s := newSession(t)
	state := `"` + strings.Repeat("s", maxRoundResult-10)
	n := 100
	for i := range n {
		s.host(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"r%d","arguments":{}}}`, i, i))
		s.up(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"resultType":"input_required","requestState":%s%d"}}`, i, state, i))
	}
	early := s.sink.wait(t, 1)
	if early[0].Tool != "r0" || early[0].Outcome != report.OutcomeInputRequired {
		t.Errorf("first reported: %s %s, want r0 input_required", early[0].Tool, early[0].Outcome)
	}
	if steps := s.close(); len(steps) != n {
		t.Errorf("%d reports, want %d", len(steps), n)
	}
}

// TestTaskStatusIsBounded: a status is one short word; a server's megabyte one is
// not kept (it was, in every open call, past the bound's count, and in the report,
// past its cap).
func TestTaskStatusIsBounded(t *testing.T) {
	s := newSession(t)
	huge := strings.Repeat("w", 1<<20)
	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t1","status":"` + huge + `"}}`)
	s.host(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big2","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":2,"result":{"resultType":"task","taskId":"t2","status":"working"}}`)
	s.up(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"t2","status":"` + huge + `"}}`)
	steps := s.close()
	if len(steps) != 2 {
		t.Fatalf("%d reports, want 2", len(steps))
	}
	for _, st := range steps {
		if len(st.TaskStatus) > maxTaskStatus {
			t.Errorf("%s: a task status of %d bytes in the report", st.Tool, len(st.TaskStatus))
		}
	}
}

// TestTaskHandleShapes: what bookkeeping takes for a task handle is what the replay
// executor follows (both read by mcptask.HandleState). A tool's result that holds a
// "task" member beside its content, or beside a resultType other than "task", is a
// result: it was kept open, and reported task_unfinished at the session's end. A
// handle whose taskId is over maxTaskID bytes, or not a string, ends at its handle.
func TestTaskHandleShapes(t *testing.T) {
	long := strings.Repeat("i", maxTaskID+1)
	for _, tc := range []struct {
		name, result, outcome, taskID, status string
	}{
		{"ext", `{"resultType":"task","taskId":"t","status":"working"}`, report.OutcomeTaskUnfinished, "t", "working"},
		{"ext-no-status", `{"resultType":"task","taskId":"t"}`, report.OutcomeTaskUnfinished, "t", ""},
		{"ext-number-status", `{"resultType":"task","taskId":"t","status":7}`, report.OutcomeTaskUnfinished, "t", ""},
		{"util", `{"task":{"taskId":"t","status":"input_required"}}`, report.OutcomeTaskUnfinished, "t", "input_required"},
		{"util-content", `{"content":[],"task":{"taskId":"t","status":"working"}}`, report.OutcomeOK, "", ""},
		{"util-complete", `{"resultType":"complete","task":{"taskId":"t","status":"working"}}`, report.OutcomeOK, "", ""},
		{"util-id-number", `{"task":{"taskId":5,"status":"working"}}`, report.OutcomeOK, "", ""},
		{"ext-id-empty", `{"resultType":"task","taskId":"","status":"working"}`, report.OutcomeOK, "", ""},
		{"ext-id-long", `{"resultType":"task","taskId":"` + long + `","status":"working"}`, report.OutcomeOK, "", ""},
		{"util-id-long", `{"task":{"taskId":"` + long + `","status":"working"}}`, report.OutcomeOK, "", ""},
		{"ext-id-at-bound", `{"resultType":"task","taskId":"` + long[1:] + `"}`, report.OutcomeTaskUnfinished, long[1:], ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t)
			s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"h","arguments":{}}}`)
			s.up(`{"jsonrpc":"2.0","id":1,"result":` + tc.result + `}`)
			steps := s.close()
			st := stepOf(t, steps, "h")
			if st.Outcome != tc.outcome || st.TaskID != tc.taskID || st.TaskStatus != tc.status {
				t.Errorf("%s: %s taskId %.20q status %q, want %s %.20q %q", tc.result[:min(len(tc.result), 60)], st.Outcome, st.TaskID, st.TaskStatus, tc.outcome, tc.taskID, tc.status)
			}
		})
	}
}

// FuzzLater: whatever a server answers a tools/call with, and then says of a task
// (a notification, an answer to the host's tasks/get), the call gets one report and
// nothing stays awaited.
func FuzzLater(f *testing.F) {
	f.Add(`{"resultType":"task","taskId":"t1","status":"working"}`, `{"taskId":"t1","status":"completed","result":{}}`)
	f.Add(`{"task":{"taskId":"t1","status":"working"}}`, `{"taskId":"t1","status":"failed","statusMessage":"x"}`)
	f.Add(`{"resultType":"input_required","requestState":"s"}`, `{"taskId":"t1","status":"cancelled"}`)
	f.Add(`{"resultType":"task","taskId":"t1","status":"completed"}`, `{"taskId":"t1","status":"working","error":[]}`)
	f.Fuzz(func(t *testing.T, result, state string) {
		if !json.Valid([]byte(result)) || !json.Valid([]byte(state)) {
			return // the upstream passes on JSON only
		}
		s := newSession(t)
		s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"f","arguments":{}}}`)
		s.up(`{"jsonrpc":"2.0","id":1,"result":` + result + `}`)
		s.up(`{"jsonrpc":"2.0","method":"notifications/tasks","params":` + state + `}`)
		s.host(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"t1"}}`)
		s.up(`{"jsonrpc":"2.0","id":2,"result":` + state + `}`)
		s.host(`{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"t1"}}`)
		s.up(`{"jsonrpc":"2.0","id":3,"result":` + result + `}`)
		steps := s.close()
		if len(steps) != 1 {
			t.Fatalf("%d reports, want 1", len(steps))
		}
		if len(steps[0].TaskStatus) > maxTaskStatus {
			t.Fatalf("a task status of %d bytes", len(steps[0].TaskStatus))
		}
		if got := s.ic.interested.Load(); got != 0 {
			t.Fatalf("interested %d after the session", got)
		}
	})
}
