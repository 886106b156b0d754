package intercept

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/mcptask"
	"github.com/bir-dev/bir-proxy/report"
)

// Calls that outlive their first answer (SPEC §3.5, docs/recording.md "Tasks and
// rounds"): a tools/call answered with a task handle, and one answered with
// resultType "input_required", are still one call and one report. Bookkeeping keeps
// such a call open past that answer and ends it where the host sees it end: a task at
// its terminal status, read from the answers to the host's own tasks/get (2025-11-25:
// tasks/result) and from the server's task notifications; a multi round-trip call at
// the answer of its last round, the host's retry carrying the requestState it was
// given. Nothing is sent upstream for it: the proxy only reads what passes.
//
// Everything here runs on the bookkeeping goroutine, like the rest of tracker.

// openCalls is the calls kept open past their first answer, and the host's task requests
// awaiting their answers.
type openCalls struct {
	tasks  map[string]*call // by taskId
	rounds map[string]*call // by roundKey
	// order is the open calls, oldest first, for the bound; an entry whose call has
	// ended since (no longer in its map under that key) is skipped.
	order []laterEntry
	bytes int64 // what the open calls keep (laterSize)
	seq   int64 // the last laterEntry.seq given
	// shed counts the calls reported unfinished for the bound, for its log lines.
	shed int
	// reqs are the tasks/get, tasks/result and tasks/cancel requests awaiting their
	// answers, by id key (the host's, or ownKey-prefixed for the proxy's own).
	reqs map[string]taskReq
}

type laterEntry struct {
	task bool
	key  string
	c    *call
	seq  int64 // c.keptSeq when kept: a call kept again since has a newer entry
}

type taskReq struct {
	method string // "tasks/get", "tasks/result" or "tasks/cancel"
	taskID string
}

// The bounds of what is kept open (docs/recording.md): past either, the oldest open
// call is reported at once, a task as task_unfinished and a round as input_required,
// as at the session's end. A call keeps its report's arguments (at most half a report)
// and, with a cassette, its raw arguments; a round also the answer that asked for
// input, as its report will show it.
const (
	maxLaterCalls = 1024
	maxLaterBytes = 64 << 20
	// maxRoundResult bounds a requestState kept to join the host's retry.
	maxRoundResult = 1 << 20
	// maxTaskReqs bounds the task requests awaiting answers: a host polling tasks
	// the server never answers must not grow the table without end.
	maxTaskReqs = 4096
	// maxTaskID bounds a task id kept: a server's handle of a megabyte is not one.
	// mcptask.IDString enforces it.
	maxTaskID = mcptask.MaxID
	// maxTaskStatus bounds a task status kept: the statuses are short words, and a
	// server's megabyte one was kept in its open call (uncounted) and its report
	// (past the report's cap). mcptask.StatusString enforces it.
	maxTaskStatus = mcptask.MaxStatus
)

func (l *openCalls) empty() bool { return len(l.tasks) == 0 && len(l.rounds) == 0 }

// laterSize is what an open call keeps.
func laterSize(c *call) int64 {
	// The key too: a round's is its requestState, up to maxRoundResult (100 rounds
	// of 1 MiB were 100 MiB past a bound of 64, TestRoundStateCountsAgainstTheBound);
	// a task's is its id.
	n := int64(len(c.argsOut) + len(c.roundResult) + len(c.key) + 256)
	if c.cass != nil {
		n += int64(len(c.cass.args))
	}
	return n
}

// roundKey is the key of a call awaiting its next round: its requestState, which
// the host's retry echoes; without one (a server need not send it), its tool and
// arguments' fingerprint, which the retry repeats.
func roundKey(state []byte, tool, fingerprint string) string {
	if len(state) > 0 {
		return "s" + string(state)
	}
	return "f" + tool + "\x00" + fingerprint
}

// resultInfo is what bookkeeping reads of a tools/call result, in one pass over its
// members (the last of a name winning, as in the host's JSON.parse).
type resultInfo struct {
	inputRequired, isError bool
	// A task handle (mcptask.HandleState): 2026-07-28's resultType "task" with its
	// taskId and status at the top; 2025-11-25's {"task": {"taskId", "status", ...}}.
	task         bool
	task2025     bool
	taskID       string
	status       string
	requestState []byte // raw, as the retry will carry it
}

// readResult reads a tools/call result's resultType, isError and, for a task handle
// or an input_required round, what following it needs.
func readResult(result []byte) (ri resultInfo) {
	if len(result) == 0 || result[0] != '{' {
		return ri
	}
	var top mcptask.Top
	var ie, rs []byte
	if _, ok := jsonlex.EachMember(result, 0, func(m jsonlex.Member) bool {
		v := result[m.Value.Start:m.Value.End]
		switch k := result[m.Key.Start:m.Key.End]; {
		case top.Note(k, v):
		case jsonlex.KeyIs(k, "isError"):
			ie = v
		case jsonlex.KeyIs(k, "requestState"):
			rs = v
		}
		return true
	}); !ok {
		return ri
	}
	ri.isError = string(ie) == "true"
	if jsonlex.StringOf(top.ResultType) == "input_required" {
		ri.inputRequired = true
		if len(rs) <= maxRoundResult {
			ri.requestState = rs
		}
		return ri
	}
	era, st := top.Handle(result)
	if ri.taskID = mcptask.IDString(st.ID); era == 0 || ri.taskID == "" {
		ri.taskID = "" // no handle the host can follow
		return ri
	}
	ri.task, ri.task2025 = true, era == mcptask.Util
	ri.status = mcptask.StatusString(st.Status)
	return ri
}

// openTask keeps c, whose answer was a task handle, open until the task ends.
func (t *tracker) openTask(c *call, ri resultInfo, at time.Time) {
	l := &t.open
	if l.tasks == nil {
		l.tasks = make(map[string]*call)
	}
	if old, ok := l.tasks[ri.taskID]; ok {
		// A server that gave out one task id twice: the older can no longer be told
		// apart, and ends here.
		t.endLater(old, at, report.OutcomeTaskUnfinished, nil, nil)
	}
	c.taskID, c.taskStatus, c.task2025 = ri.taskID, ri.status, ri.task2025
	c.key = ri.taskID
	l.tasks[ri.taskID] = c
	t.keep(laterEntry{task: true, key: ri.taskID, c: c}, at)
}

// openRound keeps c, whose last round asked for input, open for the host's retry.
func (t *tracker) openRound(c *call, ri resultInfo, result []byte, at time.Time) {
	l := &t.open
	if l.rounds == nil {
		l.rounds = make(map[string]*call)
	}
	c.sentBytes = int64(len(result)) // what the report says if the call ends here
	// Kept as the report will show it (redacted, clipped to what the report has room
	// for), not raw: a long one costs a report's part, and reads as it would have
	// had the answer streamed past (TestLongAnswerIsRecordedAsWhole).
	out, clipped := t.scratch.red.Report(result, max(t.cap-fixedSize(c)-len(c.argsOut), minPart))
	c.roundResult, c.roundClipped, c.roundReported = bytes.Clone(out), clipped, true
	k := roundKey(ri.requestState, c.tool, c.fingerprint)
	if old, ok := l.rounds[k]; ok {
		t.endLater(old, at, report.OutcomeInputRequired, old.roundResult, nil)
	}
	c.key = k
	l.rounds[k] = c
	t.keep(laterEntry{key: k, c: c}, at)
}

// keep counts a call just kept open against the bounds, and ends the oldest past
// them.
func (t *tracker) keep(e laterEntry, at time.Time) {
	l := &t.open
	l.seq++
	e.seq, e.c.keptSeq = l.seq, l.seq
	l.order = append(l.order, e)
	l.bytes += laterSize(e.c)
	if n := len(l.tasks) + len(l.rounds); len(l.order) > 2*n+64 {
		// Entries of calls ended since (or kept again, under a newer entry) go: one
		// task open for the session kept every later call's entry, and the call,
		// arguments and all (TestOpenCallsOrderStaysBounded).
		live := l.order[:0]
		for _, e := range l.order {
			if l.live(e) {
				live = append(live, e)
			}
		}
		clear(l.order[len(live):])
		l.order = live
	}
	for len(l.tasks)+len(l.rounds) > maxLaterCalls || l.bytes > maxLaterBytes {
		old, ok := l.oldest()
		if !ok {
			break
		}
		// A line at the 1st, 2nd, 4th, 8th… call shed, not one each: 10,000 tasks
		// left open made 4,945 lines on stderr (TestOpenCallsBoundSaysSoOnce).
		if l.shed++; l.shed&(l.shed-1) == 0 {
			t.log.Warn("too many tool calls outlive their first answer; the oldest are reported unfinished",
				"tool", old.tool, "open", len(l.tasks)+len(l.rounds), "unfinished_so_far", l.shed)
		}
		t.endLater(old, at, unfinished(old), old.roundResult, nil)
	}
}

// oldest is the oldest call still open.
func (l *openCalls) oldest() (*call, bool) {
	for len(l.order) > 0 {
		e := l.order[0]
		l.order[0] = laterEntry{}
		l.order = l.order[1:]
		if l.live(e) {
			return e.c, true
		}
	}
	return nil, false
}

// live says e is the latest entry of a call still open.
func (l *openCalls) live(e laterEntry) bool {
	m := l.rounds
	if e.task {
		m = l.tasks
	}
	return m[e.key] == e.c && e.c.keptSeq == e.seq
}

// unfinished is the outcome of an open call the session (or the bound) ends.
func unfinished(c *call) string {
	if c.taskID != "" {
		return report.OutcomeTaskUnfinished
	}
	return report.OutcomeInputRequired
}

// endLater reports an open call and forgets it.
func (t *tracker) endLater(c *call, at time.Time, outcome string, result, rpcErr json.RawMessage) {
	l := &t.open
	if c.taskID != "" {
		delete(l.tasks, c.key)
	} else {
		delete(l.rounds, c.key)
	}
	l.bytes -= laterSize(c)
	if l.empty() {
		l.order, l.bytes = nil, 0
	}
	c.roundResult = nil
	t.finish(c, at, outcome, result, rpcErr)
}

// join makes the host's tools/call retry (its params) the next round of the call
// that asked for input, and returns that call; nil when it continues none.
func (t *tracker) join(params []byte, tool, fingerprint string) *call {
	l := &t.open
	if len(l.rounds) == 0 || len(params) == 0 || params[0] != '{' {
		return nil
	}
	k := roundKey(jsonlex.Get(params, "requestState"), tool, fingerprint)
	c, ok := l.rounds[k]
	if !ok {
		return nil
	}
	delete(l.rounds, k)
	l.bytes -= laterSize(c)
	if l.empty() {
		l.order, l.bytes = nil, 0
	}
	c.roundResult, c.sentBytes, c.roundReported = nil, 0, false
	c.rounds++
	// Counted once: the retry's own awaiting (the host path counted it) is the call's.
	t.interested.Add(-1)
	return c
}

// taskRequest notes a tasks/get, tasks/result or tasks/cancel request (its id and
// params) of the host's, or of the proxy's own under keyPrefix.
func (t *tracker) taskRequest(method string, id, params []byte, keyPrefix string) {
	l := &t.open
	if l.reqs == nil {
		l.reqs = make(map[string]taskReq)
	}
	k := string(t.idKey(keyPrefix, id))
	if _, ok := l.reqs[k]; !ok {
		if len(l.reqs) >= maxTaskReqs {
			for old := range l.reqs { // any one: a bound, not an order
				delete(l.reqs, old)
				t.interested.Add(-1)
				break
			}
		}
	} else {
		t.interested.Add(-1) // a reused id: counted once
	}
	var taskID string
	if len(params) > 0 && params[0] == '{' {
		taskID = mcptask.IDString(jsonlex.Get(params, "taskId"))
	}
	l.reqs[k] = taskReq{method: method, taskID: taskID}
}

// forgetTaskRequest stops waiting for the answer to a task request (cancelled by the
// host, or lost with its server).
func (t *tracker) forgetTaskRequest(k string) {
	if _, ok := t.open.reqs[k]; ok {
		delete(t.open.reqs, k)
		t.interested.Add(-1)
	}
}

// taskAnswer handles the answer f to a task request; false: k is none.
func (t *tracker) taskAnswer(k string, f jsonlex.Fields, at time.Time) bool {
	req, ok := t.open.reqs[k]
	if !ok {
		return false
	}
	t.forgetTaskRequest(k)
	c, open := t.open.tasks[req.taskID]
	if !open || req.taskID == "" {
		return true
	}
	if f.Error != nil {
		if req.method == "tasks/result" {
			// What the call would have returned: a JSON-RPC error (2025-11-25).
			t.endLater(c, at, report.OutcomeRPCError, nil, f.Error)
		}
		return true // else the task's state is unknown; it stays open
	}
	if req.method == "tasks/result" {
		t.endTaskWith(c, f.Result, at)
		return true
	}
	// tasks/get, and 2025-11-25's tasks/cancel, answer with the task.
	t.taskState(c, f.Result, at)
	return true
}

// taskNotification handles the server's notifications/tasks (2026-07-28, on a listen
// stream) and notifications/tasks/status (2025-11-25): the task's state, as tasks/get
// answers it.
func (t *tracker) taskNotification(params []byte, at time.Time) {
	if len(params) == 0 || params[0] != '{' {
		return
	}
	if c, ok := t.open.tasks[mcptask.IDString(jsonlex.Get(params, "taskId"))]; ok {
		t.taskState(c, params, at)
	}
}

// taskState reads a task's state (a tasks/get result, a notification's params) and
// ends the call at a terminal status. In 2025-11-25 the final result comes from
// tasks/result, so only a cancel ends it here.
func (t *tracker) taskState(c *call, task []byte, at time.Time) {
	st, ok := mcptask.ReadState(task, 0)
	status := mcptask.StatusString(st.Status)
	if !ok || status == "" {
		return
	}
	c.taskStatus = status
	if !mcptask.Terminal(status) {
		return
	}
	switch {
	case status == mcptask.Cancelled:
		t.endLater(c, at, report.OutcomeCancelled, nil, nil)
	case status == mcptask.Failed:
		rpcErr := st.Err
		if rpcErr == nil || rpcErr[0] != '{' {
			// 2025-11-25 puts the error in tasks/result's answer, which a host that
			// saw the failure need not ask for (the official SDK 1.x does not): the
			// call ends here, with the task's statusMessage as its error.
			rpcErr = mcptask.FailedError(st.Message)
			c.sentBytes = -1 // no error came: the report has no size of one
		}
		t.endLater(c, at, report.OutcomeRPCError, nil, rpcErr)
	case c.task2025:
		// Its result is tasks/result's answer.
	default:
		t.endTaskWith(c, st.Result, at)
	}
}

// endTaskWith ends a completed task's call with its final result.
func (t *tracker) endTaskWith(c *call, result []byte, at time.Time) {
	c.taskStatus = mcptask.Completed
	outcome := report.OutcomeOK
	if ri := readResult(result); ri.isError {
		outcome = report.OutcomeToolError
	}
	t.endLater(c, at, outcome, result, nil)
}

// endAll reports every call still open as the session ends.
func (t *tracker) endAll(at time.Time) {
	l := &t.open
	for _, c := range l.tasks {
		t.endLater(c, at, report.OutcomeTaskUnfinished, nil, nil)
	}
	for _, c := range l.rounds {
		t.endLater(c, at, report.OutcomeInputRequired, c.roundResult, nil)
	}
	for k := range l.reqs {
		t.forgetTaskRequest(k)
	}
}

// isTaskMethod says a request of this method may say how a task ended.
func isTaskMethod(method []byte) bool {
	return jsonlex.KeyIs(method, "tasks/get") || jsonlex.KeyIs(method, "tasks/result") || jsonlex.KeyIs(method, "tasks/cancel")
}
