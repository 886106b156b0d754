package jsonlex

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStringPrefixIsAString: the first part of a string literal cut anywhere,
// trimmed by stringPrefix and closed, is a string literal (no escape or character
// cut in two), and loses at most an escape or a character.
func TestStringPrefixIsAString(t *testing.T) {
	lit := `"a\u00e9\\\"é😀\ud83d\ude00\n\/` + strings.Repeat(`x\u0041`, 3) + `"`
	for n := 1; n < len(lit); n++ {
		p := stringPrefix([]byte(lit[:n]))
		if got := lit[:p] + `"`; !json.Valid([]byte(got)) {
			t.Errorf("cut at %d: %q is no string", n, got)
		}
		if n-p > 12 {
			t.Errorf("cut at %d: kept only %d bytes", n, p)
		}
	}
}

// TestCaptureKeepsTheFirstPartOfALongName: a name or correlation id past its bound
// is kept as its first part, a string still; a long _meta is not kept.
func TestCaptureKeepsTheFirstPartOfALongName(t *testing.T) {
	name := `"` + strings.Repeat(`\u0041`, 5000) + `"`
	id := `"` + strings.Repeat("é", 20000) + `"`
	meta := `{"a":"` + strings.Repeat("m", 20000) + `"}`
	line := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + name + `,"_meta":` + meta + `,"arguments":{"_bir_call_id":` + id + `,"x":1}}}`
	for _, step := range []int{len(line), 1000, 7} {
		a := NewArgStrip("_bir_call_id")
		a.Capture(func([]byte, bool) {})
		for i := 0; i < len(line); i += step {
			a.Write([]byte(line[i:min(i+step, len(line))]), func([]byte) {})
		}
		for what, v := range map[string][]byte{"name": a.Name(), "callId": a.CallID()} {
			if len(v) < 8<<10 || !json.Valid(v) || v[0] != '"' {
				t.Errorf("step %d: %s kept as %d bytes %.40q", step, what, len(v), v)
			}
		}
		if a.Meta() != nil {
			t.Errorf("step %d: a long _meta was kept", step)
		}
	}
}
