package telemetry

import (
	"encoding/binary"
	"math"
)

// pb appends protobuf wire format. A nested message is written after a one-byte
// length placeholder and moved when its length needs more bytes (end): one pass, no
// sizing functions, and a copy only of messages of 128 bytes or more.
type pb struct{ b []byte }

func (e *pb) tag(field, wire int) { e.varint(uint64(field)<<3 | uint64(wire)) }

func (e *pb) varint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

func (e *pb) str(field int, s string) {
	if s == "" {
		return
	}
	e.tag(field, 2)
	e.varint(uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *pb) bytes(field int, s []byte) {
	e.tag(field, 2)
	e.varint(uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *pb) uint(field int, v uint64) {
	if v == 0 {
		return
	}
	e.tag(field, 0)
	e.varint(v)
}

func (e *pb) fixed64(field int, v uint64) {
	e.tag(field, 1)
	e.b = binary.LittleEndian.AppendUint64(e.b, v)
}

func (e *pb) double(field int, v float64) { e.fixed64(field, math.Float64bits(v)) }

func (e *pb) fixed32(field int, v uint32) {
	e.tag(field, 5)
	e.b = binary.LittleEndian.AppendUint32(e.b, v)
}

// begin starts a nested message in field; end finishes it.
func (e *pb) begin(field int) int {
	e.tag(field, 2)
	e.b = append(e.b, 0)
	return len(e.b)
}

func (e *pb) end(start int) {
	n := len(e.b) - start
	if n < 0x80 {
		e.b[start-1] = byte(n)
		return
	}
	var tmp [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(tmp[:], uint64(n))
	e.b = append(e.b, tmp[:l-1]...) // room for the longer length
	copy(e.b[start-1+l:], e.b[start:start+n])
	copy(e.b[start-1:], tmp[:l])
}

func (e *pb) attr(field int, a Attr) {
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

func (e *pb) resource(res []Attr) {
	r := e.begin(1)
	for _, a := range res {
		e.attr(1, a)
	}
	e.end(r)
}

// head begins a request's one Resource{Spans,Metrics} (field 1: its resource) and its
// one Scope{Spans,Metrics} (field 2: its scope); the caller ends both, inner first.
func (e *pb) head(res []Attr, scopeVersion string) (outer, inner int) {
	outer = e.begin(1)
	e.resource(res)
	inner = e.begin(2)
	s := e.begin(1)
	e.str(1, scopeName)
	e.str(2, scopeVersion)
	e.end(s)
	return outer, inner
}

// appendTracesProto appends an ExportTraceServiceRequest holding spans: its head,
// then the spans (what the exporter sends, a batch's spans encoded as they came).
func appendTracesProto(b []byte, res []Attr, scopeVersion string, spans []Span) []byte {
	var enc []byte
	for i := range spans {
		enc = appendSpanProto(enc, &spans[i])
	}
	return append(appendTracesHead(b, res, scopeVersion, len(enc)), enc...)
}

// appendSpanProto appends s as a Span message of ScopeSpans (field 2).
func appendSpanProto(b []byte, s *Span) []byte {
	e := pb{b}
	e.span(s)
	return e.b
}

// appendTracesHead appends the start of an ExportTraceServiceRequest whose one
// ScopeSpans ends with spansLen bytes of Span messages (appendSpanProto), which are
// to follow it: its one ResourceSpans (field 1: the resource) and in it the
// ScopeSpans (field 2: the scope), each length counting the spans to come.
func appendTracesHead(b []byte, res []Attr, scopeVersion string, spansLen int) []byte {
	// The resource and the scope are encoded first, to be measured.
	var m pb
	m.resource(res) // ResourceSpans.resource
	r := len(m.b)
	sc := m.begin(1) // ScopeSpans.scope
	m.str(1, scopeName)
	m.str(2, scopeVersion)
	m.end(sc)
	resource, scope := m.b[:r], m.b[r:]
	ssLen := len(scope) + spansLen                                 // ScopeSpans' length
	rsLen := len(resource) + 1 + uvarintLen(uint64(ssLen)) + ssLen // ResourceSpans'
	e := pb{b}
	e.tag(1, 2) // ExportTraceServiceRequest.resource_spans
	e.varint(uint64(rsLen))
	e.b = append(e.b, resource...)
	e.tag(2, 2) // ResourceSpans.scope_spans
	e.varint(uint64(ssLen))
	e.b = append(e.b, scope...)
	return e.b
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func (e *pb) span(s *Span) {
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
		e.attr(9, a)
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

// spanFlags is Span.flags: the W3C trace flags, and whether the parent is remote.
func spanFlags(s *Span) uint32 {
	f := uint32(s.Flags) | 0x100 // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
	if s.RemoteParent {
		f |= 0x200 // SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
	}
	return f
}

// appendMetricsProto appends an ExportMetricsServiceRequest.
func appendMetricsProto(b []byte, res []Attr, scopeVersion string, ms []metric) []byte {
	e := pb{b}
	rm, sm := e.head(res, scopeVersion) // ResourceMetrics, ScopeMetrics
	for i := range ms {
		m := &ms[i]
		mm := e.begin(2)
		e.str(1, m.name)
		e.str(2, m.description)
		e.str(3, m.unit)
		h := e.begin(9) // Histogram
		for j := range m.points {
			p := &m.points[j]
			dp := e.begin(1)
			e.fixed64(2, uint64(p.start.UnixNano()))
			e.fixed64(3, uint64(p.time.UnixNano()))
			e.fixed64(4, p.count)
			e.double(5, p.sum)
			bc := e.begin(6)
			for _, c := range p.buckets {
				e.b = binary.LittleEndian.AppendUint64(e.b, c)
			}
			e.end(bc)
			eb := e.begin(7)
			for _, x := range m.bounds {
				e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(x))
			}
			e.end(eb)
			for _, a := range p.attrs {
				e.attr(9, a)
			}
			if p.count > 0 {
				e.double(11, p.min)
				e.double(12, p.max)
			}
			e.end(dp)
		}
		e.uint(2, 2) // AGGREGATION_TEMPORALITY_CUMULATIVE
		e.end(h)
		e.end(mm)
	}
	e.end(sm)
	e.end(rm)
	return e.b
}

// scopeName is the instrumentation scope of everything bir-proxy exports.
const scopeName = "github.com/bir-dev/bir-proxy"
