package framing

import (
	"errors"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// TestWholeLineOverTheCapIsNotStreamed: a line whose newline is in the buffer and
// which is over the cap is refused as a line read whole is (TooLongError), not
// offered to a sink: streamed, its receiver got a prefix of a message that is
// dropped, and a writer behind a peer that does not read then waited on it for a
// message the proxy answers itself (a host's request over the cap).
func TestWholeLineOverTheCapIsNotStreamed(t *testing.T) {
	line := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"` + strings.Repeat("x", 100) + `"}}`
	for _, term := range []string{"\n", "\r\n"} {
		r := NewReader(&chunked{b: []byte(line + term + `{"jsonrpc":"2.0","id":4,"method":"ping"}` + "\n"), n: 4096}, WithMaxMessage(64))
		offered := 0
		r.SetStream(1, func(*jsonlex.Peek) LineSink { offered++; return nil })
		_, err := r.Read()
		var tl *TooLongError
		if !errors.As(err, &tl) {
			t.Fatalf("Read returned %v, want a TooLongError", err)
		}
		if offered != 0 {
			t.Fatalf("a whole line over the cap was offered to stream %d times", offered)
		}
		if msg, err := r.Read(); err != nil || !strings.Contains(string(msg), `"id":4`) {
			t.Fatalf("the next line: %q, %v", msg, err)
		}
	}
}
