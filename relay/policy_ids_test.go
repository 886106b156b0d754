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
	_, host := wireConn(t, up, nil, func(o *relay.Options) { o.Hooks = relay.ToolPolicy(&toolpolicy.Policy{Ignore: []string{"secret*"}}) })
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

// TestFilterListAnswerWithAStringID: a server answering the host's tools/list of id
// 1 with the id "1" (or " 1 ", "0x1", "1e0") reaches a TypeScript SDK host as the
// answer to that list (its Protocol matches Number(response.id)), so it loses the
// hidden tools as the answer of id 1 does; and the exact answer after it is cut
// too. An answer of a string id that no list's number is goes as it is.
func TestFilterListAnswerWithAStringID(t *testing.T) {
	up := newReplacingConn()
	_, host := wireConn(t, up, nil, func(o *relay.Options) { o.Hooks = relay.ToolPolicy(&toolpolicy.Policy{Ignore: []string{"secret*"}}) })
	list := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"echo"},{"name":"secret"}]}}`
	}
	cut := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"echo"}]}}`
	}
	host.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	host.send(t, `{"jsonrpc":"2.0","id":0,"method":"tools/list"}`)
	written(t, up)
	written(t, up)
	for _, id := range []string{`"1"`, `" 1\n"`, `"0x1"`, `"1e0"`, `"+1.0"`, `""`, `"\u0031"`, `1`} {
		up.from <- fromServer{msg: []byte(list(id))}
		if got := host.next(t); got != cut(id) {
			t.Errorf("the host got %s, want %s", got, cut(id))
		}
	}
	for _, id := range []string{`"2"`, `"1a"`, `"0x"`, `"1.5"`, `"a"`} {
		up.from <- fromServer{msg: []byte(list(id))}
		if got := host.next(t); got != list(id) {
			t.Errorf("the host got %s, want %s", got, list(id))
		}
	}
}
