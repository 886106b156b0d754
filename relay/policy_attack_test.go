package relay_test

import (
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/toolpolicy"
)

// TestFilterDuplicateNameRefused: a host tools/call whose params has two "name"
// members, one of them hidden, never reaches the server (docs/policy.md: a server
// reading the first must not be reached either), whichever of the two is hidden;
// the host gets the unknown-tool error. A ping after them is the server's next line.
func TestFilterDuplicateNameRefused(t *testing.T) {
	up := newReplacingConn()
	_, host := wireConn(t, up, nil, func(o *relay.Options) { o.Policy = &toolpolicy.Policy{Ignore: []string{"secret*"}} })
	host.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"secret","name":"echo"}}`)
	host.send(t, `[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"secret_a","arguments":{},"name":"echo"}},{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
	host.send(t, `{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	if got := written(t, up); got != `[{"jsonrpc":"2.0","id":3,"method":"ping"}]` {
		t.Fatalf("the server got %s", got)
	}
	if got := written(t, up); got != `{"jsonrpc":"2.0","id":4,"method":"ping"}` {
		t.Fatalf("the server got %s", got)
	}
	for _, want := range []string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool: secret"}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Unknown tool: secret_a"}}`} {
		if got := host.next(t); got != want {
			t.Fatalf("the host got %s, want %s", got, want)
		}
	}
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":4,"result":{}}`)}
	if got := host.next(t); !strings.Contains(got, `"id":4`) {
		t.Fatalf("the host got %s", got)
	}
}
