package intercept

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/telemetry"
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

// BenchmarkSpanHook is tracing's share of one small call in bookkeeping, and the
// export of its span: the span hook run in line on the three events of a call (the
// request, its send time, the answer), spans submitted to an exporter that POSTs them
// to a server on 127.0.0.1 that discards them. Run with -cpu 1 to have the export's
// goroutine's time counted in the time per call; cpu-ns/op is the process's CPU per
// call (with the discarding server's).
func BenchmarkSpanHook(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	x := telemetry.New(telemetry.Options{Config: telemetry.Config{TracesURL: srv.URL + "/v1/traces", MetricsURL: srv.URL + "/v1/metrics",
		Protocol: telemetry.ProtoProtobuf, Timeout: 10 * time.Second, MetricInterval: time.Hour}, Version: "1", Logger: slog.New(slog.DiscardHandler)})
	h := newSpanHook(Tracing{Exporter: x, Transport: "pipe"})
	hosts, answers := benchCalls(false, true)
	now := time.Now()
	b.ReportAllocs()
	n := 0
	cpu0 := cpuTime()
	for b.Loop() {
		k := n % len(hosts)
		spanCall(h, hosts[k], answers[k], now)
		if n++; n%256 == 0 {
			// No more queued than the exporter's queue holds: a drop is cheaper than
			// an export, and would be measured instead.
			for st := x.Stats(); int(st.Exported+st.Dropped)+1536 < n; st = x.Stats() {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/op")
	st := x.Close(context.Background())
	if st.Dropped > 0 {
		b.Logf("%d of %d spans dropped", st.Dropped, n)
	}
}

// BenchmarkSpanHookAlone is the span hook's own work on a call's three events, with
// nothing exported (an exporter with no endpoint: Submit and the metric return at
// once): what BenchmarkSpanHook measures less the export.
func BenchmarkSpanHookAlone(b *testing.B) {
	h, hosts, answers := hookAlone(b)
	now := time.Now()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		k := n % len(hosts)
		spanCall(h, hosts[k], answers[k], now)
		n++
	}
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// hookAlone is a span hook whose exporter has no endpoint (Submit and the metric
// return at once), and benchCalls' events.
func hookAlone(tb testing.TB) (h *spanHook, hosts, answers []event) {
	x := telemetry.New(telemetry.Options{Config: telemetry.Config{Protocol: telemetry.ProtoProtobuf}, Logger: slog.New(slog.DiscardHandler)})
	tb.Cleanup(func() { x.Close(context.Background()) })
	hosts, answers = benchCalls(false, true)
	return newSpanHook(Tracing{Exporter: x, Transport: "pipe"}), hosts, answers
}

// spanCall has h look at one call's three events: the request, its send, the answer.
func spanCall(h *spanHook, hv, av event, now time.Time) {
	hv.at, hv.sent, av.at = now, now, now
	h.handle(&hv)
	h.handle(&event{kind: evSent, at: now})
	h.handle(&av)
}

// TestSpanHookAllocatesNothingPerCall: a call's span, from its request to its answer,
// allocates nothing in the hook: a numeric id's attribute was a string made per span
// (jsonrpc.request.id), one allocation a call at 150,000 calls a second.
func TestSpanHookAllocatesNothingPerCall(t *testing.T) {
	h, hosts, answers := hookAlone(t)
	now := time.Now()
	k := 100 // ids of three digits and more: a one-byte string is never allocated
	call := func() {
		spanCall(h, hosts[k], answers[k], now)
		k++
	}
	for range 10 {
		call() // the hook's free list and maps warmed
	}
	if n := testing.AllocsPerRun(500, call); n >= 0.5 {
		t.Fatalf("%.2f allocations a call", n)
	}
}
