package intercept

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jcs"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/report"
)

// memSink records what bookkeeping submits.
type memSink struct {
	mu      sync.Mutex
	steps   []report.Step
	facts   []report.ServerFacts
	changed chan struct{} // signalled on every Submit
}

func (m *memSink) Submit(s report.Step) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// The raw fields are bookkeeping's scratch (report.Sink): kept, they are copied.
	s.Args, s.Result, s.Error = bytes.Clone(s.Args), bytes.Clone(s.Result), bytes.Clone(s.Error)
	m.steps = append(m.steps, s)
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// wait returns the reports once there are n, without Close: bookkeeping must get to
// them by itself.
func (m *memSink) wait(t *testing.T, n int) []report.Step {
	t.Helper()
	timeout := time.After(testutil.Guard)
	for {
		m.mu.Lock()
		steps := append([]report.Step(nil), m.steps...)
		m.mu.Unlock()
		if len(steps) >= n {
			return steps
		}
		select {
		case <-m.changed:
		case <-timeout:
			t.Fatalf("%d reports, want %d: bookkeeping never got to them", len(steps), n)
		}
	}
}

func (m *memSink) Learned(f report.ServerFacts) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.facts = append(m.facts, f)
}

// session drives an Interceptor the way the relay does: host messages through
// FromHost and Forwarded, upstream messages through FromUpstream; Close drains.
type session struct {
	t    *testing.T
	ic   *Interceptor
	sink *memSink
	now  time.Time
	// lexed gives upstream messages through FromUpstreamLexed, lexed as an upstream
	// lexes them, instead of FromUpstream.
	lexed bool
	lx    jsonlex.Line
}

func newSession(t *testing.T) *session {
	return newSessionWith(t, Options{})
}

func newSessionWith(t *testing.T, o Options) *session {
	sink := &memSink{changed: make(chan struct{}, 1)}
	o.Sink = sink
	return &session{t: t, sink: sink, ic: New(o), now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
}

func (s *session) tick() time.Time {
	s.now = s.now.Add(time.Millisecond)
	return s.now
}

func (s *session) host(msg string) string {
	out := s.ic.FromHost([]byte(msg), s.tick())
	s.ic.Forwarded(s.tick())
	return string(out)
}

func (s *session) up(msg string) {
	if s.lexed {
		if !s.lx.LexValid([]byte(msg)) {
			s.t.Fatalf("the test's upstream line %s is not one an upstream passes on", msg)
		}
		s.ic.FromUpstreamLexed([]byte(msg), &s.lx, s.tick())
		return
	}
	s.ic.FromUpstream([]byte(msg), s.tick())
}

func (s *session) close() []report.Step {
	s.ic.Close()
	return s.sink.steps
}

// TestTrackerOutcomes, with answers read by bookkeeping itself and from the upstream's
// lex of them.
func TestTrackerOutcomes(t *testing.T) {
	for _, lexed := range []bool{false, true} {
		t.Run(map[bool]string{false: "read", true: "lexed"}[lexed], func(t *testing.T) { trackerOutcomes(t, lexed) })
	}
}

func trackerOutcomes(t *testing.T, lexed bool) {
	s := newSession(t)
	s.lexed = lexed
	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ok","arguments":{"_bir_call_id":"c1","a":1}}}`)
	s.host(`{"jsonrpc":"2.0","id":"1","method":"tools/call","params":{"name":"str-id","arguments":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"big-id","arguments":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":9007199254740992,"method":"tools/call","params":{"name":"big-id-neighbour","arguments":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fails","arguments":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"rpc","arguments":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"cancelled","arguments":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"more","arguments":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"lost","arguments":{}}}`)
	s.host(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"no-id","arguments":{}}}`)

	// The server's own request reusing id 1 is not an answer.
	s.up(`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}`)
	// Answers out of order; the number re-printed as 1.0 is still id 1; "1" is not 1.
	s.up(`{"jsonrpc":"2.0","id":"1","result":{"content":[{"type":"text","text":"for the string id"}]}}`)
	s.up(`{"jsonrpc":"2.0","id":1.0,"result":{"content":[{"type":"text","text":"done"}]}}`)
	s.up(`{"jsonrpc":"2.0","id":9007199254740993,"result":{"content":[]}}`)
	s.up(`[{"jsonrpc":"2.0","id":4,"result":{"isError":true,"content":[]}},{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"bad"}}]`)
	s.host(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6,"reason":"user"}}`)
	s.up(`{"jsonrpc":"2.0","id":6,"result":{"content":[]}}`) // too late: already cancelled
	s.up(`{"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required","inputRequests":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":9007199254740992,"result":{"content":[]}}`)
	s.ic.UpstreamLost(s.tick())
	steps := s.close()

	want := map[string]string{
		"ok": "ok", "str-id": "ok", "big-id": "ok", "big-id-neighbour": "ok", "fails": "tool_error", "rpc": "rpc_error",
		"cancelled": "cancelled", "more": "input_required", "lost": "upstream_lost", "no-id": "rpc_error",
	}
	if len(steps) != len(want) {
		t.Fatalf("%d reports, want %d: %+v", len(steps), len(want), steps)
	}
	for _, st := range steps {
		if st.Outcome != want[st.Tool] {
			t.Errorf("%s: outcome %s, want %s", st.Tool, st.Outcome, want[st.Tool])
		}
		if !st.StartedAt.After(st.ReceivedAt) || st.EndedAt.Before(st.StartedAt) {
			t.Errorf("%s: timestamps out of order: %v %v %v", st.Tool, st.ReceivedAt, st.StartedAt, st.EndedAt)
		}
		switch st.Tool {
		case "ok":
			if st.CallID == nil || *st.CallID != "c1" || string(st.Args) != `{"a":1}` || !strings.Contains(string(st.Result), `"done"`) {
				t.Errorf("ok call reported as %+v", st)
			}
			if fp, _ := jcs.Fingerprint([]byte(`{"a":1}`)); st.ArgsFingerprint != fp {
				t.Errorf("fingerprint %q, want %q (over the arguments without the key)", st.ArgsFingerprint, fp)
			}
		case "str-id":
			if !strings.Contains(string(st.Result), "for the string id") {
				t.Errorf(`the string id "1" was matched to the wrong answer: %s`, st.Result)
			}
		case "rpc":
			if string(st.Error) != `{"code":-32602,"message":"bad"}` {
				t.Errorf("rpc error reported as %s", st.Error)
			}
		}
	}
	if n := s.ic.interested.Load(); n != 0 {
		t.Errorf("interest count left at %d: the upstream path would queue forever", n)
	}
}

func TestTrackerFingerprintIsOverRawArguments(t *testing.T) {
	s := newSession(t)
	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"login","arguments":{"user":"bob","password":"hunter2","_bir_call_id":"c"}}}`)
	s.up(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"token ghp_16C7e42F292c6912E7710c838347Ae178B4a"}]}}`)
	steps := s.close()
	if len(steps) != 1 {
		t.Fatalf("%d reports", len(steps))
	}
	st := steps[0]
	want, _ := jcs.Fingerprint([]byte(`{"user":"bob","password":"hunter2"}`))
	if st.ArgsFingerprint != want {
		t.Errorf("fingerprint %s, want the raw arguments' %s", st.ArgsFingerprint, want)
	}
	b, _ := json.Marshal(st)
	for _, secret := range []string{"hunter2", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("report leaks %q: %s", secret, b)
		}
	}
}

func TestTrackerLearnsHandshake(t *testing.T) {
	s := newSession(t)
	s.host(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`)
	s.up(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"srv","version":"1"},"capabilities":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	s.up(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`)
	s.host(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	s.up(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"c"}]}}`)
	s.close()
	f := s.sink.facts
	if len(f) != 2 {
		t.Fatalf("learned %d times, want 2 (initialize, first tools/list): %+v", len(f), f)
	}
	last := f[1]
	if string(last.ServerInfo) != `{"name":"srv","version":"1"}` || last.ProtocolVersion != "2025-06-18" || strings.Join(last.Tools, ",") != "a,b" {
		t.Errorf("facts %+v", last)
	}
}

func TestReportUnderCap(t *testing.T) {
	s := newSession(t)
	huge := strings.Repeat("0123456789", 10<<20) // 100 MB
	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + strings.Repeat("t", 5000) + `","arguments":{"_bir_call_id":"` + strings.Repeat("c", 5000) + `","blob":"` + huge[:1<<20] + `"}}}`)
	s.up(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + huge + `"}]}}`)
	steps := s.close()
	b, err := json.Marshal(steps[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > DefaultReportCap {
		t.Fatalf("report is %d bytes, over the %d cap", len(b), DefaultReportCap)
	}
	if !steps[0].ArgsClipped || !steps[0].ResultClipped {
		t.Errorf("clipping not flagged: args %v result %v", steps[0].ArgsClipped, steps[0].ResultClipped)
	}
}

func TestOffStillStrips(t *testing.T) {
	ic := New(Options{})
	out := ic.FromHost([]byte(`{"id":1,"method":"tools/call","params":{"arguments":{"_bir_call_id":"c"}}}`), time.Now())
	ic.Forwarded(time.Now())
	ic.FromUpstream([]byte(`{"id":1,"result":{}}`), time.Now())
	ic.Close()
	if string(out) != `{"id":1,"method":"tools/call","params":{"arguments":{}}}` {
		t.Fatalf("got %s", out)
	}
}

// TestAnswerBeforeSendReturns: the upstream can answer before the write that sent the
// request has returned to the host pump; the call must still be matched.
func TestAnswerBeforeSendReturns(t *testing.T) {
	s := newSession(t)
	s.ic.FromHost([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fast","arguments":{}}}`), s.tick())
	s.up(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
	sent := s.tick()
	s.ic.Forwarded(sent)
	steps := s.close()
	if len(steps) != 1 || steps[0].Outcome != "ok" {
		t.Fatalf("reports: %+v", steps)
	}
	if !steps[0].StartedAt.Equal(sent) || steps[0].DurationMs < 0 {
		t.Fatalf("startedAt %v (want %v), duration %v", steps[0].StartedAt, sent, steps[0].DurationMs)
	}
	// The answer was read before the send time was known; the call did not end before
	// it started.
	if steps[0].EndedAt.Before(steps[0].StartedAt) {
		t.Fatalf("endedAt %v before startedAt %v", steps[0].EndedAt, steps[0].StartedAt)
	}
}

// TestCallEndsWithoutAnAnswerAreReportedSoon: a cancel or a tools/call notification
// ends a call with nothing more coming from the server; the report must not wait for
// the session to end.
func TestCallEndsWithoutAnAnswerAreReportedSoon(t *testing.T) {
	s := newSession(t)
	defer s.close()
	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	s.host(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	if st := s.sink.wait(t, 1); st[0].Outcome != "cancelled" {
		t.Fatalf("outcome %s", st[0].Outcome)
	}
	s.host(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"no-id","arguments":{}}}`)
	if st := s.sink.wait(t, 2); st[1].Tool != "no-id" {
		t.Fatalf("reports %+v", st)
	}
}

// TestInterestSettles: requests whose answers bookkeeping awaited, however they end,
// leave no interest behind (else every later upstream message is queued for nothing).
func TestInterestSettles(t *testing.T) {
	s := newSession(t)
	s.host(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	s.host(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	s.host(`{"jsonrpc":"2.0","id":2,"method":"initialize","method":"ping"}`)
	s.up(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	s.host(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	s.ic.UpstreamLost(s.tick())
	s.close()
	if n := s.ic.interested.Load(); n != 0 {
		t.Fatalf("interest left at %d", n)
	}
}

// TestShedAnswerStillEndsItsCall: over the queue's byte budget an answer loses its
// bytes but still ends its call, as the outcome it was.
func TestShedAnswerStillEndsItsCall(t *testing.T) {
	s := newSessionWith(t, Options{QueueBytes: 300})
	defer s.close()
	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b","arguments":{}}}`)
	big := strings.Repeat("x", 1000)
	s.up(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`)
	s.up(`{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"` + big + `"}}`)
	steps := s.sink.wait(t, 2)
	got := map[string]string{}
	for _, st := range steps {
		got[st.Tool] = st.Outcome
	}
	if got["a"] != "ok" || got["b"] != "rpc_error" {
		t.Fatalf("outcomes %v", got)
	}
}

// TestAnswerBeforeSendTimeIsReportedWithoutClose: bookkeeping saw the answer before
// the send time (evSent) was queued; evSent wakes nobody, so the report must not wait
// for a later event or the session's end.
func TestAnswerBeforeSendTimeIsReportedWithoutClose(t *testing.T) {
	s := newSession(t)
	defer s.close()
	s.ic.FromHost([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fast","arguments":{}}}`), s.tick())
	s.up(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
	// Let bookkeeping take both events before the send time exists.
	testutil.Eventually(t, "bookkeeping to take the call and its answer", func() bool { return s.ic.interested.Load() == 0 })
	s.ic.Forwarded(s.tick())
	if st := s.sink.wait(t, 1); st[0].Outcome != "ok" {
		t.Fatalf("outcome %s", st[0].Outcome)
	}
}
