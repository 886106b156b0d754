package telemetry

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The encoders are checked against the official generated OTLP types (a test-only
// dependency): TracesData and MetricsData have the wire form of the Export*Service
// requests (field 1, the resource spans or metrics) without the gRPC service code.

func sampleSpans() []Span {
	t0 := time.Unix(1700000000, 123456789)
	long := strings.Repeat("é", 20000) // a value whose length takes 3 varint bytes
	return []Span{
		{
			TraceID: [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
			SpanID:  [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, Parent: [8]byte{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
			RemoteParent: true, Flags: 1, TraceState: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
			Name: "tools/call echo", Kind: KindClient, Start: t0, End: t0.Add(1500 * time.Microsecond),
			Attrs: []Attr{String("mcp.method.name", "tools/call"), String("gen_ai.tool.name", "echo"),
				Int("server.port", 8080), Int("neg", -3), String("empty", ""), String("long", long)},
			Status: StatusError, StatusMsg: "boom \"quoted\"\n",
		},
		// A span with events (a tools/list's tool drift), some left out.
		{TraceID: NewTraceID(), SpanID: NewSpanID(), Name: "tools/list", Kind: KindClient, Start: t0, End: t0.Add(time.Millisecond),
			Events: []Event{
				{Time: t0.Add(time.Millisecond), Name: "bir.tool.drift", Attrs: []Attr{String("gen_ai.tool.name", "echo"), String("bir.tool.drift.status", "changed"), String("long", long)}},
				{Time: t0, Name: "e2"},
			},
			DroppedEvents: 300},
		{TraceID: NewTraceID(), SpanID: NewSpanID(), Name: "initialize", Kind: KindServer, Start: t0, End: t0},
		// Attributes shared with other spans (encoded once), then its own.
		{TraceID: NewTraceID(), SpanID: NewSpanID(), Name: "tools/call echo", Kind: KindClient, Start: t0, End: t0,
			Shared: NewAttrSet([]Attr{String("mcp.method.name", "tools/call"), String("gen_ai.tool.name", "echo"), Int("server.port", 8080), String("long", long)}),
			Attrs:  []Attr{String("jsonrpc.request.id", "7"), Int("neg", -3)}},
		{TraceID: NewTraceID(), SpanID: NewSpanID(), Name: "ping", Kind: KindClient, Start: t0, End: t0, Shared: NewAttrSet(nil)},
	}
}

func checkTraces(t *testing.T, td *tracepb.TracesData, in []Span, ids bool) {
	t.Helper()
	if len(td.ResourceSpans) != 1 || len(td.ResourceSpans[0].ScopeSpans) != 1 {
		t.Fatalf("shape: %v", td)
	}
	rs := td.ResourceSpans[0]
	if got := attrMap(rs.Resource.Attributes); got["service.name"] != "svc" || got["service.version"] != "1.2.3" {
		t.Fatalf("resource: %v", got)
	}
	ss := rs.ScopeSpans[0]
	if ss.Scope.Name != scopeName || ss.Scope.Version != "1.2.3" {
		t.Fatalf("scope: %v", ss.Scope)
	}
	if len(ss.Spans) != len(in) {
		t.Fatalf("%d spans, want %d", len(ss.Spans), len(in))
	}
	for i, s := range ss.Spans {
		w := in[i]
		if ids && (!bytes.Equal(s.TraceId, w.TraceID[:]) || !bytes.Equal(s.SpanId, w.SpanID[:])) {
			t.Errorf("span %d ids", i)
		}
		if ids && w.Parent != [8]byte{} && !bytes.Equal(s.ParentSpanId, w.Parent[:]) || w.Parent == [8]byte{} && len(s.ParentSpanId) != 0 {
			t.Errorf("span %d parent %x", i, s.ParentSpanId)
		}
		if s.Name != w.Name || int(s.Kind) != w.Kind || s.TraceState != w.TraceState {
			t.Errorf("span %d: %q %v %q", i, s.Name, s.Kind, s.TraceState)
		}
		if s.StartTimeUnixNano != uint64(w.Start.UnixNano()) || s.EndTimeUnixNano != uint64(w.End.UnixNano()) {
			t.Errorf("span %d times", i)
		}
		if w.Status != StatusUnset && (s.Status == nil || int(s.Status.Code) != w.Status || s.Status.Message != w.StatusMsg) {
			t.Errorf("span %d status %v", i, s.Status)
		}
		wantFlags := uint32(w.Flags) | 0x100
		if w.RemoteParent {
			wantFlags |= 0x200
		}
		if s.Flags != wantFlags {
			t.Errorf("span %d flags %x, want %x", i, s.Flags, wantFlags)
		}
		if len(s.Events) != len(w.Events) || s.DroppedEventsCount != w.DroppedEvents {
			t.Fatalf("span %d: %d events (%d dropped), want %d (%d)", i, len(s.Events), s.DroppedEventsCount, len(w.Events), w.DroppedEvents)
		}
		for j, e := range s.Events {
			we := w.Events[j]
			if e.Name != we.Name || e.TimeUnixNano != uint64(we.Time.UnixNano()) || len(e.Attributes) != len(we.Attrs) {
				t.Errorf("span %d event %d: %v", i, j, e)
				continue
			}
			for k, a := range e.Attributes {
				if a.Key != we.Attrs[k].Key || a.Value.GetStringValue() != we.Attrs[k].Str {
					t.Errorf("span %d event %d attr %q", i, j, a.Key)
				}
			}
		}
		want := append(slices.Clone(w.Shared.Attrs()), w.Attrs...)
		if len(s.Attributes) != len(want) {
			t.Fatalf("span %d: %d attributes, want %d", i, len(s.Attributes), len(want))
		}
		for j, a := range s.Attributes {
			wa := want[j]
			if a.Key != wa.Key {
				t.Errorf("attr %d key %q", j, a.Key)
			}
			if wa.IsInt {
				if iv, ok := a.Value.Value.(*commonpb.AnyValue_IntValue); !ok || iv.IntValue != wa.Int {
					t.Errorf("attr %q: %v", a.Key, a.Value)
				}
			} else if sv, ok := a.Value.Value.(*commonpb.AnyValue_StringValue); !ok || sv.StringValue != wa.Str {
				t.Errorf("attr %q: not the string", a.Key)
			}
		}
	}
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.GetStringValue()
	}
	return m
}

var testRes = []Attr{String("service.name", "svc"), String("service.version", "1.2.3")}

func TestTracesProtobufDecodesWithTheOfficialTypes(t *testing.T) {
	in := sampleSpans()
	b := appendTracesProto([]byte("prefix"), testRes, "1.2.3", in)
	var td tracepb.TracesData
	if err := proto.Unmarshal(b[len("prefix"):], &td); err != nil {
		t.Fatal(err)
	}
	checkTraces(t, &td, in, true)
	// Many spans: the outer messages' lengths take several bytes.
	many := make([]Span, 0, 512)
	for range 512 {
		many = append(many, in...)
	}
	td.Reset()
	if err := proto.Unmarshal(appendTracesProto(nil, testRes, "1.2.3", many), &td); err != nil {
		t.Fatal(err)
	}
	checkTraces(t, &td, many, true)
}

func TestTracesJSONDecodesWithTheOfficialTypes(t *testing.T) {
	in := sampleSpans()
	b := appendTracesJSON(nil, testRes, "1.2.3", in)
	var td tracepb.TracesData
	if err := protojson.Unmarshal(b, &td); err != nil {
		t.Fatal(err)
	}
	// protojson reads bytes as base64; OTLP/JSON writes the ids as hex (the
	// Collector's own decoder reads them so: the e2e test), checked here by hand.
	checkTraces(t, &td, in, false)
	var doc struct {
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []struct{ TraceID, SpanID, ParentSpanID string }
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for i, s := range doc.ResourceSpans[0].ScopeSpans[0].Spans {
		w := in[i]
		wantParent := ""
		if w.Parent != [8]byte{} {
			wantParent = hex.EncodeToString(w.Parent[:])
		}
		if s.TraceID != hex.EncodeToString(w.TraceID[:]) || s.SpanID != hex.EncodeToString(w.SpanID[:]) || s.ParentSpanID != wantParent {
			t.Errorf("span %d ids: %+v", i, s)
		}
	}
}

func sampleMetrics() []metric {
	h := newHistogram("mcp.client.operation.duration", "d", "s", durationBounds, time.Unix(1700000000, 0))
	a := []Attr{String("mcp.method.name", "tools/call"), String("gen_ai.tool.name", "echo")}
	for _, s := range []float64{0.001, 0.01, 0.015, 3, 400} {
		h.record(a, s)
	}
	h.record([]Attr{String("mcp.method.name", "initialize"), Int("server.port", 9)}, 0.5)
	return []metric{*h.snapshot(time.Unix(1700000060, 0))}
}

func checkMetrics(t *testing.T, md *metricspb.MetricsData) {
	t.Helper()
	ms := md.ResourceMetrics[0].ScopeMetrics[0].Metrics
	if len(ms) != 1 || ms[0].Name != "mcp.client.operation.duration" || ms[0].Unit != "s" {
		t.Fatalf("metrics: %v", ms)
	}
	h := ms[0].GetHistogram()
	if h == nil || h.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE || len(h.DataPoints) != 2 {
		t.Fatalf("histogram: %v", h)
	}
	p := h.DataPoints[0]
	want := []uint64{2, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1} // ≤0.01 is the first bucket
	if p.Count != 5 || len(p.BucketCounts) != 15 || len(p.ExplicitBounds) != 14 || p.GetSum() != 0.001+0.01+0.015+3+400 || p.GetMin() != 0.001 || p.GetMax() != 400 {
		t.Fatalf("point: %v", p)
	}
	for i := range want {
		if p.BucketCounts[i] != want[i] {
			t.Fatalf("buckets %v, want %v", p.BucketCounts, want)
		}
	}
	if attrMap(p.Attributes)["gen_ai.tool.name"] != "echo" || p.StartTimeUnixNano != 1700000000e9 || p.TimeUnixNano != 1700000060e9 {
		t.Fatalf("point: %v", p)
	}
}

func TestMetricsDecodeWithTheOfficialTypes(t *testing.T) {
	var md metricspb.MetricsData
	if err := proto.Unmarshal(appendMetricsProto(nil, testRes, "1.2.3", sampleMetrics()), &md); err != nil {
		t.Fatal(err)
	}
	checkMetrics(t, &md)
	md.Reset()
	if err := protojson.Unmarshal(appendMetricsJSON(nil, testRes, "1.2.3", sampleMetrics()), &md); err != nil {
		t.Fatal(err)
	}
	checkMetrics(t, &md)
}

func TestHistogramSeriesAreCapped(t *testing.T) {
	h := newHistogram("m", "", "s", durationBounds, time.Now())
	for i := range 2 * maxSeries {
		h.record([]Attr{Int("i", int64(i))}, 1)
	}
	m := h.snapshot(time.Now())
	if len(m.points) != maxSeries {
		t.Fatalf("%d series, want %d", len(m.points), maxSeries)
	}
	last := m.points[len(m.points)-1]
	if last.attrs[0].Key != "otel.metric.overflow" || last.count != uint64(2*maxSeries-(maxSeries-1)) {
		t.Fatalf("overflow series: %+v", last)
	}
}

func BenchmarkEncodeSpanProto(b *testing.B) { benchEncode(b, appendTracesProto) }
func BenchmarkEncodeSpanJSON(b *testing.B)  { benchEncode(b, appendTracesJSON) }

// BenchmarkEncodeSpanSubmit is one span's encoding as Submit does it, into the
// batch's buffer (reused), its method's attributes shared.
func BenchmarkEncodeSpanSubmit(b *testing.B) {
	t0 := time.Now()
	sp := Span{TraceID: NewTraceID(), SpanID: NewSpanID(), Name: "tools/call echo", Kind: KindClient, Start: t0, End: t0,
		Shared: NewAttrSet([]Attr{String("mcp.method.name", "tools/call"), String("mcp.protocol.version", "2025-06-18"),
			String("gen_ai.operation.name", "execute_tool"), String("gen_ai.tool.name", "echo"), String("network.transport", "pipe")}),
		Attrs: []Attr{String("jsonrpc.request.id", "17")}}
	buf := make([]byte, 0, 512*300)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%512 == 0 {
			buf = buf[:0]
		}
		buf = appendSpanProto(buf, &sp)
	}
}

func benchEncode(b *testing.B, enc func([]byte, []Attr, string, []Span) []byte) {
	t0 := time.Now()
	sp := Span{TraceID: NewTraceID(), SpanID: NewSpanID(), Name: "tools/call echo", Kind: KindClient, Start: t0, End: t0,
		Attrs: []Attr{String("mcp.method.name", "tools/call"), String("jsonrpc.request.id", "17"),
			String("mcp.protocol.version", "2025-06-18"), String("gen_ai.operation.name", "execute_tool"),
			String("gen_ai.tool.name", "echo"), String("network.transport", "pipe")}}
	batch := make([]Span, 512)
	for i := range batch {
		batch[i] = sp
	}
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 512 {
		buf = enc(buf[:0], testRes, "1", batch)
	}
	b.ReportMetric(float64(len(buf))/512, "wire-B/span")
}

// refSpan and refAttr are the span encoder before appendSpanProto reckoned lengths
// first: one pass with pb's placeholders. The two must write the same bytes.
func (e *pb) refSpan(s *Span) {
	m := e.begin(2)
	e.bytes(1, s.TraceID[:])
	e.bytes(2, s.SpanID[:])
	e.str(3, s.TraceState)
	if s.Parent != [8]byte{} {
		e.bytes(4, s.Parent[:])
	}
	e.str(5, s.Name)
	e.uint(6, uint64(s.Kind))
	e.fixed64(7, uint64(s.Start.UnixNano()))
	e.fixed64(8, uint64(s.End.UnixNano()))
	if s.Shared != nil {
		e.b = append(e.b, s.Shared.proto...) // encoded once, when the set was made
	}
	for _, a := range s.Attrs {
		e.refAttr(9, a)
	}
	for _, ev := range s.Events {
		m := e.begin(11)
		e.fixed64(1, uint64(ev.Time.UnixNano()))
		e.str(2, ev.Name)
		for _, a := range ev.Attrs {
			e.refAttr(3, a)
		}
		e.end(m)
	}
	if s.DroppedEvents > 0 {
		e.uint(12, uint64(s.DroppedEvents))
	}
	if s.Status != StatusUnset {
		st := e.begin(15)
		e.str(2, s.StatusMsg)
		e.uint(3, uint64(s.Status))
		e.end(st)
	}
	e.fixed32(16, spanFlags(s))
	e.end(m)
}

func (e *pb) refAttr(field int, a Attr) {
	kv := e.begin(field)
	e.str(1, a.Key)
	v := e.begin(2)
	if a.IsInt {
		e.tag(3, 0)
		e.varint(uint64(a.Int))
	} else {
		e.tag(1, 2) // an empty string is still a string value
		e.varint(uint64(len(a.Str)))
		e.b = append(e.b, a.Str...)
	}
	e.end(v)
	e.end(kv)
}

func TestSpanProtoAsBefore(t *testing.T) {
	spans := sampleSpans()
	spans = append(spans, Span{}, Span{Kind: 300, Status: StatusError, Attrs: []Attr{Int("big", 1<<40), Int("neg", -1), String("", "v")}})
	for i := range spans {
		var ref pb
		ref.refSpan(&spans[i])
		if got := appendSpanProto([]byte("x"), &spans[i]); !bytes.Equal(got[1:], ref.b) {
			t.Fatalf("span %d: %x, want %x", i, got[1:], ref.b)
		}
	}
}

func FuzzSpanProto(f *testing.F) {
	f.Add("tools/call echo", "k", "v", int64(7), uint8(3), "msg", 2, "ts")
	f.Add("", "", "", int64(-1), uint8(0), "", 0, "")
	f.Fuzz(func(t *testing.T, name, key, val string, iv int64, kind uint8, msg string, status int, ts string) {
		s := Span{Name: name, Kind: int(kind), TraceState: ts, Status: status & 3, StatusMsg: msg, Start: time.Unix(0, iv), End: time.Unix(1, iv),
			Attrs: []Attr{String(key, val), Int(val, iv)}, Shared: NewAttrSet([]Attr{String(val, key)})}
		if iv&1 == 1 {
			s.Parent = [8]byte{byte(iv)}
		}
		var ref pb
		ref.refSpan(&s)
		if got := appendSpanProto(nil, &s); !bytes.Equal(got, ref.b) {
			t.Fatalf("%x, want %x", got, ref.b)
		}
	})
}

// appendTracesProto appends an ExportTraceServiceRequest holding spans: its head,
// then the spans: what the exporter sends, made of the same parts (Submit encodes
// each span as it comes, send writes the head).
func appendTracesProto(b []byte, res []Attr, scopeVersion string, spans []Span) []byte {
	var enc []byte
	for i := range spans {
		enc = appendSpanProto(enc, &spans[i])
	}
	return append(appendTracesHead(b, res, scopeVersion, len(enc)), enc...)
}

// TestIntStringIsItsText: an IntString attribute is encoded, in both protocols and as
// a metric series' key, as the String attribute of its decimal text.
func TestIntStringIsItsText(t *testing.T) {
	for _, v := range []int64{0, 7, 10, 99, 100, -3, 123456789012345678, math.MaxInt64, math.MinInt64} {
		text := strconv.FormatInt(v, 10)
		is, s := IntString("jsonrpc.request.id", v), String("jsonrpc.request.id", text)
		if got, want := appendAttrField(nil, 9<<3|2, &is), appendAttrField(nil, 9<<3|2, &s); !bytes.Equal(got, want) {
			t.Errorf("%d: protobuf %x, want %x", v, got, want)
		}
		if got, want := appendAttrJSON(nil, 0, is), appendAttrJSON(nil, 0, s); !bytes.Equal(got, want) {
			t.Errorf("%d: JSON %s, want %s", v, got, want)
		}
		var h1, h2 histogram
		h1.series, h2.series = map[string]*point{}, map[string]*point{}
		h1.seriesLocked([]Attr{is})
		h2.seriesLocked([]Attr{s})
		if !bytes.Equal(h1.kbuf, h2.kbuf) {
			t.Errorf("%d: series key %q, want %q", v, h1.kbuf, h2.kbuf)
		}
	}
}
