package relay_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/relay"
)

// seenIC records what interception is told came from the upstream.
type seenIC struct {
	mu       sync.Mutex
	upstream []string
}

func (ic *seenIC) FromHost(msg []byte, _ time.Time) []byte { return msg }
func (ic *seenIC) Forwarded(time.Time)                     {}
func (ic *seenIC) FromProxy(msg []byte, _ relay.Own, _ time.Time) []byte {
	return msg
}
func (ic *seenIC) FromUpstream(msg []byte, _ time.Time) {
	ic.mu.Lock()
	ic.upstream = append(ic.upstream, string(msg))
	ic.mu.Unlock()
}
func (ic *seenIC) ToProxy([]byte, time.Time) {}

func (ic *seenIC) Capabilities() relay.Capabilities { return relay.Capabilities{} }
func (ic *seenIC) UpstreamLost(time.Time)           {}

func (ic *seenIC) seen() []string {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return append([]string(nil), ic.upstream...)
}

// TestHooksAnswerReplaceAndCancel: a policy that is not the tool policy plugs in
// through relay.Hooks alone and has the seam's powers: it answers a host request in
// the server's place (nothing reaches the server), replaces the server's answer to
// another (interception still sees the server's), and from outside the pumps
// (Port.Answer) answers a request in flight and cancels it upstream.
func TestHooksAnswerReplaceAndCancel(t *testing.T) {
	up := newReplacingConn()
	ic := &seenIC{}
	ports := make(chan *relay.Port, 1)
	hooks := &relay.Hooks{
		Attach: func(p *relay.Port) { ports <- p },
		FromHost: func(msg []byte, lx *jsonlex.Line) ([]byte, [][]byte) {
			f := lx.RPC()[0].Fields(msg)
			if jsonlex.KeyIs(f.Method, "local/ping") {
				return nil, [][]byte{[]byte(`{"jsonrpc":"2.0","id":` + string(f.ID) + `,"result":{"local":true}}`)}
			}
			return msg, nil
		},
		FromUpstream: func(msg []byte, lx *jsonlex.Line) ([]byte, bool) {
			if f := lx.RPC()[0].Fields(msg); string(f.ID) == "2" {
				return []byte(`{"jsonrpc":"2.0","id":2,"result":"short"}`), true
			}
			return msg, false
		},
	}
	_, host := wireConn(t, up, ic, func(o *relay.Options) { o.Hooks = hooks })
	port := testutil.Recv(t, ports, "the relay to attach the hooks")

	host.send(t, `{"jsonrpc":"2.0","id":1,"method":"local/ping"}`)
	if got, want := host.next(t), `{"jsonrpc":"2.0","id":1,"result":{"local":true}}`; got != want {
		t.Fatalf("the host got %s, want %s", got, want)
	}
	host.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big"}}`)
	if got := written(t, up); got != `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big"}}` {
		t.Fatalf("the server got %s (the local ping must not reach it)", got)
	}
	const long = `{"jsonrpc":"2.0","id":2,"result":{"content":"long"}}`
	up.from <- fromServer{msg: []byte(long)}
	if got := host.next(t); got != `{"jsonrpc":"2.0","id":2,"result":"short"}` {
		t.Fatalf("the host got %s, want the replaced answer", got)
	}

	host.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow"}}`)
	written(t, up)
	go port.Answer(false, func() (answer, cancel []byte) {
		if !port.Settle([]byte("3")) {
			return nil, nil
		}
		return []byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-32001,"message":"gave up"}}`),
			[]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
	})
	if got := written(t, up); got != `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}` {
		t.Fatalf("the server got %s, want the cancel", got)
	}
	if got := host.next(t); got != `{"jsonrpc":"2.0","id":3,"error":{"code":-32001,"message":"gave up"}}` {
		t.Fatalf("the host got %s, want the policy's answer", got)
	}
	if port.Awaited(jsonlex.IDKey([]byte("3"))) {
		t.Error("the request answered by the policy is still awaited")
	}
	// Interception: the local answer and the timer's as the server's, and the
	// replaced answer as the server sent it (in any order: the policy's answers are
	// told from other goroutines).
	want := []string{`{"jsonrpc":"2.0","id":1,"result":{"local":true}}`, long, `{"jsonrpc":"2.0","id":3,"error":{"code":-32001,"message":"gave up"}}`}
	testutil.Eventually(t, "interception to see the three answers", func() bool { return len(ic.seen()) >= len(want) })
	got := ic.seen()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("interception saw %q, want %q", got, want)
	}
}
