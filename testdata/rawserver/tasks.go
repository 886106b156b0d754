package main

import (
	"bytes"
	"strconv"

	"github.com/tidwall/gjson"
)

// Task tools (with --reply): a tools/call of one of them is answered with a task
// handle instead of a result, and the task is then followed with tasks/get,
// tasks/result and tasks/cancel, keyed by params.taskId:
//
//	task                 the tasks extension (2026-07-28): {"resultType":"task","taskId",
//	                     "status":"working","pollIntervalMs":100,...}; tasks/get answers
//	                     "working" once, then "completed" with "result": the text content
//	                     of the raw arguments
//	task_forever         the same handle; tasks/get answers "working" until a tasks/cancel,
//	                     then "cancelled"
//	task_legacy          the 2025-11-25 utility: {"task":{"taskId","status":"working",
//	                     "pollInterval":100,...}}; tasks/get answers the task's fields
//	                     ("working" once, then "completed"), tasks/result the result
//	task_legacy_forever  the same handle; "working" until a tasks/cancel
//
// The arguments' "end" changes how a task that ends ends: "error" completes with a
// result of isError true; "failed" fails (the extension's tasks/get carries the
// error -32000; the utility's tasks/result answers it).
//
// With --reply-size N, each tasks/get answer of the extension's tasks carries an
// N-byte statusMessage, and a completed one the N-byte result.
//
// Task ids are "rawtask-N". A task method naming an unknown task gets -32602; a
// tasks/result of an unfinished task gets -32000 (a real server would block).
type rawTask struct {
	legacy    bool
	forever   bool
	polls     int
	cancelled bool
	end       string // the arguments' "end": "", "error" or "failed"
	args      string // the raw arguments, for the result
}

var taskTools = map[string]bool{"task": true, "task_forever": true, "task_legacy": true, "task_legacy_forever": true}

// status is the task's status after one more tasks/get (polled) or as it stands.
func (t *rawTask) status() string {
	switch {
	case t.cancelled:
		return "cancelled"
	case t.forever || t.polls < 2:
		return "working"
	case t.end == "failed":
		return "failed"
	}
	return "completed"
}

// appendTaskHandle answers a tools/call of a task tool: the whole response.
func (r *replier) appendTaskHandle(buf []byte, id string, req request) []byte {
	if r.tasks == nil {
		r.tasks = map[string]*rawTask{}
	}
	name := req.name.Str
	t := &rawTask{
		legacy:  name == "task_legacy" || name == "task_legacy_forever",
		forever: name == "task_forever" || name == "task_legacy_forever",
		args:    req.arguments.Raw,
		end:     req.arguments.Get("end").Str,
	}
	r.taskN++
	taskID := "rawtask-" + strconv.Itoa(r.taskN)
	r.tasks[taskID] = t
	buf = appendResultStart(buf, id)
	if t.legacy {
		buf = appendTask(append(buf, `{"task":{`...), taskID, "working", true)
		return append(buf, "}}}"...)
	}
	buf = appendTask(append(buf, `{"resultType":"task",`...), taskID, "working", false)
	return append(buf, "}}"...)
}

// appendTaskMethod answers tasks/get, tasks/result and tasks/cancel: the whole response.
func (r *replier) appendTaskMethod(buf []byte, id string, req request) []byte {
	taskID := req.taskID.Str
	t := r.tasks[taskID]
	if t == nil || req.taskID.Type != gjson.String {
		return appendError(buf, id, -32602, "Unknown task")
	}
	switch req.method.Str {
	case "tasks/get":
		t.polls++
		status := t.status()
		buf = appendResultStart(buf, id)
		if t.legacy {
			return append(appendTask(append(buf, '{'), taskID, status, true), "}}"...)
		}
		buf = appendTask(append(buf, `{"resultType":"complete",`...), taskID, status, false)
		if r.replySize > 0 && r.bigPad == nil {
			r.bigPad = bytes.Repeat([]byte{'x'}, r.replySize)
		}
		if r.bigPad != nil {
			buf = append(append(append(buf, `,"statusMessage":"`...), r.bigPad...), '"')
		}
		switch {
		case status == "failed":
			buf = append(buf, `,"error":{"code":-32000,"message":"task failed as asked"}`...)
		case status == "completed" && r.bigResult != nil:
			buf = append(append(buf, `,"result":`...), r.bigResult...)
		case status == "completed":
			buf = append(buf, `,"result":`...)
			buf = appendTextResult(buf, t.args, t.end == "error")
		}
		return append(buf, '}', '}')
	case "tasks/result":
		switch t.status() {
		case "failed":
			return appendError(buf, id, -32000, "task failed as asked")
		case "completed":
		default:
			return appendError(buf, id, -32000, "Task not finished: "+t.status())
		}
		buf = appendTextResult(appendResultStart(buf, id), t.args, t.end == "error")
		buf = buf[:len(buf)-1] // reopen it for the related-task _meta
		buf = append(buf, `,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":`...)
		buf = gjson.AppendJSONString(buf, taskID)
		return append(buf, "}}}}"...)
	default: // tasks/cancel
		if s := t.status(); s != "working" {
			return appendError(buf, id, -32602, "Cannot cancel task: already in terminal status '"+s+"'")
		}
		t.cancelled = true
		if t.legacy {
			buf = appendResultStart(buf, id)
			return append(appendTask(append(buf, '{'), taskID, "cancelled", true), '}', '}')
		}
		return append(appendResultStart(buf, id), `{"resultType":"complete"}}`...)
	}
}

// appendTask appends a task's members (no braces) as the era spells them.
func appendTask(buf []byte, taskID, status string, legacy bool) []byte {
	buf = append(buf, `"taskId":`...)
	buf = gjson.AppendJSONString(buf, taskID)
	buf = append(buf, `,"status":`...)
	buf = gjson.AppendJSONString(buf, status)
	buf = append(buf, `,"createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z"`...)
	if legacy {
		return append(buf, `,"ttl":60000,"pollInterval":100`...)
	}
	return append(buf, `,"ttlMs":60000,"pollIntervalMs":100`...)
}
