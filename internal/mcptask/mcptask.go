// Package mcptask reads MCP task handles and task states (SPEC §3.5, §4): the pure
// parts shared by the proxy's replay dispatches (package replay, which follows a
// dispatch's task) and `bir-proxy verify` (which follows a replayed call's task).
// Nothing here sends or waits: a caller polls tasks/get (2025-11-25: then
// tasks/result) and gives each answer to Task.Read.
package mcptask

import (
	"errors"
	"strconv"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Task eras: how a server answered a tools/call with a task handle.
const (
	// Ext is the tasks extension (2026-07-28): the tools/call result is the task,
	// {"resultType":"task","taskId","status","pollIntervalMs",...}; tasks/get answers
	// the task again ("resultType":"complete"), whose terminal form holds the tool's
	// result or error.
	Ext = iota + 1
	// Util is the 2025-11-25 utility: the result is {"task":{"taskId","status",
	// "pollInterval",...}}; tasks/get answers the task's members at the top of its
	// result, and tasks/result the tool's result (or error) once the task has ended.
	Util
)

// Task statuses (both eras).
const (
	Working       = "working"
	InputRequired = "input_required"
	Completed     = "completed"
	Failed        = "failed"
	Cancelled     = "cancelled"
)

// Terminal says a status ends the task.
func Terminal(s string) bool {
	return s == Completed || s == Failed || s == Cancelled
}

// Poll interval bounds (SPEC §4: the task's own interval, kept within 100 ms – 5 s):
// a server's 0 must not have a follower spin on it, nor its 10^12 stop following.
const (
	MinPoll     = 100 * time.Millisecond
	MaxPoll     = 5 * time.Second
	DefaultPoll = time.Second // a task that names no interval
)

// Task is what a follower knows of a task.
type Task struct {
	Era    int
	ID     []byte // the taskId as the server spelled it: a valid JSON string literal
	Status string
	Poll   time.Duration // the server's latest interval, clamped
	// From a terminal tasks/get of the tasks extension.
	Result, Err []byte
	// Message is the statusMessage of the last state read, raw (a JSON string, or
	// anything a server sent), nil when it had none.
	Message []byte
}

// Handle reads the result of a tools/call: is it a task handle, and which. bad says
// why a handle cannot be followed (no usable taskId). A 2025-11-25 handle is a result
// whose "task" member is an object with a string taskId and no "content" member
// beside it: a CallToolResult always has content, and a tool's result with a member
// named "task" is not taken for a handle.
func Handle(result []byte) (t Task, ok bool, bad string) {
	switch {
	case jsonlex.StringOf(jsonlex.Get(result, "resultType")) == "task":
		t = Task{Era: Ext, Status: Working, Poll: DefaultPoll}
		bad = t.Read(result, false)
		return t, true, bad
	case len(result) > 0 && result[0] == '{':
		inner := jsonlex.Get(result, "task")
		if len(inner) == 0 || inner[0] != '{' || jsonlex.Get(result, "content") != nil {
			return Task{}, false, ""
		}
		if id := jsonlex.Get(inner, "taskId"); len(id) == 0 || id[0] != '"' {
			return Task{}, false, ""
		}
		t = Task{Era: Util, Status: Working, Poll: DefaultPoll}
		bad = t.Read(inner, false)
		return t, true, bad
	}
	return Task{}, false, ""
}

// Read takes the members of a task object: taskId, status, and the era's poll
// interval. From a handle (update false) taskId is required and status may be
// absent (it is then "working"); from tasks/get (update true) status is required,
// and a taskId, if present, must be the one followed: an answer about another task
// is not an answer about this one. bad says what is wrong ("" when nothing).
func (t *Task) Read(obj []byte, update bool) (bad string) {
	if len(obj) == 0 || obj[0] != '{' {
		return "is not a JSON object"
	}
	var id, status, poll, result, rpcErr, msg []byte
	if _, ok := jsonlex.EachMember(obj, 0, func(m jsonlex.Member) bool {
		v := obj[m.Value.Start:m.Value.End]
		switch k := obj[m.Key.Start:m.Key.End]; {
		case jsonlex.KeyIs(k, "taskId"):
			id = v
		case jsonlex.KeyIs(k, "status"):
			status = v
		case t.Era == Ext && jsonlex.KeyIs(k, "pollIntervalMs"), t.Era == Util && jsonlex.KeyIs(k, "pollInterval"):
			poll = v
		case jsonlex.KeyIs(k, "result"):
			result = v
		case jsonlex.KeyIs(k, "error"):
			rpcErr = v
		case jsonlex.KeyIs(k, "statusMessage"):
			msg = v
		}
		return true
	}); !ok {
		return "is not a JSON object"
	}
	switch {
	case !update:
		s, ok := stringValue(id)
		if !ok || s == "" {
			return "has no taskId string"
		}
		t.ID = id
	case id != nil:
		s, ok := stringValue(id)
		if want, _ := jsonlex.DecodeString(t.ID); !ok || s != want {
			return "is about another task (its taskId is not the one polled)"
		}
	}
	switch s, ok := stringValue(status); {
	case ok:
		t.Status = s
	case status != nil || update:
		return "has no status string"
	}
	if d, ok := PollInterval(poll); ok {
		t.Poll = d
	}
	t.Message = msg
	if update && t.Era == Ext {
		switch t.Status {
		case Completed:
			if len(result) == 0 || result[0] != '{' {
				return "says completed without a result object"
			}
			t.Result = result
		case Failed:
			if len(rpcErr) == 0 || rpcErr[0] != '{' {
				return "says failed without an error object"
			}
			t.Err = rpcErr
		}
	}
	return ""
}

// FailedError is the JSON-RPC error a 2025-11-25 task that failed stands for when
// its failure was seen in a tasks/get (or a status notification): that era puts the
// error itself in tasks/result's answer, which a host that saw the failure need not
// ask for, so the proxy records this one (intercept/later.go) and verify compares a
// replay with it. msg is the statusMessage, raw.
func FailedError(msg []byte) []byte {
	out := []byte(`{"code":-32603,"message":`)
	text := "the task failed"
	if len(msg) > 1 && msg[0] == '"' {
		text += ": " + jsonlex.StringOf(msg)
	}
	out = jsonlex.AppendString(out, text)
	return append(out, '}')
}

// PollInterval reads a poll interval in milliseconds, clamped to [MinPoll, MaxPoll];
// ok is false when raw is not a number (the interval then stays as it was). Compared
// as milliseconds before any conversion: 1e300 must not overflow.
func PollInterval(raw []byte) (time.Duration, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	if end, ok := jsonlex.NumberEnd(raw, 0); !ok || end != len(raw) {
		return 0, false
	}
	ms, err := strconv.ParseFloat(string(raw), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	switch {
	case ms >= float64(MaxPoll/time.Millisecond):
		return MaxPoll, true
	case ms <= float64(MinPoll/time.Millisecond):
		return MinPoll, true
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}

// stringValue decodes v when it is a valid JSON string literal.
func stringValue(v []byte) (string, bool) {
	if len(v) == 0 || v[0] != '"' || !jsonlex.Valid(v) {
		return "", false
	}
	return jsonlex.DecodeString(v)
}
