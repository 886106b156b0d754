package telemetry

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"
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

func (e *pb) attr(field int, a Attr) { e.b = appendAttrField(e.b, byte(field<<3|2), &a) }

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

// appendSpanProto appends s as a Span message of ScopeSpans (field 2). The message's
// length is reckoned first (spanSize), so that it is written once, in front, and the
// room grown once: a span is ~250 bytes, past the one-byte length pb.end writes in
// place, which moved every span to make room for its length.
func appendSpanProto(b []byte, s *Span) []byte {
	n := spanSize(s)
	b = slices.Grow(b, 1+uvarintLen(uint64(n))+n)
	b = append(b, 2<<3|2) // ScopeSpans.spans
	b = binary.AppendUvarint(b, uint64(n))
	b = append(b, 1<<3|2, 16)
	b = append(b, s.TraceID[:]...)
	b = append(b, 2<<3|2, 8)
	b = append(b, s.SpanID[:]...)
	b = appendStrField(b, 3<<3|2, s.TraceState)
	if s.Parent != [8]byte{} {
		b = append(b, 4<<3|2, 8)
		b = append(b, s.Parent[:]...)
	}
	b = appendStrField(b, 5<<3|2, s.Name)
	if s.Kind != 0 {
		b = append(b, 6<<3|0)
		b = binary.AppendUvarint(b, uint64(s.Kind))
	}
	b = append(b, 7<<3|1)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.Start.UnixNano()))
	b = append(b, 8<<3|1)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.End.UnixNano()))
	if s.Shared != nil {
		b = append(b, s.Shared.proto...) // encoded once, when the set was made
	}
	for i := range s.Attrs {
		b = appendAttrField(b, 9<<3|2, &s.Attrs[i])
	}
	for i := range s.Events {
		e := &s.Events[i]
		b = append(b, 11<<3|2) // Span.events
		b = binary.AppendUvarint(b, uint64(eventSize(e)))
		b = append(b, 1<<3|1)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.Time.UnixNano()))
		b = appendStrField(b, 2<<3|2, e.Name)
		for j := range e.Attrs {
			b = appendAttrField(b, 3<<3|2, &e.Attrs[j])
		}
	}
	if s.DroppedEvents > 0 {
		b = append(b, 12<<3|0) // Span.dropped_events_count
		b = binary.AppendUvarint(b, uint64(s.DroppedEvents))
	}
	if s.Status != StatusUnset {
		b = append(b, 15<<3|2)
		b = binary.AppendUvarint(b, uint64(statusSize(s)))
		b = appendStrField(b, 2<<3|2, s.StatusMsg)
		b = append(b, 3<<3|0)
		b = binary.AppendUvarint(b, uint64(s.Status))
	}
	b = append(b, 0x85, 0x01) // 16<<3|5: flags, fixed32
	return binary.LittleEndian.AppendUint32(b, spanFlags(s))
}

// spanSize is the length of the Span message appendSpanProto writes.
func spanSize(s *Span) int {
	n := 2 + 16 + 2 + 8 + strFieldSize(s.TraceState) + strFieldSize(s.Name) + 9 + 9 + 2 + 4
	if s.Parent != [8]byte{} {
		n += 2 + 8
	}
	if s.Kind != 0 {
		n += 1 + uvarintLen(uint64(s.Kind))
	}
	if s.Shared != nil {
		n += len(s.Shared.proto)
	}
	for i := range s.Attrs {
		m := attrSize(&s.Attrs[i])
		n += 1 + uvarintLen(uint64(m)) + m
	}
	for i := range s.Events {
		m := eventSize(&s.Events[i])
		n += 1 + uvarintLen(uint64(m)) + m
	}
	if s.DroppedEvents > 0 {
		n += 1 + uvarintLen(uint64(s.DroppedEvents))
	}
	if s.Status != StatusUnset {
		m := statusSize(s)
		n += 1 + uvarintLen(uint64(m)) + m
	}
	return n
}

// eventSize is the length of the Span.Event message of e.
func eventSize(e *Event) int {
	n := 9 + strFieldSize(e.Name)
	for i := range e.Attrs {
		m := attrSize(&e.Attrs[i])
		n += 1 + uvarintLen(uint64(m)) + m
	}
	return n
}

func statusSize(s *Span) int { return strFieldSize(s.StatusMsg) + 1 + uvarintLen(uint64(s.Status)) }

// strFieldSize is the size of a string field of a one-byte tag (none when empty).
func strFieldSize(v string) int {
	if v == "" {
		return 0
	}
	return 1 + uvarintLen(uint64(len(v))) + len(v)
}

// appendStrField appends a string field of the one-byte tag (nothing when empty).
func appendStrField(b []byte, tag byte, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, tag)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// attrSize is the length of the KeyValue message of a.
func attrSize(a *Attr) int {
	return strFieldSize(a.Key) + 1 + uvarintLen(uint64(anyValueSize(a))) + anyValueSize(a)
}

// anyValueSize is the length of a's AnyValue message: an int, or a string (an empty
// string is still a string value, written).
func anyValueSize(a *Attr) int {
	if a.IsInt {
		return 1 + uvarintLen(uint64(a.Int))
	}
	n := len(a.Str)
	if a.IntText {
		n = intTextLen(a.Int)
	}
	return 1 + uvarintLen(uint64(n)) + n
}

// intTextLen is the length of v's decimal text.
func intTextLen(v int64) int {
	n := 1
	u := uint64(v)
	if v < 0 {
		n, u = 2, -u
	}
	for ; u >= 10; u /= 10 {
		n++
	}
	return n
}

// appendAttrField appends a as a KeyValue field of the one-byte tag (attributes are
// field 1 of a Resource, 9 of a Span or a data point).
func appendAttrField(b []byte, tag byte, a *Attr) []byte {
	v := anyValueSize(a)
	b = append(b, tag)
	b = binary.AppendUvarint(b, uint64(strFieldSize(a.Key)+1+uvarintLen(uint64(v))+v))
	b = appendStrField(b, 1<<3|2, a.Key)
	b = append(b, 2<<3|2)
	b = binary.AppendUvarint(b, uint64(v))
	if a.IsInt {
		b = append(b, 3<<3|0)
		return binary.AppendUvarint(b, uint64(a.Int))
	}
	b = append(b, 1<<3|2)
	if a.IntText {
		b = binary.AppendUvarint(b, uint64(intTextLen(a.Int)))
		return strconv.AppendInt(b, a.Int, 10)
	}
	b = binary.AppendUvarint(b, uint64(len(a.Str)))
	return append(b, a.Str...)
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
