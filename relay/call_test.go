package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/relay"
)

// TestCallRefusesWhatIsNotOneLineObject: Call is the last door before a stdio
// server, whose framing ends a message at a line feed. Params with a raw line break,
// or that are not one JSON value, would reach the server as several messages the
// host never sent; Call refuses them with ErrMalformed and writes nothing, and a
// well-formed call after them goes through.
func TestCallRefusesWhatIsNotOneLineObject(t *testing.T) {
	w := wire(t, "--reply")
	ctx := context.Background()
	bad := []string{
		"{\"name\":\"echo\",\"arguments\":{\"a\":\n{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"ping\"}\n}}",
		"{\"name\":\"echo\",\"arguments\":{\"a\":1}\r}",
		"{\"name\":\"echo\",\"arguments\":{\"s\":\"a\nb\"}}",
		`{"name":"echo"},{"x":1}`,
		`{"name":"echo"`,
		`{"name":"echo","arguments":[1,}`,
	}
	for _, p := range bad {
		// Bounded: a call that was sent gets no answer from a server that could not
		// parse it.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := w.r.Call(cctx, relay.Request{Method: "tools/call", Params: []byte(p)})
		cancel()
		if !errors.Is(err, relay.ErrMalformed) {
			t.Errorf("Call with params %q: %v, want ErrMalformed", p, err)
		}
	}
	resp, err := w.r.Call(ctx, relay.Request{Method: "tools/call", Params: []byte(`{"name":"echo","arguments":{"ok":1}}`)})
	if err != nil || !strings.Contains(string(resp), `"result"`) {
		t.Fatalf("the good call: %s, %v", resp, err)
	}
	waitReceived(t, w.received, "the good call", func(got string) bool { return strings.Contains(got, `"ok":1`) })
	if got := w.received.String(); strings.Count(got, "\n") != 1 {
		t.Fatalf("the server received more than the one good call:\n%s", got)
	}
}
