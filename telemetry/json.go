package telemetry

import (
	"encoding/hex"
	"math"
	"strconv"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// The OTLP/JSON encoding (http/json): the protobuf messages' JSON mapping with
// lowerCamelCase names, ids as hex, enums as numbers and 64-bit integers as strings.

func appendAttrsJSON(b []byte, name string, as []Attr) []byte {
	return appendAttrsJSON2(b, name, nil, as)
}

// appendAttrsJSON2 is appendAttrsJSON of the attributes of first and then of as.
func appendAttrsJSON2(b []byte, name string, first, as []Attr) []byte {
	b = append(b, `"`...)
	b = append(b, name...)
	b = append(b, `":[`...)
	n := 0
	for _, a := range first {
		b = appendAttrJSON(b, n, a)
		n++
	}
	for _, a := range as {
		b = appendAttrJSON(b, n, a)
		n++
	}
	return append(b, ']')
}

// appendAttrJSON appends one attribute, the i-th of its list.
func appendAttrJSON(b []byte, i int, a Attr) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, `{"key":`...)
	b = jsonlex.AppendString(b, a.Key)
	if a.IsInt {
		b = append(b, `,"value":{"intValue":"`...)
		b = strconv.AppendInt(b, a.Int, 10)
		return append(b, `"}}`...)
	}
	b = append(b, `,"value":{"stringValue":`...)
	if a.IntText {
		b = append(strconv.AppendInt(append(b, '"'), a.Int, 10), '"')
	} else {
		b = jsonlex.AppendString(b, a.Str)
	}
	return append(b, `}}`...)
}

func appendHeadJSON(b []byte, kind string, res []Attr, scopeVersion string) []byte {
	b = append(b, `{"`...)
	b = append(b, kind...)
	b = append(b, `":[{"resource":{`...)
	b = appendAttrsJSON(b, "attributes", res)
	b = append(b, `},"scope`...)
	if kind == "resourceSpans" {
		b = append(b, `Spans":[{"scope":{"name":`...)
	} else {
		b = append(b, `Metrics":[{"scope":{"name":`...)
	}
	b = jsonlex.AppendString(b, scopeName)
	b = append(b, `,"version":`...)
	b = jsonlex.AppendString(b, scopeVersion)
	return append(b, '}')
}

func appendNanos(b []byte, name string, v int64) []byte {
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":"`...)
	b = strconv.AppendUint(b, uint64(v), 10)
	return append(b, '"')
}

// appendTracesJSON appends an ExportTraceServiceRequest in OTLP/JSON.
func appendTracesJSON(b []byte, res []Attr, scopeVersion string, spans []Span) []byte {
	b = appendHeadJSON(b, "resourceSpans", res, scopeVersion)
	b = append(b, `,"spans":[`...)
	for i := range spans {
		s := &spans[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"traceId":"`...)
		b = hex.AppendEncode(b, s.TraceID[:])
		b = append(b, `","spanId":"`...)
		b = hex.AppendEncode(b, s.SpanID[:])
		b = append(b, '"')
		if s.Parent != [8]byte{} {
			b = append(b, `,"parentSpanId":"`...)
			b = hex.AppendEncode(b, s.Parent[:])
			b = append(b, '"')
		}
		if s.TraceState != "" {
			b = append(b, `,"traceState":`...)
			b = jsonlex.AppendString(b, s.TraceState)
		}
		b = append(b, `,"name":`...)
		b = jsonlex.AppendString(b, s.Name)
		b = append(b, `,"kind":`...)
		b = strconv.AppendInt(b, int64(s.Kind), 10)
		b = appendNanos(b, "startTimeUnixNano", s.Start.UnixNano())
		b = appendNanos(b, "endTimeUnixNano", s.End.UnixNano())
		b = append(b, ',')
		b = appendAttrsJSON2(b, "attributes", s.Shared.Attrs(), s.Attrs)
		if len(s.Events) > 0 {
			b = append(b, `,"events":[`...)
			for i := range s.Events {
				e := &s.Events[i]
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"name":`...)
				b = jsonlex.AppendString(b, e.Name)
				b = appendNanos(b, "timeUnixNano", e.Time.UnixNano())
				b = append(b, ',')
				b = appendAttrsJSON(b, "attributes", e.Attrs)
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		if s.DroppedEvents > 0 {
			b = append(b, `,"droppedEventsCount":`...)
			b = strconv.AppendUint(b, uint64(s.DroppedEvents), 10)
		}
		if s.Status != StatusUnset {
			b = append(b, `,"status":{"code":`...)
			b = strconv.AppendInt(b, int64(s.Status), 10)
			if s.StatusMsg != "" {
				b = append(b, `,"message":`...)
				b = jsonlex.AppendString(b, s.StatusMsg)
			}
			b = append(b, '}')
		}
		b = append(b, `,"flags":`...)
		b = strconv.AppendUint(b, uint64(spanFlags(s)), 10)
		b = append(b, '}')
	}
	return append(b, `]}]}]}`...)
}

// appendMetricsJSON appends an ExportMetricsServiceRequest in OTLP/JSON.
func appendMetricsJSON(b []byte, res []Attr, scopeVersion string, ms []metric) []byte {
	b = appendHeadJSON(b, "resourceMetrics", res, scopeVersion)
	b = append(b, `,"metrics":[`...)
	for i := range ms {
		m := &ms[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = jsonlex.AppendString(b, m.name)
		b = append(b, `,"description":`...)
		b = jsonlex.AppendString(b, m.description)
		b = append(b, `,"unit":`...)
		b = jsonlex.AppendString(b, m.unit)
		b = append(b, `,"histogram":{"aggregationTemporality":2,"dataPoints":[`...)
		for j := range m.points {
			p := &m.points[j]
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b = appendAttrsJSON(b, "attributes", p.attrs)
			b = appendNanos(b, "startTimeUnixNano", p.start.UnixNano())
			b = appendNanos(b, "timeUnixNano", p.time.UnixNano())
			b = appendNanos(b, "count", int64(p.count))
			b = append(b, `,"sum":`...)
			b = appendFloat(b, p.sum)
			b = append(b, `,"bucketCounts":[`...)
			for k, c := range p.buckets {
				if k > 0 {
					b = append(b, ',')
				}
				b = append(b, '"')
				b = strconv.AppendUint(b, c, 10)
				b = append(b, '"')
			}
			b = append(b, `],"explicitBounds":[`...)
			for k, x := range m.bounds {
				if k > 0 {
					b = append(b, ',')
				}
				b = appendFloat(b, x)
			}
			b = append(b, ']')
			if p.count > 0 {
				b = append(b, `,"min":`...)
				b = appendFloat(b, p.min)
				b = append(b, `,"max":`...)
				b = appendFloat(b, p.max)
			}
			b = append(b, '}')
		}
		b = append(b, `]}}`...)
	}
	return append(b, `]}]}]}`...)
}

func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}
