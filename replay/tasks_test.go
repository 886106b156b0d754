package replay

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/relay"
)

// taskRecorder is a Recorder for a synctest bubble: each poll takes the next body
// from polls (held until there is one, or its context ends); results go to results.
type taskRecorder struct {
	polls   chan []byte
	results chan []byte
}

func (r *taskRecorder) ProxyID() string                                    { return "p" }
func (r *taskRecorder) Reregister() uint64                                 { return 0 }
func (r *taskRecorder) WaitRegistered(ctx context.Context, _ uint64) error { return ctx.Err() }
func (r *taskRecorder) Post(ctx context.Context, path string, body []byte, _ int64) (recorder.Answer, error) {
	switch path {
	case "/proxy/poll":
		select {
		case b := <-r.polls:
			return recorder.Answer{Status: 200, Body: b}, nil
		case <-ctx.Done():
			return recorder.Answer{}, ctx.Err()
		}
	case "/proxy/result":
		r.results <- body
	}
	return recorder.Answer{Status: 200}, nil
}

// taskCall is one request the scripted upstream was given.
type taskCall struct {
	method string
	params string
	at     time.Time
}

// taskUpstream answers each request with what its script says; "" holds the request
// until its context ends (as relay.Call reports that), "lost" is the server gone.
type taskUpstream struct {
	mu     sync.Mutex
	calls  []taskCall
	script func(method string, params []byte, n int) string // n: requests of that method so far, from 0
	counts map[string]int
}

func (u *taskUpstream) Call(ctx context.Context, req relay.Request) ([]byte, error) {
	u.mu.Lock()
	u.calls = append(u.calls, taskCall{method: req.Method, params: string(req.Params), at: time.Now()})
	if u.counts == nil {
		u.counts = map[string]int{}
	}
	n := u.counts[req.Method]
	u.counts[req.Method]++
	u.mu.Unlock()
	if req.Sent != nil {
		req.Sent()
	}
	switch ans := u.script(req.Method, req.Params, n); ans {
	case "":
		<-ctx.Done()
		if cause := context.Cause(ctx); cause != ctx.Err() {
			return nil, fmt.Errorf("waiting: %w: %w", ctx.Err(), cause)
		}
		return nil, fmt.Errorf("waiting: %w", ctx.Err())
	case "lost":
		return nil, fmt.Errorf("waiting: %w", relay.ErrUpstreamLost)
	default:
		return []byte(`{"jsonrpc":"2.0","id":"bir:p:1",` + ans + `}`), nil
	}
}

func (u *taskUpstream) methods() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var m []string
	for _, c := range u.calls {
		m = append(m, c.method)
	}
	return m
}

const hostMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`

// runTask runs one dispatch (its JSON in a poll answer) in fake time on a ready,
// stateless-era upstream answering by script, and returns its posted result and the
// requests the upstream got. More poll bodies (a cancel) are sent at the fake times
// given in later.
func runTask(t *testing.T, dispatch string, script func(method string, params []byte, n int) string, later map[time.Duration]string) (gjson.Result, *taskUpstream, time.Duration) {
	t.Helper()
	var (
		res  gjson.Result
		up   = &taskUpstream{script: script}
		took time.Duration
	)
	synctest.Test(t, func(t *testing.T) {
		rec := &taskRecorder{polls: make(chan []byte, 1+len(later)), results: make(chan []byte, 1)}
		gate := NewGate(nil)
		host(gate, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":`+hostMeta+`}}`)
		ex := Start(Config{Recorder: rec, Upstream: up, Gate: gate, Logger: slog.New(slog.DiscardHandler)})
		defer ex.Close(context.Background())
		start := time.Now()
		rec.polls <- []byte(`{"dispatches":[` + dispatch + `]}`)
		for at, body := range later {
			go func() {
				time.Sleep(at)
				rec.polls <- []byte(body)
			}()
		}
		select {
		case b := <-rec.results:
			res = gjson.ParseBytes(b)
			took = time.Since(start)
		case <-time.After(24 * time.Hour):
			t.Fatal("no result in a day of fake time")
		}
	})
	return res, up, took
}

// extTask scripts a tasks-extension (2026-07-28) server: the tools/call is answered
// with handle, then tasks/get answers gets[n] in turn (the last one repeated).
func extTask(handle string, gets ...string) func(string, []byte, int) string {
	return func(method string, _ []byte, n int) string {
		switch method {
		case "tools/call":
			return `"result":` + handle
		case "tasks/get":
			return gets[min(n, len(gets)-1)]
		case "tasks/cancel":
			return `"result":{"resultType":"complete"}`
		}
		return `"error":{"code":-32601,"message":"Method not found"}`
	}
}

const (
	extHandle  = `{"resultType":"task","taskId":"t-1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttlMs":60000,"pollIntervalMs":5000}`
	extWorking = `"result":{"resultType":"complete","taskId":"t-1","status":"working","ttlMs":60000,"pollIntervalMs":5000}`
)

// TestTaskExtensionFollowedToItsResult: a dispatch answered with a tasks-extension
// handle is followed with tasks/get at the task's pollIntervalMs, under the host's
// protocol _meta, until the task completes; its result (isError true: tool_error) is
// posted, and nothing more is sent (no tasks/cancel for a task that ended).
func TestTaskExtensionFollowedToItsResult(t *testing.T) {
	done := `"result":{"resultType":"complete","taskId":"t-1","status":"completed","pollIntervalMs":5000,"result":{"content":[{"type":"text","text":"boom"}],"isError":true}}`
	res, up, took := runTask(t, `{"dispatchId":"d","tool":"slow","arguments":{"a":1},"timeoutMs":60000}`, extTask(extHandle, extWorking, extWorking, done), nil)
	if res.Get("outcome").String() != "tool_error" || res.Get("result").Raw != `{"content":[{"type":"text","text":"boom"}],"isError":true}` {
		t.Fatalf("posted %s", res.Raw)
	}
	if got := strings.Join(up.methods(), ","); got != "tools/call,tasks/get,tasks/get,tasks/get" {
		t.Fatalf("the server got %s", got)
	}
	for i, c := range up.calls[1:] {
		if want := `{"taskId":"t-1","_meta":` + hostMeta + `}`; c.params != want {
			t.Errorf("tasks/get params %s, want %s", c.params, want)
		}
		if gap := c.at.Sub(up.calls[i].at); gap != 5*time.Second {
			t.Errorf("tasks/get %d came %v after the request before it, want the task's 5s", i+1, gap)
		}
	}
	if took != 15*time.Second || res.Get("durationMs").Float() != 15000 {
		t.Errorf("posted after %v with durationMs %v, want 15 s", took, res.Get("durationMs"))
	}
}

// TestTaskExtensionEnds: a failed task posts its JSON-RPC error (rpc_error), a
// cancelled one cancelled; input_required is waited out like working.
func TestTaskExtensionEnds(t *testing.T) {
	for _, c := range []struct {
		name, get, outcome, member, want string
	}{
		{"failed", `"result":{"resultType":"complete","taskId":"t-1","status":"failed","error":{"code":-32603,"message":"disk full"}}`, "rpc_error", "error", `{"code":-32603,"message":"disk full"}`},
		{"cancelled", `"result":{"resultType":"complete","taskId":"t-1","status":"cancelled"}`, "cancelled", "error.message", "the server cancelled the task"},
		{"completed", `"result":{"resultType":"complete","status":"completed","result":{"content":[]}}`, "ok", "result", `{"content":[]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			asks := `"result":{"resultType":"complete","taskId":"t-1","status":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{}}}}`
			res, up, _ := runTask(t, `{"dispatchId":"d","tool":"slow","arguments":{}}`, extTask(extHandle, asks, c.get), nil)
			got := res.Get(c.member)
			if c.member == "error.message" {
				got = gjson.Parse(`"` + got.String() + `"`)
			}
			if res.Get("outcome").String() != c.outcome || (got.Raw != c.want && got.String() != c.want) {
				t.Fatalf("posted %s, want %s with %s %s", res.Raw, c.outcome, c.member, c.want)
			}
			if got := strings.Join(up.methods(), ","); got != "tools/call,tasks/get,tasks/get" {
				t.Fatalf("the server got %s", got)
			}
		})
	}
}

// TestTaskTimeoutCancelsTheTask: a task still working when the dispatch's timeoutMs
// passes gets tasks/cancel (whose answer is waited for at most 2 s, and here never
// comes) and the dispatch is posted timeout, at its deadline plus that wait; no
// tasks/get follows the cancel.
func TestTaskTimeoutCancelsTheTask(t *testing.T) {
	script := func(method string, params []byte, n int) string {
		if method == "tasks/cancel" {
			return "" // never answered
		}
		return extTask(`{"resultType":"task","taskId":"t-1","status":"working","pollIntervalMs":1000}`, extWorking)(method, params, n)
	}
	res, up, took := runTask(t, `{"dispatchId":"d","tool":"slow","arguments":{},"timeoutMs":3500}`, script, nil)
	if res.Get("outcome").String() != "timeout" || !strings.Contains(res.Get("error.message").String(), `"t-1" did not end within 3500 ms (last status "working")`) {
		t.Fatalf("posted %s", res.Raw)
	}
	// pollIntervalMs 5000 from the first tasks/get on: polls at 1 s and 6 s; the
	// deadline at 3.5 s cuts the wait.
	if got := strings.Join(up.methods(), ","); got != "tools/call,tasks/get,tasks/cancel" {
		t.Fatalf("the server got %s", got)
	}
	if c := up.calls[2]; c.params != `{"taskId":"t-1","_meta":`+hostMeta+`}` || c.at.Sub(up.calls[0].at) != 3500*time.Millisecond {
		t.Errorf("tasks/cancel %s at %v", c.params, c.at.Sub(up.calls[0].at))
	}
	if took != 3500*time.Millisecond+taskCancelWait {
		t.Errorf("posted after %v, want the deadline and the cancel's wait", took)
	}
}

// TestTaskTimeoutDuringPoll: the deadline passing while a tasks/get is unanswered
// ends it the same way: tasks/cancel, timeout.
func TestTaskTimeoutDuringPoll(t *testing.T) {
	script := func(method string, params []byte, n int) string {
		if method == "tasks/get" {
			return ""
		}
		return extTask(extHandle)(method, params, n)
	}
	res, up, _ := runTask(t, `{"dispatchId":"d","tool":"slow","arguments":{},"timeoutMs":7000}`, script, nil)
	if res.Get("outcome").String() != "timeout" {
		t.Fatalf("posted %s", res.Raw)
	}
	if got := strings.Join(up.methods(), ","); got != "tools/call,tasks/get,tasks/cancel" {
		t.Fatalf("the server got %s", got)
	}
}

// TestTaskRecorderCancelCancelsTheTask: the recorder cancelling a dispatch that is
// following its task sends tasks/cancel and posts cancelled.
func TestTaskRecorderCancelCancelsTheTask(t *testing.T) {
	res, up, took := runTask(t, `{"dispatchId":"d","tool":"slow","arguments":{}}`, extTask(extHandle, extWorking),
		map[time.Duration]string{12 * time.Second: `{"cancel":["d"]}`})
	if res.Get("outcome").String() != "cancelled" {
		t.Fatalf("posted %s", res.Raw)
	}
	if got := strings.Join(up.methods(), ","); got != "tools/call,tasks/get,tasks/get,tasks/cancel" {
		t.Fatalf("the server got %s", got)
	}
	if took != 12*time.Second {
		t.Errorf("posted after %v", took)
	}
}

// utilTask scripts a 2025-11-25 server: a handle {"task":{...}}, tasks/get answering
// gets[n] in turn, tasks/result answering result.
func utilTask(interval string, result string, gets ...string) func(string, []byte, int) string {
	return func(method string, _ []byte, n int) string {
		switch method {
		case "tools/call":
			return `"result":{"task":{"taskId":"u-1","status":"working","createdAt":"2025-11-25T10:30:00Z","ttl":60000` + interval + `}}`
		case "tasks/get":
			return `"result":{"taskId":"u-1","status":"` + gets[min(n, len(gets)-1)] + `","ttl":60000` + interval + `}`
		case "tasks/result":
			return result
		case "tasks/cancel":
			return `"result":{"taskId":"u-1","status":"cancelled"}`
		}
		return `"error":{"code":-32601,"message":"Method not found"}`
	}
}

// TestTaskUtilityFollowedToItsResult: a 2025-11-25 handle is followed with tasks/get
// at its pollInterval, then tasks/result, whose answer is posted as a tools/call's.
func TestTaskUtilityFollowedToItsResult(t *testing.T) {
	for _, c := range []struct {
		name, interval, result, outcome, methods string
		gets                                     []string
		gap                                      time.Duration
	}{
		{"completed", `,"pollInterval":250`, `"result":{"content":[{"type":"text","text":"done"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"u-1"}}}`, "ok", "tools/call,tasks/get,tasks/get,tasks/result", []string{"working", "completed"}, 250 * time.Millisecond},
		{"failed", ``, `"error":{"code":-32603,"message":"no"}`, "rpc_error", "tools/call,tasks/get,tasks/get,tasks/get,tasks/result", []string{"working", "input_required", "failed"}, time.Second},
		{"cancelled", `,"pollInterval":0`, ``, "cancelled", "tools/call,tasks/get", []string{"cancelled"}, 100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, up, _ := runTask(t, `{"dispatchId":"d","tool":"slow","arguments":{}}`, utilTask(c.interval, c.result, c.gets...), nil)
			if res.Get("outcome").String() != c.outcome {
				t.Fatalf("posted %s, want %s", res.Raw, c.outcome)
			}
			if c.outcome == "ok" && res.Get("result.content.0.text").String() != "done" {
				t.Fatalf("posted %s", res.Raw)
			}
			if got := strings.Join(up.methods(), ","); got != c.methods {
				t.Fatalf("the server got %s, want %s", got, c.methods)
			}
			if gap := up.calls[1].at.Sub(up.calls[0].at); gap != c.gap {
				t.Errorf("first tasks/get after %v, want %v", gap, c.gap)
			}
			for _, call := range up.calls[1:] {
				if call.params != `{"taskId":"u-1","_meta":`+hostMeta+`}` {
					t.Errorf("%s params %s", call.method, call.params)
				}
			}
		})
	}
}

// TestTaskPollIntervalClamped: the task's interval is kept within 100 ms – 5 s, and
// one that is not a number (or absent) is 1 s.
func TestTaskPollIntervalClamped(t *testing.T) {
	for raw, want := range map[string]time.Duration{
		`,"pollIntervalMs":0`:      minTaskPoll,
		`,"pollIntervalMs":-7`:     minTaskPoll,
		`,"pollIntervalMs":1e12`:   maxTaskPoll,
		`,"pollIntervalMs":1e400`:  maxTaskPoll,
		`,"pollIntervalMs":250.5`:  250500 * time.Microsecond,
		`,"pollIntervalMs":"5000"`: defaultTaskPoll,
		`,"pollIntervalMs":null`:   defaultTaskPoll,
		`,"pollInterval":50`:       defaultTaskPoll, // the other era's name
		``:                         defaultTaskPoll,
	} {
		handle := `{"resultType":"task","taskId":"t-1","status":"working"` + raw + `}`
		done := `"result":{"resultType":"complete","taskId":"t-1","status":"completed","result":{"content":[]}}`
		res, up, _ := runTask(t, `{"dispatchId":"d","tool":"slow","arguments":{}}`, extTask(handle, done), nil)
		if res.Get("outcome").String() != "ok" || len(up.calls) != 2 {
			t.Fatalf("%s: posted %s after %v", raw, res.Raw, up.methods())
		}
		if gap := up.calls[1].at.Sub(up.calls[0].at); gap != want {
			t.Errorf("handle %s: first tasks/get after %v, want %v", handle, gap, want)
		}
	}
}

// TestTaskAnswersNotFollowed: a tasks/get answer that cannot be followed ends the
// dispatch rpc_error (its own error when it is a JSON-RPC error) and the task, which
// may be running still, gets tasks/cancel. A handle without a taskId is rpc_error at
// once: there is nothing to poll or cancel.
func TestTaskAnswersNotFollowed(t *testing.T) {
	for _, c := range []struct {
		name, get, want string
	}{
		{"error", `"error":{"code":-32602,"message":"Unknown task"}`, `"Unknown task"`},
		{"not an object", `"result":"working"`, "is not a JSON object"},
		{"no status", `"result":{"resultType":"complete","taskId":"t-1"}`, "has no status string"},
		{"status not a string", `"result":{"taskId":"t-1","status":3}`, "has no status string"},
		{"another task", `"result":{"taskId":"t-2","status":"working"}`, "another task"},
		{"taskId not a string", `"result":{"taskId":1,"status":"working"}`, "another task"},
		{"completed without result", `"result":{"taskId":"t-1","status":"completed"}`, "completed without a result"},
		{"failed without error", `"result":{"taskId":"t-1","status":"failed","error":"x"}`, "failed without an error"},
		{"neither result nor error", `"x":1`, "neither result nor error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, up, _ := runTask(t, `{"dispatchId":"d","tool":"slow","arguments":{}}`, extTask(extHandle, c.get), nil)
			if res.Get("outcome").String() != "rpc_error" || !strings.Contains(res.Get("error").Raw, c.want) {
				t.Fatalf("posted %s, want rpc_error saying %s", res.Raw, c.want)
			}
			if got := strings.Join(up.methods(), ","); got != "tools/call,tasks/get,tasks/cancel" {
				t.Fatalf("the server got %s", got)
			}
		})
	}
	res, up, _ := runTask(t, `{"dispatchId":"d","tool":"slow","arguments":{}}`, extTask(`{"resultType":"task","status":"working"}`), nil)
	if res.Get("outcome").String() != "rpc_error" || !strings.Contains(res.Get("error.message").String(), "no taskId") || len(up.calls) != 1 {
		t.Fatalf("a handle without taskId: posted %s after %v", res.Raw, up.methods())
	}
}

// TestTaskUnknownStatusKeepsPolling: a status this proxy does not know is taken for
// one not ended yet (a later revision may add some), until a known end.
func TestTaskUnknownStatusKeepsPolling(t *testing.T) {
	queued := `"result":{"resultType":"complete","taskId":"t-1","status":"queued","pollIntervalMs":100}`
	done := `"result":{"resultType":"complete","taskId":"t-1","status":"completed","result":{"content":[]}}`
	res, up, _ := runTask(t, `{"dispatchId":"d","tool":"slow","arguments":{}}`, extTask(extHandle, queued, queued, done), nil)
	if res.Get("outcome").String() != "ok" || len(up.calls) != 4 {
		t.Fatalf("posted %s after %v", res.Raw, up.methods())
	}
}

// TestTaskServerLostWhileFollowing: the server going away while its task is followed
// is upstream_lost, and nothing more is sent to it.
func TestTaskServerLostWhileFollowing(t *testing.T) {
	script := func(method string, params []byte, n int) string {
		if method == "tasks/get" && n == 1 {
			return "lost"
		}
		return extTask(extHandle, extWorking)(method, params, n)
	}
	res, up, _ := runTask(t, `{"dispatchId":"d","tool":"slow","arguments":{}}`, script, nil)
	if res.Get("outcome").String() != "upstream_lost" {
		t.Fatalf("posted %s", res.Raw)
	}
	if got := strings.Join(up.methods(), ","); got != "tools/call,tasks/get,tasks/get" {
		t.Fatalf("the server got %s", got)
	}
}

// TestTaskHandleShapes: what is taken for a task handle, and what is a tool's result.
func TestTaskHandleShapes(t *testing.T) {
	for _, c := range []struct {
		result string
		era    int // 0: not a handle
		bad    bool
	}{
		{`{"resultType":"task","taskId":"a","status":"working"}`, taskExt, false},
		{`{"resultType":"task","taskId":"a"}`, taskExt, false},
		{`{"resultType":"task","taskId":""}`, taskExt, true},
		{`{"resultType":"task","taskId":7}`, taskExt, true},
		{`{"resultType":"task","taskId":"a","status":1}`, taskExt, true},
		{`{"task":{"taskId":"a","status":"working","pollInterval":10}}`, taskUtil, false},
		{`{"task":{"taskId":"a","status":"working"},"content":[]}`, 0, false},
		{`{"task":{"status":"working"}}`, 0, false},
		{`{"task":"a"}`, 0, false},
		{`{"content":[{"type":"text","text":"resultType task"}]}`, 0, false},
		{`{"resultType":"complete","content":[]}`, 0, false},
	} {
		tk, ok, bad := taskHandle([]byte(c.result))
		switch {
		case ok != (c.era != 0):
			t.Errorf("%s: handle %v", c.result, ok)
		case ok && tk.Era != c.era:
			t.Errorf("%s: era %d, want %d", c.result, tk.Era, c.era)
		case (bad != "") != c.bad:
			t.Errorf("%s: bad %q", c.result, bad)
		}
	}
}

// FuzzTaskAnswer: a server's task handle and tasks/get answers are read without a
// panic whatever they hold, and whatever is kept of them is valid JSON of its kind.
func FuzzTaskAnswer(f *testing.F) {
	f.Add([]byte(extHandle), []byte(`{"resultType":"complete","taskId":"t-1","status":"completed","result":{"content":[]}}`))
	f.Add([]byte(`{"task":{"taskId":"u\u0000","status":"working","pollInterval":1e999}}`), []byte(`{"taskId":"u\u0000","status":"failed"}`))
	f.Add([]byte(`{"resultType":"task","taskId":"a","pollIntervalMs":-1e-400}`), []byte(`{"status":"completed","result":{"a":[[[[[`+strings.Repeat("[", 1<<20)))
	f.Fuzz(func(t *testing.T, handle, get []byte) {
		tk, ok, bad := taskHandle(handle)
		if !ok || bad != "" {
			return
		}
		if p := taskParams(&tk, []byte(hostMeta)); !relayable(p) {
			t.Fatalf("task params %q", p)
		}
		if tk.Poll < minTaskPoll || tk.Poll > maxTaskPoll {
			t.Fatalf("poll %v", tk.Poll)
		}
		if tk.Read(get, true) == "" {
			if tk.Poll < minTaskPoll || tk.Poll > maxTaskPoll {
				t.Fatalf("poll %v", tk.Poll)
			}
			if tk.Era == taskExt && tk.Status == taskCompleted && (len(tk.Result) == 0 || tk.Result[0] != '{') {
				t.Fatalf("result %q", tk.Result)
			}
		}
	})
}

// relayable is relay.Call's own test of a request's bytes: one JSON object, one line.
func relayable(params []byte) bool {
	return len(params) > 0 && params[0] == '{' && !strings.ContainsAny(string(params), "\r\n") && gjson.ValidBytes(params)
}

// TestTasksFollowedSideBySide: 2 and 8 dispatches answered with tasks at once are
// followed side by side (at most maxInFlight of them, the rest waiting their turn),
// each to its own task's result.
func TestTasksFollowedSideBySide(t *testing.T) {
	for _, n := range []int{2, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := &taskUpstream{script: func(method string, params []byte, _ int) string {
					switch method {
					case "tools/call":
						id := gjson.GetBytes(params, "arguments.n").String()
						return `"result":{"resultType":"task","taskId":"t-` + id + `","status":"working","pollIntervalMs":300}`
					case "tasks/get":
						id := gjson.GetBytes(params, "taskId").Raw
						return `"result":{"resultType":"complete","taskId":` + id + `,"status":"completed","result":{"content":[{"type":"text","text":` + id + `}]}}`
					}
					return `"error":{"code":-32601,"message":"Method not found"}`
				}}
				rec := &taskRecorder{polls: make(chan []byte, 1), results: make(chan []byte, n)}
				gate := NewGate(nil)
				host(gate, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":`+hostMeta+`}}`)
				ex := Start(Config{Recorder: rec, Upstream: up, Gate: gate, Logger: slog.New(slog.DiscardHandler)})
				defer ex.Close(context.Background())
				var ds []string
				for i := range n {
					ds = append(ds, fmt.Sprintf(`{"dispatchId":"d%d","tool":"slow","arguments":{"n":%d}}`, i, i))
				}
				start := time.Now()
				rec.polls <- []byte(`{"dispatches":[` + strings.Join(ds, ",") + `]}`)
				for range n {
					r := gjson.ParseBytes(<-rec.results)
					want := "t-" + strings.TrimPrefix(r.Get("dispatchId").String(), "d")
					if r.Get("outcome").String() != "ok" || r.Get("result.content.0.text").String() != want {
						t.Errorf("posted %s, want ok with %s", r.Raw, want)
					}
				}
				// Four at a time, 300 ms each.
				if took, want := time.Since(start), time.Duration((n+maxInFlight-1)/maxInFlight)*300*time.Millisecond; took != want {
					t.Errorf("%d tasks ended after %v, want %v", n, took, want)
				}
			})
		})
	}
}
