package main

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Tasks, in both eras' shapes (the 2026-07-28 tasks extension, SEP-2663; the
// 2025-11-25 utility, basic/utilities/tasks.mdx), for the tests of the proxy
// following them. A call of tool "task" (or any tools/call carrying params.task,
// 2025-11-25) is answered with a handle, task id "rawtask-N". Its arguments say
// how it goes:
//
//	"end":   "completed" (default), "error" (completed with isError: true),
//	         "failed" (a JSON-RPC error), "cancelled", or "never" (working for ever)
//	"polls": how many tasks/get answer "working" before the end (default 1)
//
// tasks/get answers the task's state (2026-07-28: with its result or error once
// terminal); tasks/result (2025-11-25) answers what the call would have returned;
// tasks/cancel cancels it (2025-11-25: answered with the task; 2026-07-28: an empty
// acknowledgement). An unknown task id gets error -32602.

type task struct {
	id        string
	era2025   bool
	end       string
	polls     int // tasks/get answering "working" still to come
	status    string
	arguments string // raw, echoed in the final result
}

func (r *replier) appendTaskHandle(buf []byte, req request) []byte {
	if r.tasks == nil {
		r.tasks = make(map[string]*task)
	}
	t := &task{id: "rawtask-" + strconv.Itoa(len(r.tasks)+1), era2025: req.task.IsObject(), end: "completed", polls: 1,
		status: "working", arguments: req.arguments.Raw}
	if e := req.arguments.Get("end"); e.Type == gjson.String {
		t.end = e.Str
	}
	if p := req.arguments.Get("polls"); p.Type == gjson.Number {
		t.polls = int(p.Int())
	}
	if t.arguments == "" {
		t.arguments = "{}"
	}
	r.tasks[t.id] = t
	buf = appendResultStart(buf, req.id.Raw)
	if t.era2025 {
		buf = append(buf, `{"task":`...)
		buf = t.appendState(buf)
		return append(buf, "}}"...)
	}
	buf = append(buf, `{"resultType":"task",`...)
	buf = t.appendFields(buf)
	return append(buf, "}}"...)
}

func (r *replier) appendTaskAnswer(buf []byte, req request) []byte {
	id := req.id.Raw
	t := r.tasks[req.taskID.Str]
	if t == nil {
		return appendError(buf, id, -32602, "Unknown task: "+req.taskID.Str)
	}
	switch req.method.Str {
	case "tasks/cancel":
		if t.status != "working" {
			return appendError(buf, id, -32602, "Cannot cancel task: already in terminal status '"+t.status+"'")
		}
		t.status = "cancelled"
		if !t.era2025 {
			return append(appendResultStart(buf, id), `{"resultType":"complete"}}`...)
		}
		return append(t.appendState(appendResultStart(buf, id)), '}')
	case "tasks/result":
		t.settle()
		switch t.status {
		case "failed":
			return appendError(buf, id, -32000, "task failed as asked")
		case "cancelled":
			return appendError(buf, id, -32000, "task was cancelled")
		}
		buf = t.appendResult(appendResultStart(buf, id))
		return append(buf, '}')
	}
	if t.status == "working" {
		if t.polls > 0 || t.end == "never" {
			t.polls--
		} else {
			t.settle()
		}
	}
	buf = appendResultStart(buf, id)
	if t.era2025 {
		return append(t.appendState(buf), '}')
	}
	buf = append(buf, `{"resultType":"complete",`...)
	buf = t.appendFields(buf)
	switch t.status {
	case "completed":
		buf = append(buf, `,"result":`...)
		buf = t.appendResult(buf)
	case "failed":
		buf = append(buf, `,"error":{"code":-32000,"message":"task failed as asked"}`...)
	}
	return append(buf, "}}"...)
}

// settle moves a working task to its end.
func (t *task) settle() {
	if t.status != "working" || t.end == "never" {
		return
	}
	switch t.end {
	case "failed", "cancelled":
		t.status = t.end
	default:
		t.status = "completed"
	}
}

// appendState appends the task as 2025-11-25 shows it: an object of its own.
func (t *task) appendState(buf []byte) []byte {
	buf = append(buf, `{"taskId":`...)
	buf = gjson.AppendJSONString(buf, t.id)
	buf = append(buf, `,"status":`...)
	buf = gjson.AppendJSONString(buf, t.status)
	return append(buf, `,"createdAt":"2026-12-06T00:00:00Z","lastUpdatedAt":"2026-12-06T00:00:00Z","ttl":60000,"pollInterval":100}`...)
}

// appendFields appends the task's members as 2026-07-28 inlines them in a result.
func (t *task) appendFields(buf []byte) []byte {
	buf = append(buf, `"taskId":`...)
	buf = gjson.AppendJSONString(buf, t.id)
	buf = append(buf, `,"status":`...)
	buf = gjson.AppendJSONString(buf, t.status)
	return append(buf, `,"createdAt":"2026-12-06T00:00:00Z","lastUpdatedAt":"2026-12-06T00:00:00Z","ttlMs":60000,"pollIntervalMs":100`...)
}

// appendResult appends the call's final result.
func (t *task) appendResult(buf []byte) []byte {
	buf = append(buf, `{"content":[{"type":"text","text":`...)
	buf = gjson.AppendJSONString(buf, "task done: "+t.arguments)
	if t.end == "error" {
		buf = append(buf, `}],"isError":true`...)
	} else {
		buf = append(buf, `}],"isError":false`...)
	}
	if t.era2025 {
		buf = append(buf, `,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":`...)
		buf = gjson.AppendJSONString(buf, t.id)
		buf = append(buf, `}}`...)
	}
	return append(buf, '}')
}
