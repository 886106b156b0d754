package intercept

import (
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/report"
)

type countSink struct{ n atomic.Int64 }

func (c *countSink) Submit(report.Step)         { c.n.Add(1) }
func (c *countSink) Learned(report.ServerFacts) {}

// BenchmarkReport is bookkeeping's share of one small call: the key removed on the
// host's path, then (off it) pairing, fingerprint, redaction and the report built.
func BenchmarkReport(b *testing.B) {
	sink := &countSink{}
	ic := New(Options{Sink: sink})
	const window = 1024
	calls := make([][]byte, 1024)
	answers := make([][]byte, len(calls))
	for i := range calls {
		id := strconv.Itoa(i)
		calls[i] = []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world","_bir_call_id":"c-` + id + `"}}}`)
		answers[i] = []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"hello, world"}]}}`)
	}
	b.ReportAllocs()
	b.ResetTimer()
	now := time.Now()
	for i := range b.N {
		k := i % len(calls)
		ic.FromHost(calls[k], now)
		ic.Forwarded(now)
		ic.FromUpstream(answers[k], now)
		// At most a window of calls ahead of bookkeeping, as a host with calls in
		// flight is: a queue growing without bound would measure its growth.
		for int64(i)-sink.n.Load() > window {
			runtime.Gosched()
		}
	}
	ic.Close()
	if int(sink.n.Load()) != b.N {
		b.Fatalf("%d reports for %d calls", sink.n.Load(), b.N)
	}
}

// TestFromHostAllocations: with nothing recording, the key strip of a call allocates
// nothing, lexed by the relay or not (an interceptor wrapping this one, replay.Gate,
// passes no lex on).
func TestFromHostAllocations(t *testing.T) {
	ic := New(Options{})
	call := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","_bir_call_id":"c-7"}}}`)
	buf := make([]byte, len(call))
	now := time.Now()
	ic.FromHost(append(buf[:0], call...), now) // the Line's first arrays
	if n := testing.AllocsPerRun(100, func() {
		out := ic.FromHost(append(buf[:0], call...), now)
		if len(out) >= len(call) {
			t.Fatal("the key was not removed")
		}
	}); n != 0 {
		t.Fatalf("FromHost allocated %v times per call", n)
	}
}

// BenchmarkBookkeeping is bookkeeping's own work for one small call, run in line on
// the benchmark's goroutine (no queue, no wake-up): pairing, the fingerprint,
// redaction of the arguments and result, the report built and submitted. It is what
// a profile of the proxy's bookkeeping goroutine shows, without the scheduler.
// "lexed" has the messages' members from the relay's lex, as the proxy does; "read"
// has bookkeeping read each message itself (an upstream that does not lex, a batch).
func BenchmarkBookkeeping(b *testing.B) {
	for _, lexed := range []bool{true, false} {
		b.Run(map[bool]string{true: "lexed", false: "read"}[lexed], func(b *testing.B) { benchBookkeeping(b, lexed) })
	}
}

func benchBookkeeping(b *testing.B, lexed bool) {
	sink := &countSink{}
	var interested atomic.Int64
	var parked atomic.Bool
	tr := newTracker(sink, DefaultReportCap, &interested, slog.New(slog.DiscardHandler))
	tr.later = func() {}
	tr.parked = &parked
	hosts, answers := benchCalls(true, lexed)
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := i % len(hosts)
		h, a := hosts[k], answers[k]
		h.at, a.at = now, now
		tr.handle(h)
		tr.handle(event{kind: evSent, at: now})
		tr.handle(a)
	}
	b.StopTimer()
	if int(sink.n.Load()) != b.N {
		b.Fatalf("%d reports for %d calls", sink.n.Load(), b.N)
	}
}

// benchCalls are the events of 1,024 small calls as bookkeeping gets them: the
// request with its key removed (ids: the removed values kept, as when recording) and
// the answer the bench's server (rawserver --reply) gives, the arguments it got as a
// JSON string; lexed: with where their members lie, as the pumps' lex says.
func benchCalls(ids, lexed bool) (hosts, answers []event) {
	hosts = make([]event, 1024)
	answers = make([]event, len(hosts))
	var lx jsonlex.Line
	for i := range hosts {
		id := strconv.Itoa(i)
		call := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world","_bir_call_id":"c-` + id + `"}}}`)
		answer := []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"{\"text\":\"hello, world\"}"}],"isError":false}}`)
		// The key is removed once, on the host's path; bookkeeping sees what is left.
		lx.Lex(call)
		out, sc := stripLexed(call, DefaultCorrelationKey, &lx, ids)
		hosts[i] = event{kind: evHost, msg: out, scan: sc}
		if lexed {
			hosts[i].top = spansOf(&lx.Objs[0])
		}
		answers[i] = event{kind: evUpstream, msg: answer}
		if lexed {
			lx.LexValid(answer)
			answers[i].top = spansOf(&lx.Objs[0])
		}
	}
	return hosts, answers
}
