package mcpspans

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/telemetry"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// spanCollector is an OTLP/HTTP receiver on 127.0.0.1 that decodes with the official
// generated types.
type spanCollector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	res   map[string]string
}

func newSpanCollector(t *testing.T) (*spanCollector, string) {
	c := &spanCollector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var td tracepb.TracesData
		if err := proto.Unmarshal(b, &td); err != nil {
			t.Errorf("decoding an export: %v", err)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, rs := range td.ResourceSpans {
			c.res = attrs(rs.Resource.Attributes)
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		if iv, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
			m[kv.Key] = "#" + string(rune('0'+iv.IntValue%10))
			continue
		}
		m[kv.Key] = kv.Value.GetStringValue()
	}
	return m
}

func (c *spanCollector) byName(t *testing.T, name string) (*tracepb.Span, map[string]string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.spans {
		if s.Name == name {
			return s, attrs(s.Attributes)
		}
	}
	t.Fatalf("no span %q among %d", name, len(c.spans))
	return nil, nil
}

func TestSpansByTheConventions(t *testing.T) {
	c, url := newSpanCollector(t)
	x := telemetry.New(telemetry.Options{Config: telemetry.Config{TracesURL: url + "/v1/traces", Protocol: telemetry.ProtoProtobuf},
		Version: "9.9", Server: "echo", BatchDelay: time.Hour})
	ic := intercept.New(intercept.Options{Observer: New(Tracing{Exporter: x, Transport: "pipe", Capture: true})})
	now := time.Now()
	host := func(msg string) {
		out := ic.FromHost([]byte(msg), now)
		if string(out) != msg {
			t.Fatalf("forwarded %s, want the host's bytes", out)
		}
		ic.Forwarded(now.Add(time.Millisecond))
	}
	up := func(msg string) { ic.FromUpstream([]byte(msg), now.Add(5*time.Millisecond)) }

	host(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`)
	up(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"srv","version":"1.2"}}}`)
	host(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","token":"sk-secret"},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"rojo=1"}}}`)
	// The server asks the host something while the call runs: its own span, in the call's trace.
	up(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`)
	host(`{"jsonrpc":"2.0","id":"s1","result":{"content":{}}}`)
	up(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}],"isError":true}}`)
	host(`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"greet"}}`)
	up(`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"no such prompt"}}`)
	host(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a"}}`)
	up(`{"jsonrpc":"2.0","id":3,"result":{"contents":[]}}`)
	ic.FromProxy([]byte(`{"jsonrpc":"2.0","id":"bir:p:1","method":"tools/call","params":{"name":"echo","arguments":{}}}`), relay.Own{Origin: "dsp-1"}, now)
	ic.ToProxy([]byte(`{"jsonrpc":"2.0","id":"bir:p:1","result":{"content":[]}}`), now.Add(time.Millisecond))
	host(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}}}`)
	up(`{"jsonrpc":"2.0","id":4,"result":{"content":[]}}`)
	ic.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if st := x.Close(ctx); st.Exported != 6 || st.Dropped != 0 {
		t.Fatalf("%+v", st)
	}

	init, a := c.byName(t, "initialize")
	if init.Kind != tracepb.Span_SPAN_KIND_CLIENT || a["mcp.method.name"] != "initialize" || a["jsonrpc.request.id"] != "0" ||
		a["mcp.protocol.version"] != "2025-06-18" || a["network.transport"] != "pipe" || len(init.ParentSpanId) != 0 {
		t.Errorf("initialize: %v %v", init, a)
	}
	call, a := c.byName(t, "tools/call echo")
	if hex.EncodeToString(call.TraceId) != "4bf92f3577b34da6a3ce929d0e0e4736" || hex.EncodeToString(call.ParentSpanId) != "00f067aa0ba902b7" || call.TraceState != "rojo=1" {
		t.Errorf("the host's trace context is not the call's: %x %x %q", call.TraceId, call.ParentSpanId, call.TraceState)
	}
	if a["gen_ai.operation.name"] != "execute_tool" || a["gen_ai.tool.name"] != "echo" || a["error.type"] != "tool_error" ||
		call.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || call.StartTimeUnixNano != uint64(now.Add(time.Millisecond).UnixNano()) ||
		call.EndTimeUnixNano != uint64(now.Add(5*time.Millisecond).UnixNano()) {
		t.Errorf("tools/call: %v %v", call, a)
	}
	if args := a["gen_ai.tool.call.arguments"]; args == "" || strings.Contains(args, "sk-secret") || !strings.Contains(args, "hi") {
		t.Errorf("captured arguments are not the redacted form: %q", args)
	}
	if a["gen_ai.tool.call.result"] == "" {
		t.Error("no captured result")
	}
	smp, a := c.byName(t, "sampling/createMessage")
	if smp.Kind != tracepb.Span_SPAN_KIND_SERVER || string(smp.TraceId) != string(call.TraceId) || string(smp.ParentSpanId) != string(call.SpanId) || a["jsonrpc.request.id"] != "s1" {
		t.Errorf("sampling: %v", smp)
	}
	pg, a := c.byName(t, "prompts/get greet")
	if a["gen_ai.prompt.name"] != "greet" || a["error.type"] != "-32602" || a["rpc.response.status_code"] != "-32602" || pg.Status.GetMessage() != "no such prompt" {
		t.Errorf("prompts/get: %v %v", pg, a)
	}
	if _, a := c.byName(t, "resources/read"); a["mcp.resource.uri"] != "file:///a" || a["error.type"] != "" {
		t.Errorf("resources/read: %v", a)
	}
	c.mu.Lock()
	var dispatched map[string]string
	for _, s := range c.spans {
		if m := attrs(s.Attributes); m["bir.dispatch.id"] != "" {
			dispatched = m
		}
	}
	res := c.res
	n := len(c.spans)
	c.mu.Unlock()
	if dispatched["bir.dispatch.id"] != "dsp-1" || dispatched["gen_ai.tool.name"] != "echo" {
		t.Errorf("dispatch: %v", dispatched)
	}
	if res["service.name"] != "bir-proxy/echo" || res["service.version"] != "9.9" || res["bir.server.name"] != "srv" || res["bir.server.version"] != "1.2" {
		t.Errorf("resource: %v", res)
	}
	if n != 6 {
		t.Errorf("%d spans: the unsampled call makes none, the notification none", n)
	}
}

// FuzzSpanHook feeds the span side of bookkeeping messages from either peer: nothing
// a peer sends may panic it or grow it past its caps.
func FuzzSpanHook(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=b"}}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}`,
		`[{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"p"}},{"id":2,"result":{"isError":true}}]`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"id":0,"result":{"protocolVersion":"x","serverInfo":{"name":"n","version":"v"}}}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	x := telemetry.New(telemetry.Options{Config: telemetry.Config{Protocol: telemetry.ProtoProtobuf}})
	f.Cleanup(func() { x.Close(context.Background()) })
	h := New(Tracing{Exporter: x, Capture: true})
	f.Fuzz(func(t *testing.T, msg []byte, kind uint8) {
		now := time.Now()
		switch kind % 6 {
		case 0:
			h.Line(&intercept.Line{From: intercept.FromHost, Raw: msg, At: now})
		case 1:
			h.Sent(now)
		case 2:
			h.Line(&intercept.Line{From: intercept.FromServer, Raw: msg, At: now})
		case 3:
			h.Lost(&intercept.Lost{At: now})
		case 4:
			h.Line(&intercept.Line{From: intercept.FromProxy, Raw: msg, At: now, Origin: "d"})
		case 5:
			h.Line(&intercept.Line{From: intercept.ToProxy, Raw: msg, At: now})
		}
		if h.open.len() > maxOpenSpans {
			t.Fatal("past the cap")
		}
	})
}

func TestIsToolError(t *testing.T) {
	for in, want := range map[string]bool{
		`{"content":[]}`:                                          false,
		`{"content":[],"isError":false}`:                          false,
		`{"content":[],"isError":true}`:                           true,
		`{"isError" :  true ,"content":[]}`:                       true,
		`{"content":[{"type":"x","data":{"isError":true}}]}`:      false,
		`{"content":[{"data":{"isError":true}}],"isError":false}`: false,
		`{"isError":false,"isError":true}`:                        true,
		`{"content":[{"text":"\"isError\":true"}]}`:               false,
		// Keys spelt with escapes are the host's isError all the same (JSON.parse
		// decodes them).
		`{"content":[],"is\u0045rror":true}`:        true,
		`{"content":[],"\u0069\u0073Error" : true}`: true,
		`{"content":[],"is\u0045rror":false}`:       false,
		`{"content":[{"is\u0045rror":true}]}`:       false,
		`{"is\u0045rror":true,"isError":false}`:     false,
		`{"isError":true,"is\u0045rror":false}`:     false,
		`{"is\u0045rrors":true}`:                    false,
		// The last member read backwards: a false there settles it.
		`{"isError":true, "isError" :	 false }`:          false,
		`{"isError":true,"xisError":false}`:              true,
		`{"isError":true,"x":"\",\"isError\":false"}`:    true,
		`{"content":[{"isError":false}]}`:                false,
		`{"content":[{"isError":true}],"isError":false}`: false,
		`[1]`: false,
		``:    false,
	} {
		if got := isToolError([]byte(in)); got != want {
			t.Errorf("%s: %v, want %v", in, got, want)
		}
	}
}

// FuzzIsToolError: the quick look agrees with reading the result, for every result,
// keys spelt with escapes or not.
func FuzzIsToolError(f *testing.F) {
	f.Add([]byte(`{"content":[],"isError":true}`))
	f.Add([]byte(`{"content":[{"data":{"isError":true}}],"isError":false}`))
	f.Add([]byte(`{"content":[],"is\u0045rror":true}`))
	f.Add([]byte(`{"content":[],"is\u0045rror" :true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if want := intercept.ReadToolResult(b).IsError; isToolError(b) != want {
			t.Fatalf("%s: %v, want %v", b, !want, want)
		}
	})
}

// tracingOnly is an Interceptor tracing with nothing recording, its exporter sending
// to a collector on 127.0.0.1.
func tracingOnly(t *testing.T) (*spanCollector, *telemetry.Exporter, *intercept.Interceptor) {
	c, url := newSpanCollector(t)
	x := telemetry.New(telemetry.Options{Config: telemetry.Config{TracesURL: url + "/v1/traces", Protocol: telemetry.ProtoProtobuf},
		Version: "1", Server: "s", BatchDelay: time.Hour})
	return c, x, intercept.New(intercept.Options{Observer: New(Tracing{Exporter: x, Transport: "pipe"})})
}

// closeTracing closes ic and then x, which has a second to send what it holds.
func closeTracing(ic *intercept.Interceptor, x *telemetry.Exporter) telemetry.Stats {
	ic.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return x.Close(ctx)
}

// A host's _meta and a server's isError spelt with escapes are what the host's
// JSON.parse reads them as: the call joins the host's trace, and ends as a tool error.
func TestEscapedKeys(t *testing.T) {
	c, x, ic := tracingOnly(t)
	now := time.Now()
	for _, m := range [][2]string{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{},"_m\u0065ta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"content":[],"is\u0045rror":true}}`},
		// The last of two members wins, as in JSON.parse, however each is spelt.
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},"\u005fmeta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"isError":true,"is\u0045rror":false}}`},
	} {
		if out := ic.FromHost([]byte(m[0]), now); string(out) != m[0] {
			t.Fatalf("forwarded %s, want the host's bytes", out)
		}
		ic.Forwarded(now)
		ic.FromUpstream([]byte(m[1]), now)
	}
	if st := closeTracing(ic, x); st.Exported != 2 {
		t.Fatalf("%+v", st)
	}
	for name, wantErr := range map[string]string{"tools/call a": "tool_error", "tools/call b": ""} {
		sp, a := c.byName(t, name)
		if hex.EncodeToString(sp.TraceId) != "4bf92f3577b34da6a3ce929d0e0e4736" || hex.EncodeToString(sp.ParentSpanId) != "00f067aa0ba902b7" {
			t.Errorf("%s: trace %x parent %x, want the host's from the escaped _meta", name, sp.TraceId, sp.ParentSpanId)
		}
		if a["error.type"] != wantErr {
			t.Errorf("%s: error.type %q, want %q", name, a["error.type"], wantErr)
		}
	}
}

// Finished spans are reused: an answer read before its request's send time ends the
// span, and the span made next (here the server's request) must not get that send
// time as its start, nor carry anything of the span before it.
func TestSpanReuseKeepsSpansApart(t *testing.T) {
	c, x, ic := tracingOnly(t)
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ic.FromHost([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"first","arguments":{}}}`), at(0))
	ic.FromUpstream([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`), at(1))
	ic.FromUpstream([]byte(`{"jsonrpc":"2.0","id":"s1","method":"roots/list"}`), at(2))
	ic.Forwarded(at(3)) // the tools/call's send time, after its answer
	ic.FromHost([]byte(`{"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}`), at(4))
	if st := closeTracing(ic, x); st.Exported != 2 {
		t.Fatalf("%+v", st)
	}
	roots, a := c.byName(t, "roots/list")
	if roots.StartTimeUnixNano != uint64(at(2).UnixNano()) || roots.EndTimeUnixNano != uint64(at(4).UnixNano()) {
		t.Errorf("roots/list from %d to %d, want %d to %d", roots.StartTimeUnixNano, roots.EndTimeUnixNano, at(2).UnixNano(), at(4).UnixNano())
	}
	if a["gen_ai.tool.name"] != "" || a["error.type"] != "" || roots.Status.GetCode() != tracepb.Status_STATUS_CODE_UNSET || roots.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("roots/list carries the tools/call's: %v %v", roots, a)
	}
	if call, a := c.byName(t, "tools/call first"); a["error.type"] != "tool_error" || call.EndTimeUnixNano != uint64(at(1).UnixNano()) {
		t.Errorf("tools/call: %v %v", call, a)
	}
}

// metricsCollector is an exporter to a collector on 127.0.0.1 that hands each
// metrics export it takes to got (traces are taken and dropped); its interval is an
// hour, so metrics go when the test flushes or closes it.
func metricsCollector(t *testing.T) (*telemetry.Exporter, <-chan *metricspb.MetricsData) {
	t.Helper()
	got := make(chan *metricspb.MetricsData, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/metrics" {
			return
		}
		var md metricspb.MetricsData
		if err := proto.Unmarshal(b, &md); err != nil {
			t.Errorf("metrics: %v", err)
		}
		got <- &md
	}))
	t.Cleanup(srv.Close)
	x := telemetry.New(telemetry.Options{Config: telemetry.Config{TracesURL: srv.URL + "/v1/traces", MetricsURL: srv.URL + "/v1/metrics",
		Protocol: telemetry.ProtoProtobuf, MetricInterval: time.Hour}, Version: "1", Server: "s", BatchDelay: time.Hour})
	return x, got
}

// The duration metric's series, found once per (method, target) and recorded to
// directly: successes of one tool share a series, an error has its own, and a span
// begun before the protocol version was learnt is recorded with it, as its span is.
func TestOperationDurationSeries(t *testing.T) {
	x, got := metricsCollector(t)
	ic := intercept.New(intercept.Options{Observer: New(Tracing{Exporter: x, Transport: "pipe"})})
	now := time.Now()
	host := func(msg string) { ic.FromHost([]byte(msg), now); ic.Forwarded(now) }
	up := func(msg string) { ic.FromUpstream([]byte(msg), now.Add(time.Millisecond)) }
	// Before initialize's answer: one call ends, one is in flight across it.
	host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	up(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
	host(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	host(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	up(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}}`)
	up(`{"jsonrpc":"2.0","id":6,"result":{"content":[]}}`)
	for id := 2; id <= 4; id++ {
		host(`{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
		up(`{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"result":{"content":[]}}`)
	}
	host(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	up(`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"bad"}}`)
	ic.Close()
	closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	x.Close(closeCtx)
	md := testutil.Recv(t, got, "the metrics export at exit")
	counts := map[string]uint64{}
	for _, m := range md.ResourceMetrics[0].ScopeMetrics[0].Metrics {
		if m.Name != "mcp.client.operation.duration" {
			continue
		}
		for _, p := range m.GetHistogram().DataPoints {
			a := attrs(p.Attributes)
			counts[a["mcp.method.name"]+" "+a["gen_ai.tool.name"]+" "+a["mcp.protocol.version"]+" "+a["error.type"]] += p.Count
		}
	}
	want := map[string]uint64{
		"tools/call echo  ":                 1,
		"initialize  2025-06-18 ":           1,
		"tools/call echo 2025-06-18 ":       4,
		"tools/call echo 2025-06-18 -32602": 1,
	}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("series %v, want %v", counts, want)
	}
}

// jsonrpc.request.id is the id's text: a number as written, a string decoded; a
// number longer than 64 digits gets none, nor does a null id.
func TestRequestIDAttribute(t *testing.T) {
	c, x, ic := tracingOnly(t)
	long := strings.Repeat("7", 70)
	ids := map[string]string{`17`: "17", `-3`: "-3", `1.0`: "1.0", `1e2`: "1e2", `"a\u0062"`: "ab", long: "", `null`: ""}
	i := 0
	for id := range ids {
		i++
		ic.FromHost([]byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"t`+fmt.Sprint(i)+`","arguments":{}}}`), time.Now())
		ic.Forwarded(time.Now())
		ic.FromUpstream([]byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[]}}`), time.Now())
	}
	if st := closeTracing(ic, x); st.Exported != uint64(len(ids)) {
		t.Fatalf("%+v", st)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	got := map[string]bool{}
	for _, sp := range c.spans {
		a := attrs(sp.Attributes)
		v, ok := a["jsonrpc.request.id"]
		got[v] = true
		if ok && v == "" || len(v) > 64 {
			t.Errorf("%s: jsonrpc.request.id %q", sp.Name, v)
		}
	}
	for _, want := range ids {
		if want != "" && !got[want] {
			t.Errorf("no span with jsonrpc.request.id %q among %v", want, got)
		}
	}
}

// A span is ended by the answer of its id however the server spells the number
// (1e2 is 100, as jsonlex.IDKey reads it), whichever of the hook's two maps the key
// is in: a plain integer's (openSpans.ints), or any other's. A string "100" is
// another id, and a host's request and the server's of the same id are two.
func TestSpanIDKeys(t *testing.T) {
	c, x, ic := tracingOnly(t)
	now := time.Now()
	host := func(id, name string) {
		ic.FromHost([]byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+name+`","arguments":{}}}`), now)
		ic.Forwarded(now)
	}
	answer := func(id string) {
		ic.FromUpstream([]byte(`{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-1,"message":"m"}}`), now)
	}
	host(`100`, "int")
	host(`"100"`, "str")
	host(`1e3`, "exp")
	host(`1234567890123456789`, "long") // 19 digits: not in the integers' map
	host(`-7`, "neg")
	// The server's request of id 100 (its own numbering): a SERVER span of its own.
	ic.FromUpstream([]byte(`{"jsonrpc":"2.0","id":100,"method":"roots/list"}`), now)
	answer(`1e2`)
	answer(`1000`)
	answer(`1234567890123456789`)
	answer(`-7.0`)
	ic.FromHost([]byte(`{"jsonrpc":"2.0","id":100,"result":{"roots":[]}}`), now)
	closeTracing(ic, x)
	c.mu.Lock()
	defer c.mu.Unlock()
	got := map[string]string{}
	for _, sp := range c.spans {
		got[sp.Name] = attrs(sp.Attributes)["error.type"]
	}
	want := map[string]string{"tools/call int": "-1", "tools/call exp": "-1", "tools/call long": "-1", "tools/call neg": "-1",
		"tools/call str": "upstream_lost", "roots/list": ""}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("spans' error.type %v, want %v", got, want)
	}
}

// Tracing with nothing recording keeps a host's message only until bookkeeping has
// looked at it: the relay may carve them from shared blocks (KeepsBriefly). Recording
// keeps them longer (a call's arguments until its end), and a pure pipe is Passive.
func TestKeepsBriefly(t *testing.T) {
	_, x, ic := tracingOnly(t)
	defer closeTracing(ic, x)
	if !ic.KeepsBriefly() || ic.Passive() {
		t.Fatal("tracing only: not Brief, or Passive")
	}
	rec := intercept.New(intercept.Options{Sink: &countSink{}, Observer: New(Tracing{Exporter: x})})
	defer rec.Close()
	if rec.KeepsBriefly() {
		t.Fatal("recording and tracing: Brief")
	}
	if p := intercept.New(intercept.Options{}); p.KeepsBriefly() || !p.Passive() {
		t.Fatal("a pure pipe: Brief, or not Passive")
	}
	if c := ic.Capabilities(); !c.KeepsBriefly || c.Passive {
		t.Fatal("tracing only: its Capabilities say otherwise")
	}
}

// serverRequests are n roots/list requests of the server's.
func serverRequests(n int) []intercept.Line {
	evs := make([]intercept.Line, n)
	for i := range evs {
		evs[i] = intercept.Line{From: intercept.FromServer, Raw: []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"roots/list"}`)}
	}
	return evs
}

// TestServerRequestsLeftUnansweredCostAStepEach: the span of a server's request
// takes the trace of the one call in flight, if there is one; finding it scanned
// every open span, the server's own among them, so n requests the host never
// answered cost n²/2 steps (40,000 roots/list: the proxy exited 13-50 s after the
// host left). The server's own spans are kept out of the list the parent is looked
// for in, so the look-up is one step whatever their number (a structural check, not
// a timing: BenchmarkServerRequestsLeftUnanswered measures the cost).
func TestServerRequestsLeftUnansweredCostAStepEach(t *testing.T) {
	h, _, _ := hookAlone(t)
	now := time.Now()
	evs := serverRequests(20_000)
	for i := range evs {
		ev := evs[i]
		ev.At = now
		h.Line(&ev)
	}
	if got := h.open.len(); got != len(evs) {
		t.Fatalf("%d spans open, want the %d server requests", got, len(evs))
	}
	n := 0
	for s := h.open.calls; s != nil; s = s.next {
		n++
	}
	if n != 0 || h.open.ncalls != 0 {
		t.Errorf("the list a server request's parent is looked for in holds %d spans (ncalls %d), want none of the server's own", n, h.open.ncalls)
	}
}

// BenchmarkServerRequestsLeftUnanswered: a server request's cost per request with
// 2,500 and 20,000 of the server's own open (about the same: no scan).
func BenchmarkServerRequestsLeftUnanswered(b *testing.B) {
	for _, n := range []int{2_500, 20_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			evs := serverRequests(n)
			for b.Loop() {
				h, _, _ := hookAlone(b)
				now := time.Now()
				for i := range evs {
					ev := evs[i]
					ev.At = now
					h.Line(&ev)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/request")
		})
	}
}

// TestServerRequestParentFromTheOneCallInFlight: a server's request joins the trace
// of the one request of the host's or the proxy's in flight, whatever the number of
// the server's own open; with none, or two, it starts a trace of its own.
func TestServerRequestParentFromTheOneCallInFlight(t *testing.T) {
	h, _, _ := hookAlone(t)
	now := time.Now()
	lex := func(from intercept.From, msg string) *intercept.Line {
		return &intercept.Line{From: from, Raw: []byte(msg), At: now}
	}
	server := func(id string) telemetry.Span {
		t.Helper()
		h.Line(lex(intercept.FromServer, `{"jsonrpc":"2.0","id":`+id+`,"method":"roots/list"}`))
		s, ok := h.open.take("s", h.key([]byte(id)))
		if !ok {
			t.Fatalf("no span for the server's request %s", id)
		}
		return s.sp
	}
	for i := range 100 {
		h.Line(lex(intercept.FromServer, `{"jsonrpc":"2.0","id":"k`+strconv.Itoa(i)+`","method":"roots/list"}`))
	}
	h.Line(lex(intercept.FromHost, `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}`))
	a, _ := h.open.find(0, "h"+string(h.key([]byte(`"a"`))))
	if got := server("1"); got.TraceID != a.sp.TraceID || got.Parent != a.sp.SpanID {
		t.Fatalf("with one call in flight, a server's request is not its child")
	}
	h.Line(lex(intercept.FromHost, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"y"}}`))
	if got := server("2"); got.TraceID == a.sp.TraceID || got.Parent != ([8]byte{}) {
		t.Fatalf("with two calls in flight, a server's request took one's trace")
	}
	h.Line(lex(intercept.FromServer, `{"jsonrpc":"2.0","id":"a","result":{}}`)) // a ends: 7 is the one
	seven, _ := h.open.find(func() uint64 { k, _ := intKey("h", []byte("7")); return k }(), "")
	if got := server("3"); got.TraceID != seven.sp.TraceID || got.Parent != seven.sp.SpanID {
		t.Fatalf("after one of two ended, a server's request is not the other's child")
	}
	h.Line(lex(intercept.FromServer, `{"jsonrpc":"2.0","id":7,"result":{}}`))
	if got := server("4"); got.Parent != ([8]byte{}) {
		t.Fatalf("with no call in flight, a server's request has a parent")
	}
	if h.open.ncalls != 0 || h.open.calls != nil {
		t.Fatalf("the index holds %d calls after all ended", h.open.ncalls)
	}
}

// TestCloseBoundsTheSpansLeft: at Close, bookkeeping ends every span still open
// (upstream_lost). However long that takes (here each span's end waits 10 ms, as a
// slow mcp.session.id would make it: 2,000 spans, 20 s), Close returns within
// Tracing.Drain and the span at hand; the spans left are counted as dropped, and
// said once. Close used to wait for all of them: 40,000 unanswered roots/list kept
// the proxy 13-51 s past the host's exit.
func TestCloseBoundsTheSpansLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testutil.SyncBuffer
		logger := slog.New(slog.NewTextHandler(&logs, nil))
		// A collector in memory: a socket's wait is no wait the bubble's clock follows.
		client := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			io.Copy(io.Discard, r.Body) //nolint:errcheck // a sink
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-protobuf"}},
				Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
		})}
		x := telemetry.New(telemetry.Options{Config: telemetry.Config{TracesURL: "http://collector.invalid/v1/traces", Protocol: telemetry.ProtoProtobuf},
			Version: "1", Server: "s", BatchDelay: time.Hour, Logger: slog.New(slog.DiscardHandler), Client: client})
		const drain = 500 * time.Millisecond
		slow := func() string { time.Sleep(10 * time.Millisecond); return "" }
		ic := intercept.New(intercept.Options{Logger: logger, Observer: New(Tracing{Logger: logger, Exporter: x, Transport: "pipe", SessionID: slow, Drain: drain})})
		now := time.Now()
		const n = 2000
		for i := range n {
			ic.FromUpstream([]byte(`{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"roots/list"}`), now)
		}
		began := time.Now()
		ic.Close()
		took := time.Since(began)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st := x.Close(ctx)
		// In the bubble's fake time: the drain and the span at hand, not the
		// 2,000 × 10 ms the spans would take.
		if took > drain+20*time.Millisecond {
			t.Errorf("Close took %v, bound %v", took, drain)
		}
		if st.Dropped == 0 || st.Exported+st.Dropped != n {
			t.Errorf("exported %d, dropped %d, want %d in all", st.Exported, st.Dropped, n)
		}
		if got := strings.Count(logs.String(), "did not finish its spans"); got != 1 {
			t.Errorf("the drop said %d times, want once:\n%s", got, logs.String())
		}
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestLostSparingCostsAStepACall: a server replaced with n host calls in flight, the
// upstream holding back m of them for the next one (UpstreamLostSparing), ends the
// others. Each call's key was looked for through the m spared, in the tracker and
// in the span hook: n·m steps. With 16,000 in flight, sparing half of them must cost
// about what sparing one does (the same maps, the same caches), not thousands of
// steps a call more. (The tracker's share: intercept's test of the same name.)
func TestLostSparingCostsAStepACall(t *testing.T) {
	const n = 16_000
	var hosts []intercept.Line
	var half []string
	for i := range n {
		id := strconv.Itoa(i)
		msg := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
		hosts = append(hosts, intercept.Line{From: intercept.FromHost, Raw: msg})
		if i%2 == 1 {
			half = append(half, id) // a plain integer's jsonlex.IDKey is its text
		}
	}
	lost := func(spared []string) time.Duration {
		best := time.Duration(1 << 62)
		for range 3 {
			h, _, _ := hookAlone(t)
			now := time.Now()
			for _, ev := range hosts {
				ev.At = now
				h.Line(&ev)
			}
			began := time.Now()
			h.Lost(&intercept.Lost{At: now, Spared: spared})
			best = min(best, time.Since(began))
			if left := h.open.len(); left != len(spared) {
				t.Fatalf("%d calls left, want the %d spared", left, len(spared))
			}
		}
		return best
	}
	one, many := lost(half[:1]), lost(half)
	t.Logf("%d calls lost in %v sparing one, in %v sparing %d", n, one, many, len(half))
	// The same work or less (the spared are not ended), give or take a loaded
	// machine's noise (2x seen); the scan made it 150x.
	if many > 10*one {
		t.Errorf("sparing %d of %d calls took %v, %.1fx sparing one (%v)", len(half), n, many, float64(many)/float64(one), one)
	}
}

// fakeResult is a relay.StreamedResult as the relay's digest would give it.
type fakeResult struct {
	input, isErr bool
	err          json.RawMessage
	rep          string
}

func (f fakeResult) Holds() int64           { return 0 }
func (f fakeResult) ResultBytes() int64     { return int64(len(f.rep)) }
func (f fakeResult) Kind() (bool, bool)     { return f.input, f.isErr }
func (f fakeResult) Error() json.RawMessage { return f.err }
func (f fakeResult) Report(int) (json.RawMessage, bool) {
	if f.rep == "" {
		return nil, false
	}
	return json.RawMessage(f.rep), true
}

// TestStreamedAnswersEndSpans: an answer that streamed to the host, told with what
// its result was reduced to (intercept.Line.Result), ends its span by it: the error,
// the tool error, the captured result.
func TestStreamedAnswersEndSpans(t *testing.T) {
	c, url := newSpanCollector(t)
	x := telemetry.New(telemetry.Options{Config: telemetry.Config{TracesURL: url + "/v1/traces", Protocol: telemetry.ProtoProtobuf},
		Version: "1", Server: "s", BatchDelay: time.Hour})
	ic := intercept.New(intercept.Options{Sink: &countSink{}, Observer: New(Tracing{Exporter: x, Transport: "pipe", Capture: true})})
	results := map[string]fakeResult{
		"a": {isErr: true, rep: `"reduced a"`},
		"b": {err: json.RawMessage(`{"code":-32000,"message":"boom"}`)},
		"c": {input: true, rep: `{"resultType":"input_required"}`},
		"d": {rep: `"reduced d"`},
	}
	now := time.Now()
	for i, name := range []string{"a", "b", "c", "d"} {
		id := string(rune('1' + i))
		ic.FromHost([]byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+name+`","arguments":{}}}`), now)
		ic.Forwarded(now)
		ic.FromUpstreamStreamed([]byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{}}`), results[name], now)
	}
	if st := closeTracing(ic, x); st.Exported != 4 {
		t.Fatalf("%+v", st)
	}
	want := map[string][2]string{ // error.type, captured result
		"a": {"tool_error", `"reduced a"`},
		"b": {"-32000", ""},
		"c": {"", `{"resultType":"input_required"}`},
		"d": {"", `"reduced d"`},
	}
	for name, w := range want {
		_, a := c.byName(t, "tools/call "+name)
		if a["error.type"] != w[0] {
			t.Errorf("%s: span error.type %q, want %q", name, a["error.type"], w[0])
		}
		if w[1] != "" && a["gen_ai.tool.call.result"] != w[1] {
			t.Errorf("%s: captured result %q, want %s", name, a["gen_ai.tool.call.result"], w[1])
		}
	}
}

// TestResultSizeMetrics: each tools/call result's size in bytes, as the server sent
// it, goes to mcp.client.tool.result.size (a task's at its end, its final result's;
// a streamed one's as counted), each tools/list page's to mcp.client.tools.list.size,
// with the duration's attributes; a JSON-RPC error has no result and no size.
func TestResultSizeMetrics(t *testing.T) {
	x, got := metricsCollector(t)
	ic := intercept.New(intercept.Options{Observer: New(Tracing{Exporter: x, Transport: "pipe"})})
	now := time.Now()
	host := func(msg string) { ic.FromHost([]byte(msg), now); ic.Forwarded(now) }
	up := func(msg string) { ic.FromUpstream([]byte(msg), now) }
	const small, big, list, final = `{"content":[]}`, `{"content":[{"type":"text","text":"0123456789"}]}`, `{"tools":[{"name":"echo","inputSchema":{}}]}`, `{"content":[],"isError":true}`
	host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	up(`{"jsonrpc":"2.0","id":1,"result":` + small + `}`)
	host(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	up(`{"jsonrpc":"2.0","id":2,"result":` + big + `}`)
	host(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	up(`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad"}}`)
	host(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	up(`{"jsonrpc":"2.0","id":4,"result":` + list + `}`)
	host(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	up(`{"jsonrpc":"2.0","id":5,"result":{"resultType":"task","taskId":"t1","status":"working"}}`)
	host(`{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"t1"}}`)
	up(`{"jsonrpc":"2.0","id":6,"result":{"taskId":"t1","status":"completed","result":` + final + `}}`)
	host(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"long","arguments":{}}}`)
	ic.FromUpstreamStreamed([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}`), streamedSize(1<<20), now)
	ic.Close()
	closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	x.Close(closeCtx)
	md := testutil.Recv(t, got, "the metrics export at exit")
	sums := map[string]string{}
	for _, m := range md.ResourceMetrics[0].ScopeMetrics[0].Metrics {
		if !strings.HasSuffix(m.Name, ".size") {
			continue
		}
		if m.Unit != "By" {
			t.Errorf("%s: unit %q", m.Name, m.Unit)
		}
		for _, p := range m.GetHistogram().DataPoints {
			a := attrs(p.Attributes)
			sums[m.Name+" "+a["mcp.method.name"]+" "+a["gen_ai.tool.name"]+" "+a["error.type"]] = fmt.Sprintf("%d/%.0f", p.Count, p.GetSum())
		}
	}
	want := map[string]string{
		"mcp.client.tool.result.size tools/call echo ":           fmt.Sprintf("2/%d", len(small)+len(big)),
		"mcp.client.tools.list.size tools/list  ":                fmt.Sprintf("1/%d", len(list)),
		"mcp.client.tool.result.size tools/call slow tool_error": fmt.Sprintf("1/%d", len(final)),
		"mcp.client.tool.result.size tools/call long ":           fmt.Sprintf("1/%d", 1<<20),
	}
	if fmt.Sprint(sums) != fmt.Sprint(want) {
		t.Fatalf("size series %v, want %v", sums, want)
	}
}

// streamedSize is a streamed answer's reduction that counted size bytes.
type streamedSize int64

func (s streamedSize) Holds() int64                       { return 0 }
func (s streamedSize) ResultBytes() int64                 { return int64(s) }
func (s streamedSize) Kind() (bool, bool)                 { return false, false }
func (s streamedSize) Error() json.RawMessage             { return nil }
func (s streamedSize) Report(int) (json.RawMessage, bool) { return nil, false }
