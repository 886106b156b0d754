// Package mcptask reads MCP task handles and task states (SPEC §3.5, §4), raw (no
// decode of a forwarded message): the one reader shared by the proxy's replay
// dispatches (package replay, which follows a dispatch's task), `bir-proxy verify`
// (which follows a replayed call's task) and bookkeeping (intercept/later.go, which
// follows a host's task by what passes: Top, ReadState, IDString, StatusString,
// Terminal). Nothing here sends or waits: a caller polls tasks/get (2025-11-25: then
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

// Bounds of what a follower that keeps many tasks keeps of one (bookkeeping,
// intercept/later.go; its spans; docs/recording.md): a server's task id of a megabyte
// is not one, and the statuses are short words (a megabyte one was kept in every open
// call, uncounted, and in its report, past the report's cap).
const (
	MaxID     = 1024
	MaxStatus = 64
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

// State is the members of a task object a follower reads, raw as the server sent
// them: nil when absent, of a name given twice the last (as in a host's JSON.parse).
type State struct {
	ID, Status, Poll []byte
	// Result and Err: a terminal state's, in the tasks extension.
	Result, Err []byte
	Message     []byte // statusMessage
}

// ReadState reads a task object's members in one pass: a handle's, a tasks/get
// answer's, a task notification's params. era names the poll interval's member
// (Ext: pollIntervalMs, Util: pollInterval; 0: neither). ok is false when obj is not
// a JSON object.
func ReadState(obj []byte, era int) (s State, ok bool) {
	if len(obj) == 0 || obj[0] != '{' {
		return State{}, false
	}
	if _, ok := jsonlex.EachMember(obj, 0, func(m jsonlex.Member) bool {
		v := obj[m.Value.Start:m.Value.End]
		switch k := obj[m.Key.Start:m.Key.End]; {
		case jsonlex.KeyIs(k, "taskId"):
			s.ID = v
		case jsonlex.KeyIs(k, "status"):
			s.Status = v
		case era == Ext && jsonlex.KeyIs(k, "pollIntervalMs"), era == Util && jsonlex.KeyIs(k, "pollInterval"):
			s.Poll = v
		case jsonlex.KeyIs(k, "result"):
			s.Result = v
		case jsonlex.KeyIs(k, "error"):
			s.Err = v
		case jsonlex.KeyIs(k, "statusMessage"):
			s.Message = v
		}
		return true
	}); !ok {
		return State{}, false
	}
	return s, true
}

// Top is what tells a tools/call result for a task handle: its resultType, task and
// content members, raw, noted (Note) in the one pass its reader makes over the
// result's members, the last of a name winning.
type Top struct {
	ResultType, task, content []byte
}

// Note takes a member of a result (its key and value, raw) if it is one of Top's.
func (r *Top) Note(k, v []byte) bool {
	switch {
	case jsonlex.KeyIs(k, "resultType"):
		r.ResultType = v
	case jsonlex.KeyIs(k, "task"):
		r.task = v
	case jsonlex.KeyIs(k, "content"):
		r.content = v
	default:
		return false
	}
	return true
}

// Handle says whether the result whose members r noted is a task handle: era is Ext
// or Util (0 when not), and s the handle's task members. The tasks extension's
// (2026-07-28) is a result with resultType "task", its members at the top. A
// 2025-11-25 handle is a result whose "task" member is an object with a string taskId,
// with no "content" member beside it (a CallToolResult always has content) and no
// resultType (a 2026-07-28 result is not one of 2025-11-25): a tool's result with a
// member named "task" is not taken for a handle. Whether an extension handle's taskId
// is usable is for its reader to say. Only a handle is read again.
func (r *Top) Handle(result []byte) (era int, s State) {
	switch jsonlex.StringOf(r.ResultType) {
	case "task":
		if s, ok := ReadState(result, Ext); ok {
			return Ext, s
		}
	case "":
		if r.content != nil {
			return 0, State{}
		}
		if s, ok := ReadState(r.task, Util); ok && len(s.ID) > 0 && s.ID[0] == '"' {
			return Util, s
		}
	}
	return 0, State{}
}

// HandleState reads the result of a tools/call as Top.Handle does.
func HandleState(result []byte) (era int, s State) {
	if len(result) == 0 || result[0] != '{' {
		return 0, State{}
	}
	var r Top
	if _, ok := jsonlex.EachMember(result, 0, func(m jsonlex.Member) bool {
		r.Note(result[m.Key.Start:m.Key.End], result[m.Value.Start:m.Value.End])
		return true
	}); !ok {
		return 0, State{}
	}
	return r.Handle(result)
}

// Handle reads the result of a tools/call: is it a task handle (HandleState), and
// which. bad says why a handle cannot be followed (no usable taskId).
func Handle(result []byte) (t Task, ok bool, bad string) {
	era, s := HandleState(result)
	if era == 0 {
		return Task{}, false, ""
	}
	t = Task{Era: era, Status: Working, Poll: DefaultPoll}
	bad = t.take(s, false)
	return t, true, bad
}

// Read takes the members of a task object: taskId, status, and the era's poll
// interval. From a handle (update false) taskId is required and status may be
// absent (it is then "working"); from tasks/get (update true) status is required,
// and a taskId, if present, must be the one followed: an answer about another task
// is not an answer about this one. bad says what is wrong ("" when nothing).
func (t *Task) Read(obj []byte, update bool) (bad string) {
	s, ok := ReadState(obj, t.Era)
	if !ok {
		return "is not a JSON object"
	}
	return t.take(s, update)
}

// take is Read of the members read.
func (t *Task) take(s State, update bool) (bad string) {
	switch {
	case !update:
		id, ok := stringValue(s.ID)
		if !ok || id == "" {
			return "has no taskId string"
		}
		t.ID = s.ID
	case s.ID != nil:
		id, ok := stringValue(s.ID)
		if want, _ := jsonlex.DecodeString(t.ID); !ok || id != want {
			return "is about another task (its taskId is not the one polled)"
		}
	}
	switch st, ok := stringValue(s.Status); {
	case ok:
		t.Status = st
	case s.Status != nil || update:
		return "has no status string"
	}
	if d, ok := PollInterval(s.Poll); ok {
		t.Poll = d
	}
	t.Message = s.Message
	if update && t.Era == Ext {
		switch t.Status {
		case Completed:
			if len(s.Result) == 0 || s.Result[0] != '{' {
				return "says completed without a result object"
			}
			t.Result = s.Result
		case Failed:
			if len(s.Err) == 0 || s.Err[0] != '{' {
				return "says failed without an error object"
			}
			t.Err = s.Err
		}
	}
	return ""
}

// IDString is a taskId (raw) as a follower of many tasks keys it: the decoded
// string, or "" for anything that is not a JSON string of at most MaxID bytes.
func IDString(raw []byte) string {
	if len(raw) > MaxID+2 {
		return ""
	}
	s, _ := stringValue(raw)
	return s
}

// StatusString is a task status (raw) as a follower of many tasks keeps it: the
// decoded string, or "" for anything that is not a JSON string of at most MaxStatus
// bytes.
func StatusString(raw []byte) string {
	if len(raw) > MaxStatus+2 {
		return ""
	}
	s, _ := stringValue(raw)
	return s
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
