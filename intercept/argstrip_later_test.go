package intercept

import (
	"bytes"
	"testing"
)

// TestArgStripLaterObjectIsInexact: in a batch, an object after the first whose
// params come before any method saying tools/call is edited as it passes (the key
// must never pass), where the whole line's edit leaves one that is not a call as it
// is. ArgStrip made that edit without saying so: its output differed from strip's
// with Inexact unset, for valid JSON. It must say Inexact, and still never pass the
// key.
func TestArgStripLaterObjectIsInexact(t *testing.T) {
	k := DefaultCorrelationKey
	for _, c := range []string{
		`[{"id":1,"method":"tools/call","params":{}},{"params":{"arguments":{"_bir_call_id":1}},"method":"x"}]`,
		`[{"id":1,"method":"tools/call","params":{}},{"params":{"arguments":{"_bir_call_id":1}},"id":2}]`,
		`[{"id":1,"method":"tools/call","params":{"arguments":{"_bir_call_id":1}}},{"id":2,"method":"tools/list","params":{"arguments":{"_bir_call_id":1}}}]`,
		`[{"id":1,"method":"tools/call","params":{}},{"params":{"arguments":{"_bir_call_id":1}},"method":"tools/call","id":2}]`,
	} {
		msg := []byte(c)
		for i := 0; i <= len(msg); i++ {
			checkStreamStrip(t, msg, k, []int{i})
			out, whole, inexact := streamStrip(msg, k, []int{i})
			if whole || !inexact || bytes.Contains(out, []byte(k)) {
				t.Fatalf("%s cut at %d: whole %v, inexact %v, out %s; want it edited, the key gone, Inexact", c, i, whole, inexact, out)
			}
		}
	}
	// The first object decides, and a batch of calls is exact.
	b := []byte(`[{"id":1,"method":"tools/call","params":{"arguments":{"_bir_call_id":1}}},{"id":2,"method":"tools/call","params":{"arguments":{"a":2,"_bir_call_id":1}}}]`)
	if _, _, inexact := streamStrip(b, k, nil); inexact {
		t.Fatal("a batch of calls was said Inexact")
	}
	checkStreamStrip(t, b, k, nil)
}
