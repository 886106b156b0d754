package mcpspans

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/telemetry"
)

type countSink struct{ n atomic.Int64 }

func (c *countSink) Submit(report.Step)         { c.n.Add(1) }
func (c *countSink) Learned(report.ServerFacts) {}

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
	h := New(Tracing{Exporter: x, Transport: "pipe"})
	hosts, answers := benchCalls()
	now := time.Now()
	b.ReportAllocs()
	n := 0
	cpu0 := cpuTime()
	for b.Loop() {
		k := n % len(hosts)
		spanCall(h, &hosts[k], &answers[k], now)
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
		spanCall(h, &hosts[k], &answers[k], now)
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

// benchCalls are the lines of 1,024 small calls as bookkeeping tells them: the
// request with its key removed and the answer the bench's server (rawserver --reply)
// gives, the arguments it got as a JSON string.
func benchCalls() (hosts, answers []intercept.Line) {
	hosts = make([]intercept.Line, 1024)
	answers = make([]intercept.Line, len(hosts))
	for i := range hosts {
		id := strconv.Itoa(i)
		call := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}`)
		answer := []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"{\"text\":\"hello, world\"}"}],"isError":false}}`)
		hosts[i] = intercept.Line{From: intercept.FromHost, Raw: call}
		answers[i] = intercept.Line{From: intercept.FromServer, Raw: answer}
	}
	return hosts, answers
}

// hookAlone is a span hook whose exporter has no endpoint (Submit and the metric
// return at once), and benchCalls' lines.
func hookAlone(tb testing.TB) (h *Spans, hosts, answers []intercept.Line) {
	x := telemetry.New(telemetry.Options{Config: telemetry.Config{Protocol: telemetry.ProtoProtobuf}, Logger: slog.New(slog.DiscardHandler)})
	tb.Cleanup(func() { x.Close(context.Background()) })
	hosts, answers = benchCalls()
	return New(Tracing{Exporter: x, Transport: "pipe"}), hosts, answers
}

// spanCall has h look at one call's three events: the request, its send, the answer.
// (Lines by pointer: intercept tells one it keeps, and a copy here would be an
// allocation of the test's.)
func spanCall(h *Spans, hv, av *intercept.Line, now time.Time) {
	hv.At, av.At = now, now
	h.Line(hv)
	h.Sent(now)
	h.Line(av)
}

// TestSpanHookAllocatesNothingPerCall: a call's span, from its request to its answer,
// allocates nothing in the hook: a numeric id's attribute was a string made per span
// (jsonrpc.request.id), one allocation a call at 150,000 calls a second.
func TestSpanHookAllocatesNothingPerCall(t *testing.T) {
	h, hosts, answers := hookAlone(t)
	now := time.Now()
	k := 100 // ids of three digits and more: a one-byte string is never allocated
	call := func() {
		spanCall(h, &hosts[k], &answers[k], now)
		k++
	}
	for range 10 {
		call() // the hook's free list and maps warmed
	}
	if n := testing.AllocsPerRun(500, call); n >= 0.5 {
		t.Fatalf("%.2f allocations a call", n)
	}
}
