package telemetry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// collector is a fake OTLP/HTTP receiver on 127.0.0.1 that decodes what it is sent
// with the official types and answers what answer says.
type collector struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	batches []int // spans per traces request
	metrics []*metricspb.MetricsData
	headers []http.Header
	got     chan int
	answer  func(n int, w http.ResponseWriter) // n counts traces requests from 1
	reqs    atomic.Int64
	url     string
	at      []time.Time // when each traces request came (in a bubble: fake time)
}

func newCollector(t *testing.T) *collector {
	c := &collector{t: t, got: make(chan int, 1000)}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	c.url = c.srv.URL
	return c
}

// newBubbleCollector is a collector for a synctest bubble: no socket (network I/O
// is not durably blocking, so fake time would not move), it answers in process
// through the client it returns, which the exporter is given as Options.Client.
func newBubbleCollector(t *testing.T) (*collector, *http.Client) {
	c := &collector{t: t, got: make(chan int, 1000), url: "http://collector.invalid"}
	return c, &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		w := httptest.NewRecorder()
		c.serve(w, r)
		return w.Result(), nil
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	isJSON := r.Header.Get("Content-Type") == "application/json"
	unmarshal := proto.Unmarshal
	if isJSON {
		unmarshal = protojson.Unmarshal
	}
	switch r.URL.Path {
	case "/v1/metrics":
		var md metricspb.MetricsData
		if err := unmarshal(body, &md); err != nil {
			c.t.Errorf("metrics: %v", err)
		}
		c.mu.Lock()
		c.metrics = append(c.metrics, &md)
		c.mu.Unlock()
		return
	case "/v1/traces":
	default:
		c.t.Errorf("POST to %s", r.URL.Path)
		return
	}
	c.mu.Lock()
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
	n := int(c.reqs.Add(1))
	if c.answer != nil {
		c.answer(n, w)
	}
	var td tracepb.TracesData
	if err := unmarshal(body, &td); err != nil {
		c.t.Errorf("traces: %v", err)
		return
	}
	spans := len(td.ResourceSpans[0].ScopeSpans[0].Spans)
	c.mu.Lock()
	c.batches = append(c.batches, spans)
	c.headers = append(c.headers, r.Header.Clone())
	c.mu.Unlock()
	c.got <- spans
}

func (c *collector) cfg(proto string) Config {
	return Config{TracesURL: c.url + "/v1/traces", MetricsURL: c.url + "/v1/metrics", Protocol: proto,
		Headers: [][2]string{{"X-Api-Key", "k"}}, Timeout: 5 * time.Second, MetricInterval: time.Hour}
}

func span(i int) Span {
	t0 := time.Now()
	return Span{TraceID: NewTraceID(), SpanID: NewSpanID(), Name: fmt.Sprintf("tools/call t%d", i), Kind: KindClient,
		Start: t0, End: t0, Attrs: []Attr{String("mcp.method.name", "tools/call")}}
}

func closeWithin(t testing.TB, x *Exporter, d time.Duration) Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return x.Close(ctx)
}

func TestExporterBatches(t *testing.T) {
	for _, p := range []string{ProtoProtobuf, ProtoJSON} {
		t.Run(p, func(t *testing.T) {
			c := newCollector(t)
			x := New(Options{Config: c.cfg(p), Version: "1", Server: "s", BatchDelay: time.Hour})
			for i := range 1100 {
				x.Submit(span(i))
			}
			// Two full batches go without waiting for the delay or the exit.
			for range 2 {
				if n := <-c.got; n != 512 {
					t.Fatalf("a batch of %d", n)
				}
			}
			x.Record([]Attr{String("mcp.method.name", "tools/call")}, 20*time.Millisecond)
			x.SetSession([]Attr{String("network.transport", "pipe")})
			st := closeWithin(t, x, time.Second)
			if st.Exported != 1100 || st.Dropped != 0 {
				t.Fatalf("%+v", st)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.batches) != 3 || c.batches[2] != 76 {
				t.Fatalf("batches %v", c.batches)
			}
			if c.headers[0].Get("X-Api-Key") != "k" {
				t.Fatal("the configured header is not sent")
			}
			if len(c.metrics) != 1 {
				t.Fatalf("%d metrics exports at exit", len(c.metrics))
			}
			names := map[string]bool{}
			for _, m := range c.metrics[0].ResourceMetrics[0].ScopeMetrics[0].Metrics {
				names[m.Name] = true
			}
			if !names["mcp.client.operation.duration"] || !names["mcp.client.session.duration"] {
				t.Fatalf("metrics %v", names)
			}
		})
	}
}

func TestExporterSendsAPartBatchAfterTheDelay(t *testing.T) {
	c := newCollector(t)
	x := New(Options{Config: c.cfg(ProtoProtobuf), BatchDelay: 20 * time.Millisecond})
	x.Submit(span(0))
	if n := <-c.got; n != 1 {
		t.Fatal(n)
	}
	closeWithin(t, x, time.Second)
}

func TestExporterRetryAfter(t *testing.T) {
	c := newCollector(t)
	c.answer = func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}
	x := New(Options{Config: c.cfg(ProtoProtobuf), BatchDelay: 10 * time.Millisecond})
	x.Submit(span(0))
	<-c.got // the 503's
	<-c.got // the retry, a second later
	st := closeWithin(t, x, time.Second)
	if st.Exported != 1 || st.Dropped != 0 || c.reqs.Load() != 2 {
		t.Fatalf("%+v after %d requests", st, c.reqs.Load())
	}
}

func TestExporterRefusedBatchIsDroppedNotRetried(t *testing.T) {
	c := newCollector(t)
	c.answer = func(n int, w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) }
	x := New(Options{Config: c.cfg(ProtoProtobuf), BatchDelay: 10 * time.Millisecond})
	x.Submit(span(0))
	<-c.got
	st := closeWithin(t, x, time.Second)
	if st.Dropped != 1 || st.Exported != 0 || c.reqs.Load() != 1 {
		t.Fatalf("%+v after %d requests", st, c.reqs.Load())
	}
}

func TestExporterCountsRejectedSpans(t *testing.T) {
	c := newCollector(t)
	c.answer = func(n int, w http.ResponseWriter) {
		w.Write([]byte{0x0a, 0x04, 0x08, 0x02, 0x12, 0x00}) // partial_success{rejected_spans: 2}
	}
	x := New(Options{Config: c.cfg(ProtoProtobuf), BatchDelay: time.Hour})
	for i := range 3 {
		x.Submit(span(i))
	}
	st := closeWithin(t, x, time.Second)
	if st.Rejected != 2 || st.Exported != 1 {
		t.Fatalf("%+v", st)
	}
}

// A collector that is not there: Submit never waits, the queue stays bounded, every
// span is counted, and the exit is bounded.
func TestExporterCollectorDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := Config{TracesURL: "http://" + addr + "/v1/traces", Protocol: ProtoProtobuf, Timeout: time.Second}
	x := New(Options{Config: cfg, QueueSize: 100, BatchSize: 10, BatchDelay: 5 * time.Millisecond})
	for i := range 5000 {
		x.Submit(span(i))
	}
	x.mu.Lock()
	if x.queued > 100 {
		t.Errorf("queue %d past its bound", x.queued)
	}
	x.mu.Unlock()
	st := closeWithin(t, x, 200*time.Millisecond)
	if st.Exported != 0 || st.Dropped != 5000 {
		t.Fatalf("%+v", st)
	}
}

// A collector that accepts and never answers: the exit's flush gives up at its bound.
func TestExporterHangingCollector(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	cfg := Config{TracesURL: srv.URL + "/v1/traces", Protocol: ProtoProtobuf, Timeout: time.Hour}
	x := New(Options{Config: cfg, BatchDelay: 5 * time.Millisecond})
	x.Submit(span(0))
	<-arrived
	x.Submit(span(1))
	start := time.Now()
	st := closeWithin(t, x, 100*time.Millisecond)
	if st.Dropped != 2 {
		t.Fatalf("%+v", st)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v with a bound of 100ms", d)
	}
}

// A redirect off the configured origin is not followed: the API key stays home.
func TestExporterFollowsNoRedirectOffOrigin(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	c := newCollector(t)
	c.answer = func(n int, w http.ResponseWriter) {}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/traces", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/v1/real", http.StatusTemporaryRedirect)
	})
	var sameKey atomic.Value
	mux.HandleFunc("/v1/real", func(w http.ResponseWriter, r *http.Request) {
		sameKey.Store(r.Header.Get("X-Api-Key"))
		io.Copy(io.Discard, r.Body)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cfg := Config{TracesURL: srv.URL + "/v1/traces", Protocol: ProtoProtobuf, Headers: [][2]string{{"X-Api-Key", "secret"}}, Timeout: 5 * time.Second}
	x := New(Options{Config: cfg, BatchDelay: time.Hour})
	x.Submit(span(0))
	st := closeWithin(t, x, time.Second)
	if elsewhere.Load() != 0 || st.Dropped != 1 {
		t.Fatalf("followed off origin: %d requests there, %+v", elsewhere.Load(), st)
	}
	cfg.TracesURL = srv.URL + "/same"
	x = New(Options{Config: cfg, BatchDelay: time.Hour})
	x.Submit(span(0))
	st = closeWithin(t, x, time.Second)
	if sameKey.Load() != "secret" || st.Exported != 1 {
		t.Fatalf("a same-origin redirect: key %v, %+v", sameKey.Load(), st)
	}
}

// An answer that never ends is read to the cap only.
func TestExporterCapsTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		chunk := make([]byte, 32<<10)
		for range 1 << 12 { // 128 MiB unless the client stops reading
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	cfg := Config{TracesURL: srv.URL + "/v1/traces", Protocol: ProtoProtobuf, Timeout: 10 * time.Second}
	x := New(Options{Config: cfg, BatchDelay: time.Hour})
	x.Submit(span(0))
	st := closeWithin(t, x, 5*time.Second)
	if st.Exported != 1 {
		t.Fatalf("%+v", st)
	}
}

// BenchmarkSpanExport is the exporter's work for one span, as the SDK's and the
// generated types' were measured (docs/otel.md): a span of six attributes made,
// queued, encoded in a batch of 512 and POSTed to a server that discards it.
func BenchmarkSpanExport(b *testing.B) {
	for _, p := range []string{ProtoProtobuf, ProtoJSON} {
		b.Run(p, func(b *testing.B) {
			var wire atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n, _ := io.Copy(io.Discard, r.Body)
				wire.Add(n)
			}))
			defer srv.Close()
			x := New(Options{Config: Config{TracesURL: srv.URL, Protocol: p, Timeout: 10 * time.Second}, Version: "1", BatchDelay: time.Hour})
			defer closeWithin(b, x, time.Second)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				now := time.Now()
				x.Submit(Span{TraceID: NewTraceID(), SpanID: NewSpanID(), Name: "tools/call echo", Kind: KindClient, Start: now, End: now,
					Attrs: []Attr{String("mcp.method.name", "tools/call"), String("jsonrpc.request.id", "17"),
						String("mcp.protocol.version", "2025-06-18"), String("gen_ai.operation.name", "execute_tool"),
						String("gen_ai.tool.name", "echo"), String("network.transport", "pipe")}})
				if n++; n%256 == 0 {
					// What the exporter's goroutine does with a full queue, here in
					// line so that no span is dropped.
					if batch := x.take(true); batch != nil {
						x.send(batch)
						x.recycle(batch)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(wire.Load())/float64(n), "wire-B/span")
		})
	}
}

// Each signal's exports carry its own protocol and headers (the per-signal
// variables), and only those.
func TestExporterPerSignal(t *testing.T) {
	type seen struct{ path, ctype, key string }
	got := make(chan seen, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck // a test's collector
		got <- seen{r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("X-Key")}
	}))
	t.Cleanup(srv.Close)
	cfg := Config{TracesURL: srv.URL + "/v1/traces", MetricsURL: srv.URL + "/v1/metrics", Protocol: ProtoProtobuf,
		Headers: [][2]string{{"X-Key", "generic"}}, Timeout: 5 * time.Second, MetricInterval: time.Hour,
		Traces: Signal{Protocol: ProtoJSON, Headers: [][2]string{{"X-Key", "traces"}}}}
	x := New(Options{Config: cfg, Version: "1", BatchDelay: time.Hour})
	x.Submit(span(1))
	x.Record([]Attr{String("mcp.method.name", "tools/call")}, time.Millisecond)
	closeWithin(t, x, 5*time.Second)
	want := map[string]seen{
		"/v1/traces":  {"/v1/traces", "application/json", "traces"},
		"/v1/metrics": {"/v1/metrics", "application/x-protobuf", "generic"},
	}
	for range 2 {
		s := testutil.Recv(t, got, "an export")
		if want[s.path] != s {
			t.Errorf("%+v, want %+v", s, want[s.path])
		}
		delete(want, s.path)
	}
}

// A request's body in two parts reads, and writes itself, as the two one after the
// other, whichever way net/http takes it.
func TestTwoParts(t *testing.T) {
	a, b := []byte("head:"), bytes.Repeat([]byte("spans"), 1000)
	want := string(a) + string(b)
	var got []byte
	r := &twoParts{a, b}
	buf := make([]byte, 7) // reads that cross from one part to the other
	for {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
	}
	if string(got) != want {
		t.Fatalf("read %d bytes, want %d", len(got), len(want))
	}
	var w bytes.Buffer
	if n, err := (&twoParts{a, b}).WriteTo(&w); err != nil || n != int64(len(want)) || w.String() != want {
		t.Fatalf("wrote %d bytes, %v", n, err)
	}
}

// Close while a batch waits between two tries (a collector's Retry-After of 10^9 s,
// honoured up to 60 s) cuts the wait: the exit's flush sends the batch once more,
// within Close's bound, instead of the wait outlasting it and the batch being lost.
func TestExporterCloseCutsARetryWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, client := newBubbleCollector(t)
		c.answer = func(n int, w http.ResponseWriter) {
			if n == 1 {
				w.Header().Set("Retry-After", "1000000000")
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}
		x := New(Options{Config: c.cfg(ProtoProtobuf), BatchDelay: 10 * time.Millisecond, Client: client})
		defer x.Close(context.Background()) // on a failure too: the bubble must end empty
		x.Submit(span(0))
		<-c.got // the 503's; the exporter then waits 60 s to try again
		synctest.Wait()
		if !x.sleeping.Load() {
			t.Fatal("after the 503 the exporter is not waiting to try again")
		}
		time.Sleep(59 * time.Second) // the wait is still on: a minute, not 10^9 s or none
		synctest.Wait()
		if n := c.reqs.Load(); n != 1 || !x.sleeping.Load() {
			t.Fatalf("%d requests 59 s after the 503 (waiting: %v); want 1, still waiting", n, x.sleeping.Load())
		}
		began := time.Now()
		st := closeWithin(t, x, 5*time.Second)
		if st.Exported != 1 || st.Dropped != 0 || c.reqs.Load() != 2 {
			t.Fatalf("%+v after %d requests", st, c.reqs.Load())
		}
		if d := time.Since(began); d != 0 {
			t.Fatalf("Close took %v of the clock; the wait was not cut", d)
		}
	})
}

// A collector that keeps answering 503 gets each batch three times (two tries again,
// after 1 s and 2 s), then the batch is dropped and counted.
func TestExporterGivesUpAfterTwoRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, client := newBubbleCollector(t)
		c.answer = func(n int, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }
		x := New(Options{Config: c.cfg(ProtoProtobuf), BatchDelay: 10 * time.Millisecond, Client: client})
		defer x.Close(context.Background()) // on a failure too: the bubble must end empty
		x.Submit(span(0))
		for range 3 {
			<-c.got
		}
		synctest.Wait()
		st := closeWithin(t, x, time.Second)
		if st.Dropped != 1 || st.Exported != 0 || c.reqs.Load() != 3 {
			t.Fatalf("%+v after %d requests", st, c.reqs.Load())
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if gaps := []time.Duration{c.at[1].Sub(c.at[0]), c.at[2].Sub(c.at[1])}; gaps[0] != time.Second || gaps[1] != 2*time.Second {
			t.Fatalf("tried again after %v; want after 1s and 2s", gaps)
		}
	})
}
