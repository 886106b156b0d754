package intercept

import (
	"fmt"
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
