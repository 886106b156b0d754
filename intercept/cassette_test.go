package intercept

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/relay"
)

// memCassette records what bookkeeping tells a cassette, copying (the bytes are views).
type memCassette struct {
	mu     sync.Mutex
	reqs   []string
	res    []string
	calls  []cassette.Recorded
	missed int
}

func (m *memCassette) Missed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.missed++
}

func (m *memCassette) HostRequest(method string, params []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, method+" "+string(params))
}

func (m *memCassette) ServerResult(method string, result []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.res = append(m.res, method+" "+string(result))
}

func (m *memCassette) Call(r cassette.Recorded) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r.Arguments, r.Result, r.Error = bytes.Clone(r.Arguments), bytes.Clone(r.Result), bytes.Clone(r.Error)
	m.calls = append(m.calls, r)
}

func TestCassetteGetsRawCalls(t *testing.T) {
	for _, lexed := range []bool{false, true} {
		mc := &memCassette{}
		s := newSessionWith(t, Options{Cassette: mc})
		s.lexed = lexed
		s.host(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`)
		s.up(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s"}}}`)
		s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		s.up(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"t","inputSchema":{}}]}}`)
		// The secret stays (a cassette is raw); the correlation key goes; the bytes are
		// the host's.
		s.host(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":{"z": 1,"_bir_call_id":"c1","password":"hunter2"}}}`)
		s.host(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{"q":"x"}}}`)
		s.up(`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"no"}}`)
		s.up(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"a\u00e9"}], "isError":true}}`)
		s.sink.wait(t, 2)
		s.close()
		if len(mc.calls) != 2 {
			t.Fatalf("%d calls", len(mc.calls))
		}
		c := mc.calls[1]
		if c.Tool != "t" || string(c.Arguments) != `{"z": 1,"password":"hunter2"}` || c.Outcome != "tool_error" ||
			string(c.Result) != `{"content":[{"type":"text","text":"a\u00e9"}], "isError":true}` || c.Duration <= 0 || c.StartedAt.IsZero() {
			t.Errorf("call %+v %s %s", c, c.Arguments, c.Result)
		}
		if c := mc.calls[0]; c.Outcome != "rpc_error" || string(c.Error) != `{"code":-32602,"message":"no"}` {
			t.Errorf("call %+v", c)
		}
		if !strings.HasPrefix(mc.reqs[0], `initialize {"protocolVersion"`) || !strings.HasPrefix(mc.res[0], "initialize ") || !strings.HasPrefix(mc.res[1], `tools/list {"tools"`) {
			t.Errorf("handshake %q %q", mc.reqs, mc.res)
		}
	}
}

func TestCassetteRedactedAndOwnCalls(t *testing.T) {
	mc := &memCassette{}
	s := newSessionWith(t, Options{Cassette: mc, CassetteRedact: true})
	s.host(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":{"password":"hunter2","q":1}}}`)
	s.host(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{"q":1}}}`)
	// A request of the proxy's own (a replay dispatch) is not the host's: not recorded.
	s.ic.FromProxy([]byte(`{"jsonrpc":"2.0","id":"bir:p:1","method":"tools/call","params":{"name":"t","arguments":{}}}`), relay.Own{Origin: "d1"}, s.tick())
	s.ic.ToProxy([]byte(`{"jsonrpc":"2.0","id":"bir:p:1","result":{}}`), s.tick())
	s.up(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	s.up(`{"jsonrpc":"2.0","id":3,"result":{}}`)
	s.sink.wait(t, 3)
	s.close()
	if len(mc.calls) != 2 {
		t.Fatalf("%d calls: %+v", len(mc.calls), mc.calls)
	}
	if c := mc.calls[0]; !c.Redacted || strings.Join(c.RedactedKeys, ",") != "$.password" || strings.Contains(string(c.Arguments), "hunter2") {
		t.Errorf("redacted call %+v %s", c, c.Arguments)
	}
	if c := mc.calls[1]; c.Redacted || string(c.Arguments) != `{"q":1}` {
		t.Errorf("clean call %+v %s", c, c.Arguments)
	}
}

// TestCassetteCountsShedAnswers: an answer bookkeeping could not keep (its queue over
// budget: a 100 MB answer among others) was left out of the cassette without a word,
// not even counted among the calls dropped. It is counted now (Missed), and the calls
// whose answers were kept are recorded; 2 and 8 calls in flight.
func TestCassetteCountsShedAnswers(t *testing.T) {
	for _, n := range []int{2, 8} {
		mc := &memCassette{}
		s := newSessionWith(t, Options{Cassette: mc, QueueBytes: 4096})
		for i := range n {
			s.host(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"tools/call","params":{"name":"t","arguments":{"i":` + strconv.Itoa(i) + `}}}`)
		}
		for i := range n {
			text := "small"
			if i == n/2 {
				text = strings.Repeat("x", 8192) // past the queue's budget by itself: shed
			}
			s.up(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`)
		}
		s.sink.wait(t, n)
		s.close()
		mc.mu.Lock()
		if len(mc.calls) != n-1 || mc.missed != 1 {
			t.Errorf("%d in flight: %d calls recorded, %d missed; want %d and 1", n, len(mc.calls), mc.missed, n-1)
		}
		mc.mu.Unlock()
	}
}
