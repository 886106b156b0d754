package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// otlpJSONCollector is an OTLP/HTTP collector on 127.0.0.1 that takes every export
// (answering {}) and keeps the bodies posted to path; exported is a copy of them.
func otlpJSONCollector(t *testing.T, path string) (collector *httptest.Server, exported func() []string) {
	t.Helper()
	var mu sync.Mutex
	var bodies []string
	collector = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if r.URL.Path == path {
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`)) //nolint:errcheck // the proxy's business
	}))
	t.Cleanup(collector.Close)
	return collector, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bodies...)
	}
}

// TestOTelSpansCarryTheHTTPSessionID: over Streamable HTTP each span says the
// session the server named (mcp.session.id), from the Mcp-Session-Id of its
// initialize answer; the stdio transport has none.
func TestOTelSpansCarryTheHTTPSessionID(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	got := make(chan struct{}, 16)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if r.URL.Path == "/v1/traces" {
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
			got <- struct{}{}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`)) //nolint:errcheck // the proxy's business
	}))
	t.Cleanup(collector.Close)
	const sid = "sess-7f3a"
	srv := startRawServer(t, func(r *rawReq, w *bufio.Writer, done <-chan struct{}) {
		switch {
		case r.Method == "GET" || r.Method == "DELETE":
			writeResp(w, "405 Method Not Allowed", nil, "")
		case rpcMethod(r.Body) == "initialize":
			writeResp(w, "200 OK", []string{"Content-Type: application/json", "Mcp-Session-Id: " + sid},
				`{"jsonrpc":"2.0","id":`+rpcID(r.Body)+`,"result":`+rawInitResult+`}`)
		case rpcID(r.Body) == "":
			writeResp(w, "202 Accepted", nil, "")
		default:
			writeResp(w, "200 OK", []string{"Content-Type: application/json"},
				`{"jsonrpc":"2.0","id":`+rpcID(r.Body)+`,"result":{"content":[{"type":"text","text":"ok"}]}}`)
		}
	})
	s := startProxy(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
		"--server", "sess", "--url", srv.URL+"/mcp", "--transport", "http")
	s.Send(remoteInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if ans := s.recv(); !gjson.Get(ans, "result").Exists() {
		t.Fatalf("initialize: %s", ans)
	}
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if ans := s.recv(); gjson.Get(ans, "id").Int() != 1 {
		t.Fatalf("tools/call: %s", ans)
	}
	s.end() // the exit flushes what is queued
	testutil.Recv(t, got, "an export of spans")
	mu.Lock()
	all := strings.Join(bodies, "\n")
	mu.Unlock()
	if !strings.Contains(all, `"tools/call echo"`) {
		t.Fatalf("no tools/call span was exported:\n%.2000s", all)
	}
	if !strings.Contains(all, `"mcp.session.id"`) || !strings.Contains(all, `"`+sid+`"`) {
		t.Fatalf("no span carries mcp.session.id %s:\n%.2000s", sid, all)
	}
}

// TestOTelStopIsBoundedWithServerRequestsLeftUnanswered: a server sends 40,000
// roots/list the host never answers, with tracing on. Each one's span looked for its
// parent through every open span, the server's own among them, and the exit waited
// for bookkeeping to get through them all: the proxy exited 13-51 s after the host
// closed stdin or sent SIGTERM (0.02 s untraced). Its stop must keep the proxy's
// bound: bookkeeping's spans get at most a second at exit (intercept's SpanDrain),
// the collector another (otlpFlush).
func TestOTelStopIsBoundedWithServerRequestsLeftUnanswered(t *testing.T) {
	eachStop(t, func(t *testing.T, sig bool) {
		collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20)) //nolint:errcheck // a sink
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{}`)) //nolint:errcheck // the proxy's business
		}))
		t.Cleanup(collector.Close)
		raw := testutil.Build(t, "./testdata/rawserver")
		const n = 40_000
		var b strings.Builder
		for i := range n {
			b.WriteString(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"roots/list"}` + "\n")
		}
		emit := filepath.Join(t.TempDir(), "roots")
		if err := os.WriteFile(emit, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		s := startProxy(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
			"--", raw, "--emit", emit, "--reply")
		for i := range n {
			if m := s.recv(); !strings.Contains(m, `"roots/list"`) {
				t.Fatalf("message %d to the host: %.200s", i, m)
			}
		}
		endSession(t, s, sig, 2*time.Second)
	})
}

// TestOTelStreamedCallWithALongMetaKeepsItsParent: a tools/call long enough to be
// streamed to the server (its arguments past 64 KiB) whose _meta is past 16 KiB
// carried its traceparent to the server, but its span started a trace of its own:
// only 16 KiB of _meta were kept for it. The same _meta on a call read whole made
// the host's span its parent. Both spans are the host's span's children now.
func TestOTelStreamedCallWithALongMetaKeepsItsParent(t *testing.T) {
	collector, exported := otlpJSONCollector(t, "/v1/traces")
	raw := testutil.Build(t, "./testdata/rawserver")
	const traceID, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	meta := `{"pad":"` + strings.Repeat("m", 20<<10) + `","traceparent":"00-` + traceID + `-` + parent + `-01","tracestate":"k=v"}`
	s := startProxy(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
		"--", raw, "--reply", "--reply-size", "10")
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"streamed","_meta":` + meta +
		`,"arguments":{"big":"` + strings.Repeat("x", 200<<10) + `"}}}`)
	s.recv()
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whole","_meta":` + meta + `,"arguments":{}}}`)
	s.recv()
	s.end() // the exit flushes the spans
	bodies := exported()
	all := strings.Join(bodies, "\n")
	for _, tool := range []string{"streamed", "whole"} {
		var span gjson.Result
		for _, b := range bodies {
			gjson.Get(b, "resourceSpans.#.scopeSpans.#.spans|@flatten|@flatten").ForEach(func(_, sp gjson.Result) bool {
				if sp.Get("name").String() == "tools/call "+tool {
					span = sp
				}
				return true
			})
		}
		if !span.Exists() {
			t.Fatalf("no span of the %s call:\n%.3000s", tool, all)
		}
		if span.Get("traceId").String() != traceID || span.Get("parentSpanId").String() != parent || span.Get("traceState").String() != "k=v" {
			t.Errorf("the %s call's span is not the host's span's child: trace %s, parent %s, state %q", tool,
				span.Get("traceId"), span.Get("parentSpanId"), span.Get("traceState"))
		}
	}
}

// TestOTelStreamedCallWithAHugeMetaCostsNoMemoryInProportion: what a streamed call
// keeps of its _meta's trace members for its span is bounded (1 KiB each): a 16 MB
// tracestate and as much padding in _meta take the tracing proxy no higher than the
// same call with a small _meta.
func TestOTelStreamedCallWithAHugeMetaCostsNoMemoryInProportion(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the proxy's peak RSS from /proc")
	}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20)) //nolint:errcheck // a sink
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`)) //nolint:errcheck // the proxy's business
	}))
	t.Cleanup(collector.Close)
	const size = 16 << 20
	tp := `"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`
	args := `{"content":"` + strings.Repeat("0123456789abcdef", size/16) + `"}`
	peak := func(meta string) int64 {
		cmd, in, out, done := rawProxy(t, nil, []string{"BIR_OFF=1", "OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
			[]string{"--server", "mem"}, "--reply")
		go in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fail","_meta":` + meta + `,"arguments":` + args + "}}\n")
		if got := readWithin(t, out); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"result"`) {
			t.Fatalf("host got %.200s", got)
		}
		return peakAfterReport(t, cmd, in, done, false, "")
	}
	small := peak(`{` + tp + `,"tracestate":"k=v"}`)
	huge := peak(`{"pad":"` + strings.Repeat("m", size) + `",` + tp + `,"tracestate":"` + strings.Repeat("k", size) + `"}`)
	t.Logf("peak RSS tracing a streamed call: %d MB with a small _meta, %d MB with a %d MB one", small>>20, huge>>20, 2*size>>20)
	if huge-small > 8<<20 {
		t.Errorf("a %d MB _meta took the proxy to %d MB, %d MB over the small one's", 2*size>>20, huge>>20, (huge-small)>>20)
	}
}

// TestOTelResultSizeMetrics: the size in bytes of each tools/call result and each
// tools/list page, as the server sent them, are histograms (mcp.client.tool.result.size,
// mcp.client.tools.list.size, unit By) next to the operation's duration, exported
// at exit to a collector on 127.0.0.1 (issue 38).
func TestOTelResultSizeMetrics(t *testing.T) {
	collector, exported := otlpJSONCollector(t, "/v1/metrics")
	raw := testutil.Build(t, "./testdata/rawserver")
	const page = `{"tools":[{"name":"echo","description":"Echoes","inputSchema":{"type":"object"}}]}`
	pages := filepath.Join(t.TempDir(), "pages.json")
	if err := os.WriteFile(pages, []byte(`[`+page+`]`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startProxy(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
		"--", raw, "--reply", "--reply-size", "5000", "--tools-pages", pages)
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	if ans := s.recv(); gjson.Get(ans, "result").Raw != page {
		t.Fatalf("tools/list: %s", ans)
	}
	var results int
	for id := 2; id <= 3; id++ {
		s.Send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
		results += len(gjson.Get(s.recv(), "result").Raw) // byte for byte what the server sent
	}
	s.end() // the exit exports the metrics
	bodies := exported()
	got := map[string]string{}
	for _, b := range bodies {
		gjson.Get(b, "resourceMetrics.#.scopeMetrics.#.metrics|@flatten|@flatten").ForEach(func(_, m gjson.Result) bool {
			if name := m.Get("name").String(); strings.HasSuffix(name, ".size") {
				for _, p := range m.Get("histogram.dataPoints").Array() {
					got[name] = m.Get("unit").String() + " " + p.Get("count").String() + " " + p.Get("sum").String()
				}
			}
			return true
		})
	}
	want := map[string]string{
		"mcp.client.tool.result.size": "By 2 " + strconv.Itoa(results),
		"mcp.client.tools.list.size":  "By 1 " + strconv.Itoa(len(page)),
	}
	if results < 10000 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("size metrics %v, want %v:\n%.3000s", got, want, strings.Join(bodies, "\n"))
	}
}
