package mock

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

func call(seq int64, tool, args, result string) *cassette.Call {
	c := &cassette.Call{Seq: seq, Tool: tool, Outcome: "ok", Result: json.RawMessage(result), DurationMs: 30}
	if args != "" {
		c.Arguments = json.RawMessage(args)
	}
	return c
}

func sessionHeader() *cassette.Header {
	return &cassette.Header{Version: 1, Server: "s", Era: cassette.EraSession,
		Initialize:       json.RawMessage(`{"protocolVersion":"2025-06-18"}`),
		InitializeResult: json.RawMessage(`{"protocolVersion":"2025-06-18", "capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}`),
		Tools:            json.RawMessage(`[{"name":"echo", "inputSchema":{"type":"object"}},{"name":"lookup","inputSchema":{}}]`)}
}

// ask is the mock's answer to one request line, waited for.
func ask(t *testing.T, m *Mock, line string) string {
	t.Helper()
	f, ok := jsonlex.TopFields([]byte(line))
	if !ok {
		t.Fatalf("not a message: %s", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return string(m.Take([]byte(line), f).Wait(ctx))
}

func toolsCall(id, tool, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

// TestHandshakeAndListAreTheRecordedBytes: the answers carry the recorded results byte
// for byte (spacing, key order), with the request's raw id.
func TestHandshakeAndListAreTheRecordedBytes(t *testing.T) {
	h := sessionHeader()
	m := New([]*cassette.Header{h}, nil, Options{})
	got := ask(t, m, `{"jsonrpc":"2.0","id":"a\u0062","method":"initialize","params":{}}`)
	if want := `{"jsonrpc":"2.0","id":"a\u0062","result":` + string(h.InitializeResult) + `}`; got != want {
		t.Errorf("initialize:\n got %s\nwant %s", got, want)
	}
	if got := ask(t, m, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); got != `{"jsonrpc":"2.0","id":7,"result":{"tools":`+string(h.Tools)+`}}` {
		t.Errorf("tools/list: %s", got)
	}
	if got := ask(t, m, `{"jsonrpc":"2.0","id":8,"method":"ping"}`); got != `{"jsonrpc":"2.0","id":8,"result":{}}` {
		t.Errorf("ping: %s", got)
	}
	if got := ask(t, m, `{"jsonrpc":"2.0","id":9,"method":"resources/list"}`); !strings.Contains(got, `"code":-32601`) {
		t.Errorf("resources/list: %s", got)
	}
	if got := ask(t, m, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); got != "" {
		t.Errorf("a notification was answered: %s", got)
	}
}

// TestStatelessDiscover: the recorded server/discover; tools/list with what a
// 2026-07-28 result must carry (the SDK client refuses one without), and the
// server's _meta as server/discover carried it.
func TestStatelessDiscover(t *testing.T) {
	h := &cassette.Header{Version: 1, Era: cassette.EraStateless, Tools: json.RawMessage(`[{"name":"a"}]`),
		DiscoverResult: json.RawMessage(`{"supportedVersions":["2026-07-28"] ,"_meta":{"s":1}}`)}
	m := New([]*cassette.Header{h}, nil, Options{})
	if got := ask(t, m, `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`); got != `{"jsonrpc":"2.0","id":1,"result":`+string(h.DiscoverResult)+`}` {
		t.Errorf("server/discover: %s", got)
	}
	if got := ask(t, m, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); got != `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a"}],"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{"s":1}}}` {
		t.Errorf("tools/list: %s", got)
	}
}

// TestRepeatsInRecordedOrderThenTheLast: identical calls get the recorded answers in
// recorded order, then the last one again.
func TestRepeatsInRecordedOrderThenTheLast(t *testing.T) {
	m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{
		call(1, "lookup", `{"k":1}`, `{"n":"first"}`),
		call(2, "echo", `{"k":1}`, `{"n":"echo"}`),
		call(3, "lookup", `{"k":1}`, `{"n":"second"}`),
		call(4, "lookup", `{"k":2}`, `{"n":"other"}`),
	}}, Options{})
	for i, want := range []string{"first", "second", "second", "second"} {
		got := ask(t, m, toolsCall("1", "lookup", `{"k":1}`))
		if !strings.Contains(got, `"n":"`+want+`"`) {
			t.Errorf("call %d: %s, want %s", i, got, want)
		}
	}
	if got := ask(t, m, toolsCall("1", "lookup", `{"k":2}`)); !strings.Contains(got, `"other"`) {
		t.Errorf("k 2: %s", got)
	}
}

// TestFingerprintMatchesSpellings: arguments match by their canonical form: key order,
// spacing, number spellings, escapes; a duplicated key counts by its last value.
func TestFingerprintMatchesSpellings(t *testing.T) {
	m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{
		call(1, "echo", `{"a":1,"b":"x","c":[1.0,2]}`, `{"ok":1}`),
		call(2, "echo", `{"d":2}`, `{"ok":2}`),
	}}, Options{})
	for _, args := range []string{`{"c":[1,2e0], "b":"\u0078","a":10e-1}`, `{"a":5,"a":1,"b":"x","c":[1,2]}`} {
		if got := ask(t, m, toolsCall("3", "echo", args)); got != `{"jsonrpc":"2.0","id":3,"result":{"ok":1}}` {
			t.Errorf("%s: %s", args, got)
		}
	}
	if got := ask(t, m, toolsCall("3", "echo", `{"d":1,"d":2}`)); !strings.Contains(got, `{"ok":2}`) {
		t.Errorf("duplicate d, last 2: %s", got)
	}
	if got := ask(t, m, toolsCall("3", "echo", `{"d":2,"d":1}`)); !strings.Contains(got, `"error"`) {
		t.Errorf("duplicate d, last 1 matched: %s", got)
	}
}

// TestAbsentArgumentsMatchEmpty: no arguments, null and {} are one fingerprint.
func TestAbsentArgumentsMatchEmpty(t *testing.T) {
	m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{call(1, "echo", "", `{"ok":1}`)}}, Options{})
	for _, line := range []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, toolsCall("1", "echo", `{}`), toolsCall("1", "echo", `null`)} {
		if got := ask(t, m, line); !strings.Contains(got, `"ok":1`) {
			t.Errorf("%s: %s", line, got)
		}
	}
}

// TestUnmatchedNamesTheNearest: an unmatched call's error names the nearest recorded
// calls: of its tool, the most alike arguments first; of an unknown tool, the nearest
// names.
func TestUnmatchedNamesTheNearest(t *testing.T) {
	m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{
		call(1, "lookup", `{"k":"a","page":1}`, `{}`),
		call(2, "lookup", `{"k":"b","page":2}`, `{}`),
		call(3, "echo", `{"text":"hi"}`, `{}`),
	}}, Options{})
	got := ask(t, m, toolsCall("5", "lookup", `{"k":"b","page":3}`))
	var resp struct {
		ID    int
		Error struct {
			Code    int
			Message string
			Data    struct {
				Tool    string
				Nearest []struct {
					Tool string
					Seq  int
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(got), &resp); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if resp.ID != 5 || resp.Error.Code != CodeUnmatched || len(resp.Error.Data.Nearest) != 2 || resp.Error.Data.Nearest[0].Seq != 2 {
		t.Errorf("want seq 2 nearest first: %s", got)
	}
	if !strings.Contains(resp.Error.Message, `{"k":"b","page":2}`) {
		t.Errorf("the message does not quote the nearest: %s", resp.Error.Message)
	}
	m = New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{
		call(1, "login", `{"user":"ann","password":"hunter2"}`, `{}`),
		call(2, "lookup", `{}`, `{}`),
	}}, Options{})
	if got := ask(t, m, toolsCall("5", "login", `{"user":"bob"}`)); strings.Contains(got, "hunter2") || !strings.Contains(got, `"user":"ann"`) {
		t.Errorf("the nearest call's arguments, shown unredacted: %s", got)
	}
	got = ask(t, m, toolsCall("6", "lookp", `{}`))
	if err := json.Unmarshal([]byte(got), &resp); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if len(resp.Error.Data.Nearest) == 0 || resp.Error.Data.Nearest[0].Tool != "lookup" {
		t.Errorf("want lookup nearest: %s", got)
	}
}

// TestNoAnswerRecorded: a recorded call the host gave up on gets no answer, as
// recorded; one whose server was lost gets an error; a recorded error is answered.
func TestNoAnswerRecorded(t *testing.T) {
	c := &cassette.Call{Seq: 1, Tool: "echo", Outcome: "upstream_lost"}
	e := &cassette.Call{Seq: 2, Tool: "lookup", Outcome: "rpc_error", Error: json.RawMessage(`{"code":-32000, "message":"no"}`)}
	for i, out := range []string{"cancelled", "timeout"} {
		gone := &cassette.Call{Seq: int64(3 + i), Tool: out, Outcome: out}
		m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{gone}}, Options{})
		if got := ask(t, m, toolsCall("1", out, `{}`)); got != "" {
			t.Errorf("%s: answered %s", out, got)
		}
	}
	m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{c, e}}, Options{})
	if got := ask(t, m, toolsCall("1", "echo", `{}`)); !strings.Contains(got, "upstream_lost") || !strings.Contains(got, `"code":-32603`) {
		t.Errorf("upstream_lost: %s", got)
	}
	if got := ask(t, m, toolsCall("1", "lookup", `{}`)); got != `{"jsonrpc":"2.0","id":1,"error":{"code":-32000, "message":"no"}}` {
		t.Errorf("rpc error: %s", got)
	}
}

// TestRecordedLatency: with Latency, an answer waits its recorded duration; Serve
// keeps answering meanwhile.
func TestRecordedLatency(t *testing.T) {
	slow := call(1, "slow", `{}`, `{"s":1}`)
	slow.DurationMs = 300
	m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{slow}}, Options{Latency: true})
	in := strings.NewReader(toolsCall("1", "slow", `{}`) + "\n" + `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n")
	var out bytes.Buffer
	start := time.Now()
	if err := m.Serve(context.Background(), in, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if time.Since(start) < 300*time.Millisecond || len(lines) != 2 || !strings.Contains(lines[0], `"id":2`) {
		t.Errorf("after %v: %q", time.Since(start), lines)
	}
}

type fakeLive struct{ calls []string }

func (f *fakeLive) Call(_ context.Context, tool string, args []byte) ([]byte, []byte, error) {
	f.calls = append(f.calls, tool+" "+string(args))
	return []byte(`{"live":true}`), nil, nil
}

// TestFallbackRecords: an unmatched call goes to the fallback, and is recorded.
func TestFallbackRecords(t *testing.T) {
	live := &fakeLive{}
	var rec []cassette.Recorded
	m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{call(1, "echo", `{}`, `{"r":1}`)}},
		Options{Fallback: live, Record: func(r cassette.Recorded) { rec = append(rec, r) }})
	if got := ask(t, m, toolsCall("1", "echo", `{}`)); !strings.Contains(got, `"r":1`) {
		t.Errorf("recorded: %s", got)
	}
	if got := ask(t, m, toolsCall(`"x"`, "echo", `{"n":2}`)); got != `{"jsonrpc":"2.0","id":"x","result":{"live":true}}` {
		t.Errorf("live: %s", got)
	}
	if len(live.calls) != 1 || live.calls[0] != `echo {"n":2}` || len(rec) != 1 || string(rec[0].Result) != `{"live":true}` {
		t.Errorf("live %q, recorded %v", live.calls, rec)
	}
}

// TestRepeatsInFlight: 2 and 8 identical calls in flight with recorded latency each
// get the recorded answer of their place in the order they were read, whatever the
// order the answers are written in.
func TestRepeatsInFlight(t *testing.T) {
	for _, n := range []int{2, 8} {
		var calls []*cassette.Call
		for i := range n {
			c := call(int64(i+1), "slow", `{}`, `{"n":`+strconv.Itoa(i)+`}`)
			c.DurationMs = float64(50 * ((n - i) % 3))
			calls = append(calls, c)
		}
		m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{calls}, Options{Latency: true})
		var in strings.Builder
		for i := range n {
			in.WriteString(toolsCall(strconv.Itoa(i), "slow", `{}`) + "\n")
		}
		var out bytes.Buffer
		if err := m.Serve(context.Background(), strings.NewReader(in.String()), &out); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != n {
			t.Fatalf("%d in flight: %d answers", n, len(lines))
		}
		for _, l := range lines {
			var r struct {
				ID     int
				Result struct{ N int }
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil || r.ID != r.Result.N {
				t.Errorf("%d in flight: %s", n, l)
			}
		}
	}
}

// TestCancelledCallIsNotWaitedFor: a call the host cancels (as hosts do at their own
// timeout) is no longer waited for: its answer is not written, and it frees its
// place. 1024 cancelled calls recorded as slow kept every place taken, and the mock
// read nothing more, a ping included, for the rest of the recorded durations.
func TestCancelledCallIsNotWaitedFor(t *testing.T) {
	slow := call(1, "slow", `{}`, `{"s":1}`)
	slow.DurationMs = 1e12
	m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{slow}}, Options{Latency: true})
	var in strings.Builder
	for i := range maxWaiting + 10 {
		in.WriteString(toolsCall(strconv.Itoa(i), "slow", `{}`) + "\n")
		in.WriteString(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + strconv.Itoa(i) + `}}` + "\n")
	}
	in.WriteString(`{"jsonrpc":"2.0","id":"last","method":"ping"}` + "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := m.Serve(ctx, strings.NewReader(in.String()), &out); err != nil {
		t.Fatalf("Serve: %v; wrote %q", err, out.String())
	}
	if got := out.String(); got != `{"jsonrpc":"2.0","id":"last","result":{}}`+"\n" {
		t.Errorf("wrote %q, want the ping's answer alone", got)
	}
}

// TestRecordedLatencyIsBounded: a recorded duration is waited at most MaxLatency; one
// past float64's conversion to a Duration (1e300 ms) is too, on every platform.
func TestRecordedLatencyIsBounded(t *testing.T) {
	for _, ms := range []float64{1e12, 1e300} {
		slow := call(1, "slow", `{}`, `{"s":1}`)
		slow.DurationMs = ms
		m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{slow}}, Options{Latency: true})
		line := toolsCall("1", "slow", `{}`)
		f, _ := jsonlex.TopFields([]byte(line))
		if a := m.Take([]byte(line), f); a.delay != MaxLatency {
			t.Errorf("%g ms: waited %v, want %v", ms, a.delay, MaxLatency)
		}
	}
}
