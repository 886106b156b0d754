package mcpspans

import (
	"time"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// A tools/call that became a task (SPEC §3.5, intercept/later.go) is one span from the host's
// request to the task's end, as it is one report: its span is kept open past the
// handle, by taskId, and ended where the tracker ends the call — a terminal status in
// the answer to a tasks/get (2025-11-25: tasks/result's answer; a cancel or a
// failure seen in tasks/get), or in the server's task notification — with the
// task's outcome. The tasks/* requests get spans of their own, as every request
// does. At the session's end a task still open ends task_unfinished.

// spanTasks are the open tasks' spans, oldest first for the bound.
type spanTasks struct {
	by    map[string]*openSpan
	order []*openSpan
}

func (t *spanTasks) len() int { return len(t.by) }

// open keeps s, a tools/call span whose answer was a task handle; past
// intercept.MaxOpenTasks the oldest ends task_unfinished, as its report does.
func (t *spanTasks) open(h *Spans, s *openSpan, at time.Time) {
	if t.by == nil {
		t.by = make(map[string]*openSpan)
	}
	if old, ok := t.by[s.taskID]; ok {
		t.end(h, old, at, "task_unfinished", "the server gave out this task id again")
	}
	t.by[s.taskID] = s
	t.order = append(t.order, s)
	for len(t.by) > intercept.MaxOpenTasks && len(t.order) > 0 {
		old := t.order[0]
		t.order = t.order[1:]
		if t.by[old.taskID] == old {
			t.end(h, old, at, "task_unfinished", "too many tasks open at once")
		}
	}
}

// end ends a task's span; errType "" is a success.
func (t *spanTasks) end(h *Spans, s *openSpan, at time.Time, errType, msg string) {
	delete(t.by, s.taskID)
	if len(t.by) == 0 {
		t.order = nil
	}
	h.finish(s, at, errType, "", msg)
}

// answer reads the answer (result) to a tasks/* request (s) for the task it names.
func (t *spanTasks) answer(h *Spans, s *openSpan, result []byte, at time.Time) {
	call, ok := t.by[s.taskID]
	if !ok {
		return
	}
	if s.method == "tasks/result" {
		t.completed(h, call, result, at)
		return
	}
	t.state(h, call, result, at)
}

// failed ends a 2025-11-25 task whose tasks/result answered with an error.
func (t *spanTasks) failed(h *Spans, taskID string, rpcErr []byte, at time.Time) {
	if call, ok := t.by[taskID]; ok {
		t.end(h, call, at, errTypeOf(rpcErr), text(jsonlex.Get(rpcErr, "message")))
	}
}

// notified reads a server's notifications/tasks (notifications/tasks/status).
func (t *spanTasks) notified(h *Spans, f jsonlex.Fields, at time.Time) {
	if !jsonlex.KeyIs(f.Method, "notifications/tasks") && !jsonlex.KeyIs(f.Method, "notifications/tasks/status") {
		return
	}
	if len(f.Params) == 0 || f.Params[0] != '{' {
		return
	}
	if call, ok := t.by[intercept.TaskID(jsonlex.Get(f.Params, "taskId"))]; ok {
		t.state(h, call, f.Params, at)
	}
}

// state reads a task's state and ends its span at a terminal status.
func (t *spanTasks) state(h *Spans, call *openSpan, task []byte, at time.Time) {
	if len(task) == 0 || task[0] != '{' {
		return
	}
	switch status := jsonlex.StringOf(jsonlex.Get(task, "status")); {
	case status == "cancelled":
		t.end(h, call, at, "cancelled", "the task was cancelled")
	case status == "failed":
		e := jsonlex.Get(task, "error")
		if len(e) > 0 && e[0] == '{' {
			t.end(h, call, at, errTypeOf(e), text(jsonlex.Get(e, "message")))
			return
		}
		t.end(h, call, at, "_OTHER", "the task failed")
	case status == "completed" && !call.task2025:
		t.completed(h, call, jsonlex.Get(task, "result"), at)
	}
}

// completed ends a task's span with its final result.
func (t *spanTasks) completed(h *Spans, call *openSpan, result []byte, at time.Time) {
	if !h.shed {
		call.size = int64(len(result))
	}
	h.capture(call, result)
	if isToolError(result) {
		t.end(h, call, at, "tool_error", toolErrorText(result))
		return
	}
	t.end(h, call, at, "", "")
}

// endAll ends every open task's span as the session ends.
func (t *spanTasks) endAll(h *Spans, at time.Time) {
	for _, s := range t.by {
		t.end(h, s, at, "task_unfinished", "the session ended before the task did")
	}
}

// errTypeOf is a JSON-RPC error's error.type: its code, or _OTHER.
func errTypeOf(rpcErr []byte) string {
	code := jsonlex.Get(rpcErr, "code")
	if len(code) == 0 || len(code) > 20 {
		return "_OTHER"
	}
	for _, c := range code {
		if (c < '0' || c > '9') && c != '-' {
			return "_OTHER"
		}
	}
	return string(code)
}
