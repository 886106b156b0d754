package telemetry

import (
	"encoding/binary"
	"strconv"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// partialSuccess reads the partial_success of an export's answer (ExportTrace- or
// ExportMetricsServiceResponse, whose field 1 holds rejected count = 1 and
// error_message = 2), in protobuf or, with isJSON, OTLP/JSON (count named jsonCount).
// The answer is the collector's, so hostile: read without recursion, bounded by its
// length (capped by the caller); ok false when it cannot be read.
func partialSuccess(body []byte, isJSON bool, jsonCount string) (rejected int64, msg string, ok bool) {
	if isJSON {
		if len(body) == 0 {
			return 0, "", true
		}
		ps := jsonlex.Get(body, "partialSuccess")
		if ps == nil {
			return 0, "", jsonlex.Valid(body)
		}
		n := jsonlex.Get(ps, jsonCount)
		if len(n) > 0 && n[0] == '"' {
			n = []byte(jsonlex.StringOf(n))
		}
		if len(n) > 0 {
			v, err := strconv.ParseInt(string(n), 10, 64)
			if err != nil {
				return 0, "", false
			}
			rejected = v
		}
		if m := jsonlex.Get(ps, "errorMessage"); len(m) > 0 && m[0] == '"' {
			msg = clip(jsonlex.StringOf(m), 256)
		}
		return rejected, msg, true
	}
	ok = eachField(body, func(field int, wire int, v uint64, b []byte) bool {
		if field != 1 || wire != 2 {
			return true
		}
		return eachField(b, func(field int, wire int, v uint64, b []byte) bool {
			switch {
			case field == 1 && wire == 0:
				rejected = int64(v)
			case field == 2 && wire == 2:
				msg = clip(string(b), 256)
			}
			return true
		})
	})
	if !ok {
		return 0, "", false
	}
	return rejected, msg, true
}

// eachField walks the fields of one protobuf message: f gets a varint's value, or a
// length-delimited field's bytes; fixed fields are skipped, groups refused.
func eachField(b []byte, f func(field, wire int, v uint64, b []byte) bool) bool {
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return false
		}
		b = b[n:]
		field, wire := int(key>>3), int(key&7)
		if field <= 0 || key>>3 > 1<<29 {
			return false
		}
		switch wire {
		case 0:
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return false
			}
			b = b[n:]
			if !f(field, wire, v, nil) {
				return false
			}
		case 1:
			if len(b) < 8 {
				return false
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return false
			}
			b = b[4:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return false
			}
			v := b[n : n+int(l)]
			b = b[n+int(l):]
			if !f(field, wire, 0, v) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
