package relay

import (
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// TestLongCallReadWholeIsHeldOnce: a long call whose params come before its method
// is held whole (jsonlex.ArgStrip.Whole) and forwarded as any message at its end;
// with recording on, the copy kept for interception held it a second time (twice a
// line of up to --max-message). It is held once.
func TestLongCallReadWholeIsHeldOnce(t *testing.T) {
	l := &hostLine{r: &Relay{}, keep: true, st: jsonlex.NewArgStrip("_bir_call_id")}
	msg := `{"jsonrpc":"2.0","params":{"arguments":{"_bir_call_id":"c","a":"` + strings.Repeat("x", 1<<20) + `"}},"id":1,"method":"tools/call"}`
	for i := 0; i < len(msg); i += 64 << 10 {
		l.Write([]byte(msg[i:min(i+64<<10, len(msg))]))
	}
	if !l.st.Whole() || string(l.st.Held()) != msg {
		t.Fatal("the line whose params precede its method was not held whole")
	}
	if len(l.msg) != 0 || len(l.buf) != 0 || l.out != nil {
		t.Fatalf("besides the held line, %d bytes kept for interception and %d gathered", len(l.msg), len(l.buf))
	}
}
