package telemetry

import (
	"bytes"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// TraceContext is a W3C trace context a host sent in params._meta.
type TraceContext struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
	// State is the tracestate, when it was well-formed enough to pass on.
	State string
}

// Sampled says the parent's sampled flag is set.
func (tc TraceContext) Sampled() bool { return tc.Flags&1 != 0 }

// maxTraceState is the W3C limit on a tracestate header (512 characters).
const maxTraceState = 512

// ParseTraceparent reads a W3C traceparent value (version-format
// "00-<32 hex>-<16 hex>-<2 hex>"), strictly: lowercase hex only, no all-zero ids,
// version ff refused, a version-00 value exactly 55 characters. A later version is
// read by its version-00 prefix, as the recommendation says, when what follows is
// "-" and more.
func ParseTraceparent(s []byte) (tc TraceContext, ok bool) {
	if len(s) < 55 || len(s) > 256 {
		return tc, false
	}
	ver, ok1 := hexByte(s[0], s[1])
	if !ok1 || ver == 0xff || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return tc, false
	}
	if ver == 0 && len(s) != 55 {
		return tc, false
	}
	if ver != 0 && len(s) > 55 && s[55] != '-' {
		return tc, false
	}
	if !hexID(tc.TraceID[:], s[3:35]) || !hexID(tc.SpanID[:], s[36:52]) {
		return TraceContext{}, false
	}
	f, ok1 := hexByte(s[53], s[54])
	if !ok1 {
		return TraceContext{}, false
	}
	tc.Flags = f
	return tc, true
}

// CleanTraceState returns s when it can be passed on as a tracestate: at most 512
// characters of printable ASCII, at most 32 list members; "" otherwise (the W3C
// recommendation: a tracestate that cannot be parsed is dropped, the traceparent kept).
func CleanTraceState(s []byte) string {
	if len(s) == 0 || len(s) > maxTraceState {
		return ""
	}
	members := 1
	for _, c := range s {
		if c < 0x20 || c > 0x7e {
			return ""
		}
		if c == ',' {
			members++
		}
	}
	if members > 32 {
		return ""
	}
	return string(s)
}

// hexID decodes src, lowercase hex, into dst; false for other characters and for an
// all-zero id (invalid in W3C trace context).
func hexID(dst, src []byte) bool {
	zero := true
	for i := range dst {
		b, ok := hexByte(src[2*i], src[2*i+1])
		if !ok {
			return false
		}
		dst[i] = b
		zero = zero && b == 0
	}
	return !zero
}

func hexByte(a, b byte) (byte, bool) {
	h, ok1 := hexDigit(a)
	l, ok2 := hexDigit(b)
	return h<<4 | l, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Caps on the _meta strings FromMeta reads (raw JSON, quotes and escapes included).
const (
	maxMetaTraceparent = 256
	maxMetaTraceState  = 1024
)

// FromMeta is the trace context a request's params carry in _meta, the MCP
// conventions' propagation: its traceparent (ParseTraceparent) and, with one, its
// tracestate (CleanTraceState, in State), read as the host's JSON.parse reads them
// (keys spelt with escapes, the last of a name winning). ok is false when params has
// no usable traceparent.
func FromMeta(params []byte) (tc TraceContext, ok bool) {
	// Most requests carry no _meta: not looked for unless the name is there plainly
	// spelt, or a \u escape is (a key spelt "_m\u0065ta" is the host's _meta too).
	if !bytes.Contains(params, []byte(`_meta"`)) && !bytes.Contains(params, []byte(`\u`)) {
		return tc, false
	}
	meta := jsonlex.Get(params, "_meta")
	if len(meta) == 0 || meta[0] != '{' {
		return tc, false
	}
	raw := jsonlex.Get(meta, "traceparent")
	if len(raw) <= 2 || len(raw) > maxMetaTraceparent || raw[0] != '"' {
		return tc, false
	}
	if tc, ok = ParseTraceparent([]byte(jsonlex.StringOf(raw))); !ok {
		return tc, false
	}
	if st := jsonlex.Get(meta, "tracestate"); len(st) > 2 && len(st) <= maxMetaTraceState && st[0] == '"' {
		tc.State = CleanTraceState([]byte(jsonlex.StringOf(st)))
	}
	return tc, true
}
