package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// ids is a caller's id namespace for Rehandshake.
func ids(prefix string) func() []byte {
	n := 0
	return func() []byte {
		n++
		return []byte(`"` + prefix + strconv.Itoa(n) + `"`)
	}
}

func hostSession(s *Setup) {
	// Key order and spacing of the host's own bytes (jsonrpc last, as the TypeScript
	// SDK writes it), which the replay must keep.
	s.FromHost([]byte(`{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"h","version":"1"}} ,"jsonrpc":"2.0","id":0}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"srv","version":"2"}}}`))
	s.FromHost([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
}

func TestSetupRehandshakeSession(t *testing.T) {
	s := NewSetup()
	hostSession(s)
	if s.Era() != EraSession || s.ProtocolVersion() != "2025-11-25" || !s.ToolsListChanged() {
		t.Fatalf("era %v version %q listChanged %v", s.Era(), s.ProtocolVersion(), s.ToolsListChanged())
	}
	// Two levels: the last answered one is restored.
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}`))
	// One refused level does not replace the live one.
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"bogus"}}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad level"}}`))
	// Three subscriptions (one in a batch, one with an escaped method name), one
	// undone, one refused.
	s.FromHost([]byte(`[{"jsonrpc":"2.0","id":"a","method":"resources/subscribe","params":{"uri":"file:///a"}},{"jsonrpc":"2.0","id":"b","method":"resources/\u0073ubscribe","params":{"uri":"file:///b"}}]`))
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":"c","method":"resources/subscribe","params":{"uri":"file:///c"}}`))
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":"x","method":"resources/subscribe","params":{"uri":"file:///refused"}}`))
	s.FromServer([]byte(`[{"jsonrpc":"2.0","id":"a","result":{}},{"jsonrpc":"2.0","id":"b","result":{}}]`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":"c","result":{}}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":"x","error":{"code":-32002,"message":"no such resource"}}`))
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":"u","method":"resources/unsubscribe","params":{"uri":"file:///b"}}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":"u","result":{}}`))
	// A subscribe in flight when the server goes away was answered with an error by
	// the relay: it is not live.
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":"lost","method":"resources/subscribe","params":{"uri":"file:///lost"}}`))
	s.Lost()
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":"lost","result":{}}`))

	rh := s.Rehandshake(ids("bir:p:r"))
	wantInit := `{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"h","version":"1"}} ,"jsonrpc":"2.0","id":"bir:p:r1"}`
	if string(rh.Initialize) != wantInit || string(rh.InitializeID) != `"bir:p:r1"` {
		t.Fatalf("Initialize %s id %s\nwant %s", rh.Initialize, rh.InitializeID, wantInit)
	}
	want := []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"bir:p:r2","method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","id":"bir:p:r3","method":"resources/subscribe","params":{"uri":"file:///a"}}`,
		`{"jsonrpc":"2.0","id":"bir:p:r4","method":"resources/subscribe","params":{"uri":"file:///c"}}`,
	}
	if got := strs(rh.After); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("After:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := strings.Join(strs(rh.AfterIDs), " "); got != `"bir:p:r2" "bir:p:r3" "bir:p:r4"` {
		t.Fatalf("AfterIDs %s", got)
	}

	if _, err := s.CheckInitialize([]byte(`{"jsonrpc":"2.0","id":"bir:p:r1","result":{"protocolVersion":"2025-11-25","capabilities":{}}}`)); err != nil {
		t.Fatalf("same version: %v", err)
	}
	_, err := s.CheckInitialize([]byte(`{"jsonrpc":"2.0","id":"bir:p:r1","result":{"protocolVersion":"2025-06-18","capabilities":{}}}`))
	var vm *VersionMismatchError
	if !errors.As(err, &vm) || vm.Negotiated != "2025-11-25" || vm.Offered != "2025-06-18" {
		t.Fatalf("other version: %v", err)
	}
	if _, err := s.CheckInitialize([]byte(`{"jsonrpc":"2.0","id":"bir:p:r1","error":{"code":-32603,"message":"boom"}}`)); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("error answer: %v", err)
	}
}

func strs(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

func TestSetupNothingToReplay(t *testing.T) {
	// A host whose initialize was never answered (the server died first) has no
	// session: its next initialize goes to the new server as it is.
	s := NewSetup()
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`))
	s.Lost()
	if rh := s.Rehandshake(ids("r")); rh.Initialize != nil || rh.After != nil || s.Era() != EraUnknown {
		t.Fatalf("replay without a session: %+v era %v", rh, s.Era())
	}
	// An initialize the server refused is no session either.
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unsupported"}}`))
	if rh := s.Rehandshake(ids("r")); rh.Initialize != nil {
		t.Fatalf("replayed a refused initialize: %s", rh.Initialize)
	}
}

func TestSetupStateless(t *testing.T) {
	for _, tc := range []struct{ name, req, answer string }{
		{"meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, ``},
		{"discover", `{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{}}`, `{"jsonrpc":"2.0","id":"server-discover-probe-1","result":{"supportedVersions":["2026-07-28"]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSetup()
			s.FromHost([]byte(tc.req))
			if tc.answer != "" {
				s.FromServer([]byte(tc.answer))
			}
			if s.Era() != EraStateless {
				t.Fatalf("era %v, want stateless", s.Era())
			}
			if rh := s.Rehandshake(ids("r")); rh.Initialize != nil || rh.After != nil {
				t.Fatalf("stateless era replays nothing: %+v", rh)
			}
		})
	}
	// A session-era server answers server/discover with -32601; the host then
	// initializes: the session era.
	s := NewSetup()
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":"p","method":"server/discover","params":{}}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":"p","error":{"code":-32601,"message":"Method not found"}}`))
	if s.Era() != EraUnknown {
		t.Fatalf("a refused discover says nothing: era %v", s.Era())
	}
	hostSession(s)
	if s.Era() != EraSession {
		t.Fatalf("era %v, want session", s.Era())
	}
}

func TestSetupTools(t *testing.T) {
	s := NewSetup()
	hostSession(s)
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":5,"result":{"tools":[{"name":"a"}],"nextCursor":"2"}}`))
	// A later page is not the list's head.
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"cursor":"2"}}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":6,"result":{"tools":[{"name":"b"}]}}`))
	if got := string(s.Tools()); got != `[{"name":"a"}]` {
		t.Fatalf("Tools %s", got)
	}
}

// TestSetupIgnoresLargeMessages: a 1 MB tools/call is not lexed on the host's path.
func TestSetupIgnoresLargeMessages(t *testing.T) {
	s := NewSetup()
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"` + strings.Repeat("x", setupScanMax) + `"}}`))
	if s.waiting.Load() != 0 {
		t.Fatal("a large message was looked at")
	}
}

// TestSetupFromServerIdle: with nothing awaited, FromServer reads no message (it
// runs on every message the server sends).
func TestSetupFromServerIdle(t *testing.T) {
	s := NewSetup()
	hostSession(s)
	msg := []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"other"}}`)
	if n := testing.AllocsPerRun(100, func() { s.FromServer(msg) }); n != 0 {
		t.Fatalf("FromServer allocates %v", n)
	}
	if s.ProtocolVersion() != "2025-11-25" {
		t.Fatal("an answer nobody awaited changed the session")
	}
}

func TestWithID(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"id":1,"method":"m"}`, `{"id":"N","method":"m"}`},
		{` { "method" : "m" , "id" : 9007199254740993 } `, ` { "method" : "m" , "id" : "N" } `},
		{`{"id":1,"x":{"id":2},"\u0069d":3}`, `{"id":"N","x":{"id":2},"\u0069d":"N"}`},
	} {
		if got := string(withID([]byte(tc.in), []byte(`"N"`))); got != tc.want {
			t.Errorf("withID(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// FuzzSetup: whatever the host and server send, Setup never panics, and every message
// of a rehandshake built from valid JSON is valid JSON with the caller's ids.
func FuzzSetup(f *testing.F) {
	f.Add([]byte(`{"method":"initialize","params":{},"jsonrpc":"2.0","id":0}`), []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"x"}}`), []byte(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"u"}}`))
	f.Add([]byte(`[{"id":"a","method":"logging/setLevel","params":{"level":"info"}}]`), []byte(`[{"id":"a","result":{}}]`), []byte(`{"method":"notifications/initialized"}`))
	f.Add([]byte(`{"id":{"x":1},"id":2,"method":"initialize"}`), []byte(`{"id":2,"result":{}}`), []byte(`{`))
	// Nesting-depth seed: host and server bytes are read by nothing recursive.
	deep := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + strings.Repeat("[", 1<<20) + `}`)
	f.Add(deep, []byte(`{"jsonrpc":"2.0","id":1,"result":`+strings.Repeat(`{"a":`, 1<<18)+`}`), deep)
	f.Fuzz(func(t *testing.T, host, server, more []byte) {
		s := NewSetup()
		s.FromHost(host)
		s.FromServer(server)
		s.FromHost(more)
		s.FromServer(server)
		rh := s.Rehandshake(ids("bir:f:"))
		_, _ = s.CheckInitialize(server)
		_ = s.Era()
		_ = s.ToolsListChanged()
		valid := json.Valid(host) && json.Valid(more)
		for _, m := range append([][]byte{rh.Initialize}, rh.After...) {
			if m == nil {
				continue
			}
			if valid && !json.Valid(m) {
				t.Fatalf("rehandshake message is not JSON: %s", m)
			}
		}
		if rh.Initialize != nil && !strings.Contains(string(rh.Initialize), `"bir:f:1"`) {
			t.Fatalf("initialize without the caller's id: %s", rh.Initialize)
		}
	})
}

// BenchmarkSetupFromHost is what Setup costs each host message on the relay's path.
func BenchmarkSetupFromHost(b *testing.B) {
	s := NewSetup()
	hostSession(s)
	msg := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}`)
	for b.Loop() {
		s.FromHost(msg)
	}
}

// TestToolNamesTakeTheLastDuplicate: the one reading of a tools/list's names, which
// interception and revive share: the last of duplicate members wins, as in the host's
// JSON.parse; elements that are not tools name none; a broken array names none.
func TestToolNamesTakeTheLastDuplicate(t *testing.T) {
	for in, want := range map[string]string{
		`[{"name":"first","name":"last"},{"name":"b"}]`: "last,b",
		`[{"name":1},"x",{"title":"t"},{"name":"ok"}]`:  "ok",
		`[{"name":"a"},`: "",
		`[]`:             "",
	} {
		if got := strings.Join(ToolNames([]byte(in)), ","); got != want {
			t.Errorf("ToolNames(%s) = %q, want %q", in, got, want)
		}
	}
}

// FuzzSetupLexed: hostMethodOf, one switch, says of any method value what KeyIs of
// each name in turn says (hostMethodSpelled); and FromHostLexed, which skips the
// objects it would not act on without building their Fields, ends where fromHost of
// every object of the Line does (what FromHostLexed was before it skipped).
func FuzzSetupLexed(f *testing.F) {
	f.Add([]byte(`"initialize"`), []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`), []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"x"}}`))
	f.Add([]byte(`"\u0069nitialize"`), []byte(`{"jsonrpc":"2.0","id":"a","method":"tools/\u006cist","params":{}}`), []byte(`{"jsonrpc":"2.0","id":"a","result":{"tools":[]}}`))
	f.Add([]byte(`{initialize}`), []byte(`[{"id":2,"method":"logging/setLevel","params":{"level":"x"}},{"method":"notifications/initialized"}]`), []byte(`[{"id":2,"result":{}}]`))
	f.Add([]byte(`"tools/call"`), []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}}`), []byte(`{}`))
	f.Add([]byte(`"server/discover"`), []byte(`{"id":4,"method":"server\/discover"}{"id":5,"method":"resources/subscribe","params":{"uri":"u"}}`), []byte(`{"id":4,"result":{}}`))
	f.Fuzz(func(t *testing.T, method, host, server []byte) {
		if got, want := hostMethodOf(method), hostMethodSpelled(method); got != want {
			t.Fatalf("hostMethodOf(%q) = %d, KeyIs says %d", method, got, want)
		}
		raw, lexed := NewSetup(), NewSetup()
		var lx jsonlex.Line
		for _, s := range []*Setup{raw, lexed} {
			for _, m := range [][]byte{host, server, host} {
				lx.Lex(m)
				if s == lexed {
					s.FromHostLexed(m, &lx)
				} else if len(m) <= setupScanMax {
					for _, o := range lx.RPC() {
						s.fromHost(o.Bytes(m), o.Fields(m))
					}
				}
			}
			s.FromServer(server)
		}
		if raw.Era() != lexed.Era() || raw.waiting.Load() != lexed.waiting.Load() || raw.ProtocolVersion() != lexed.ProtocolVersion() ||
			!bytes.Equal(raw.Tools(), lexed.Tools()) {
			t.Fatalf("lexed: era %v, %d waiting, version %q, tools %q; raw: %v, %d, %q, %q",
				lexed.Era(), lexed.waiting.Load(), lexed.ProtocolVersion(), lexed.Tools(), raw.Era(), raw.waiting.Load(), raw.ProtocolVersion(), raw.Tools())
		}
		a, b := raw.Rehandshake(ids("bir:f:")), lexed.Rehandshake(ids("bir:f:"))
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("rehandshake from the lexed host: %q, from the raw: %q", b, a)
		}
	})
}

// TestSetupForgetsWhatIsNeverAnswered: a setup request the server never answers (a
// host that cancelled it, a server that ignores it) must not be held for the rest of
// the session: each held subscribe is a copy of up to 64 KiB, and while anything is
// held FromServer reads every message the server sends.
func TestSetupForgetsWhatIsNeverAnswered(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		s := NewSetup()
		hostSession(s)
		s.FromHost([]byte(`{"jsonrpc":"2.0","id":"sub-7","method":"resources/subscribe","params":{"uri":"file:///a"}}`))
		s.FromHost([]byte(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`))
		if !s.Awaiting() {
			t.Fatal("the checker is wrong: nothing awaited after two setup requests")
		}
		s.FromHost([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sub-7","reason":"timeout"}}`))
		// Lexed as the relay does, and spelt with an escape and as 8.0 (the same id).
		msg := []byte(`{"jsonrpc":"2.0","method":"notifications/cancel\u006ced","params":{"reason":"x","requestId":8.0}}`)
		var lx jsonlex.Line
		lx.Lex(msg)
		s.FromHostLexed(msg, &lx)
		if s.Awaiting() {
			t.Fatalf("still awaiting %d cancelled requests", s.waiting.Load())
		}
		// A late answer to a cancelled subscribe sets nothing up: the host gave up on it.
		s.FromServer([]byte(`{"jsonrpc":"2.0","id":"sub-7","result":{}}`))
		if len(s.subs) != 0 {
			t.Fatalf("a cancelled subscribe was kept: %q", s.subs)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		s := NewSetup()
		hostSession(s)
		uri := strings.Repeat("u", 60<<10)
		for i := range 5000 {
			s.FromHost([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`))
		}
		s.mu.Lock()
		n, held := len(s.pending), 0
		for _, a := range s.pending {
			held += len(a.msg) + len(a.uri)
		}
		s.mu.Unlock()
		if n > maxSetupAwaited || n != int(s.waiting.Load()) {
			t.Fatalf("%d requests held (waiting says %d), at most %d wanted", n, s.waiting.Load(), maxSetupAwaited)
		}
		if held > 32<<20 {
			t.Fatalf("%d MiB held for unanswered requests", held>>20)
		}
		// The newest are the ones kept: the server answers the last one.
		s.FromServer([]byte(`{"jsonrpc":"2.0","id":4999,"result":{}}`))
		if len(s.subs) != 1 {
			t.Fatalf("the newest subscribe was not kept: %d subscriptions", len(s.subs))
		}
	})
}
