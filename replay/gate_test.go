package replay

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/relay"
)

func isReady(g *Gate) bool {
	select {
	case <-g.Ready():
		return true
	default:
		return false
	}
}

// host feeds one host message through the gate as the relay does.
func host(g *Gate, msg string) {
	g.FromHost([]byte(msg), time.Now())
	g.Forwarded(time.Now())
}

func server(g *Gate, msg string) { g.FromUpstream([]byte(msg), time.Now()) }

const (
	initReq     = `{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}},"jsonrpc":"2.0","id":0}`
	initResult  = `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`
	initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

func TestGateSessionEra(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []func(*Gate)
		ready []bool // after each step
	}{
		{"in order", []func(*Gate){
			func(g *Gate) { host(g, initReq) },
			func(g *Gate) { server(g, initResult) },
			func(g *Gate) { host(g, initialized) },
		}, []bool{false, false, true}},
		{"initialized before the answer", []func(*Gate){
			func(g *Gate) { host(g, initReq) },
			func(g *Gate) { host(g, initialized) },
			func(g *Gate) { server(g, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`) },
			func(g *Gate) { server(g, initResult) },
		}, []bool{false, false, false, true}},
		{"an error answer, then a second initialize", []func(*Gate){
			func(g *Gate) { host(g, initReq) },
			func(g *Gate) {
				server(g, `{"jsonrpc":"2.0","id":0,"error":{"code":-32602,"message":"Unsupported protocol version"}}`)
			},
			func(g *Gate) { host(g, initialized) },
			func(g *Gate) { host(g, `{"jsonrpc":"2.0","id":"i\u0032","method":"initialize","params":{}}`) },
			func(g *Gate) { server(g, `{"jsonrpc":"2.0","id":"i2","result":{}}`) },
		}, []bool{false, false, false, false, true}},
		{"a ping before initialize", []func(*Gate){
			func(g *Gate) { host(g, `{"jsonrpc":"2.0","id":7,"method":"ping"}`) },
			func(g *Gate) { server(g, `{"jsonrpc":"2.0","id":7,"result":{}}`) },
			func(g *Gate) { host(g, initReq) },
			func(g *Gate) { server(g, initResult) },
			func(g *Gate) { host(g, initialized) },
		}, []bool{false, false, false, false, true}},
		{"a refused server/discover probe, then the session era", []func(*Gate){
			func(g *Gate) {
				host(g, `{"jsonrpc":"2.0","id":"probe","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
			},
			func(g *Gate) {
				server(g, `{"jsonrpc":"2.0","id":"probe","error":{"code":-32601,"message":"Method not found"}}`)
			},
			func(g *Gate) { host(g, initReq) },
			func(g *Gate) { server(g, initResult) },
			func(g *Gate) { host(g, initialized) },
		}, []bool{false, false, false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGate(nil)
			for i, step := range tc.steps {
				step(g)
				if got := isReady(g); got != tc.ready[i] {
					t.Fatalf("after step %d: ready %v, want %v", i+1, got, tc.ready[i])
				}
			}
			if m := g.Meta(); m != nil {
				t.Fatalf("session-era meta %s, want none", m)
			}
		})
	}
}

func TestGateStatelessEra(t *testing.T) {
	meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7,"io.modelcontextprotocol\/clientInfo":{"name":"v2-host"},"io.modelcontextprotocol/clientCapabilities":{}}`
	want := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol\/clientInfo":{"name":"v2-host"},"io.modelcontextprotocol/clientCapabilities":{}}`

	t.Run("first request", func(t *testing.T) {
		g := NewGate(nil)
		g.FromHost([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":`+meta+`}}`), time.Now())
		if isReady(g) {
			t.Fatal("ready before the request was handed to the upstream")
		}
		g.Forwarded(time.Now())
		if !isReady(g) {
			t.Fatal("not ready after the host's first stateless request")
		}
		if got := string(g.Meta()); got != want {
			t.Fatalf("meta %s, want %s", got, want)
		}
	})
	t.Run("server/discover", func(t *testing.T) {
		g := NewGate(nil)
		host(g, `{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":`+meta+`}}`)
		if isReady(g) {
			t.Fatal("ready before server/discover was answered")
		}
		server(g, `{"result":{"supportedVersions":["2026-07-28"]},"jsonrpc":"2.0","id":"server-discover-probe-1"}`)
		if !isReady(g) {
			t.Fatal("not ready after server/discover was answered")
		}
		if got := string(g.Meta()); got != want {
			t.Fatalf("meta %s, want %s", got, want)
		}
	})
}

// recordingInterceptor notes which methods the gate passed on.
type recordingInterceptor struct{ calls []string }

func (r *recordingInterceptor) FromHost(msg []byte, _ time.Time) []byte {
	r.calls = append(r.calls, "FromHost")
	return append([]byte(nil), msg...)
}
func (r *recordingInterceptor) Forwarded(time.Time) { r.calls = append(r.calls, "Forwarded") }
func (r *recordingInterceptor) FromProxy(msg []byte, own relay.Own, _ time.Time) []byte {
	r.calls = append(r.calls, "FromProxy:"+own.Origin)
	return msg
}
func (r *recordingInterceptor) FromUpstream([]byte, time.Time) {
	r.calls = append(r.calls, "FromUpstream")
}
func (r *recordingInterceptor) ToProxy([]byte, time.Time) { r.calls = append(r.calls, "ToProxy") }
func (r *recordingInterceptor) UpstreamLost(time.Time)    { r.calls = append(r.calls, "UpstreamLost") }

func (r *recordingInterceptor) Capabilities() relay.Capabilities { return relay.Capabilities{} }

// TestGatePassesEverythingOn: the gate is invisible to the Interceptor it wraps, and
// once ready it costs no allocation on the host's path.
func TestGatePassesEverythingOn(t *testing.T) {
	inner := &recordingInterceptor{}
	g := NewGate(inner)
	lost := g.lost()
	host(g, initReq)
	server(g, initResult)
	host(g, initialized)
	g.FromProxy([]byte(`{}`), relay.Own{Origin: "d"}, time.Now())
	g.ToProxy([]byte(`{}`), time.Now())
	g.UpstreamLost(time.Now())
	want := []string{"FromHost", "Forwarded", "FromUpstream", "FromHost", "Forwarded", "FromProxy:d", "ToProxy", "UpstreamLost"}
	if len(inner.calls) != len(want) {
		t.Fatalf("inner saw %v, want %v", inner.calls, want)
	}
	for i := range want {
		if inner.calls[i] != want[i] {
			t.Fatalf("inner saw %v, want %v", inner.calls, want)
		}
	}
	select {
	case <-lost:
	default:
		t.Fatal("the loss was not signalled")
	}
	if !isReady(g) {
		t.Fatal("a lost upstream closed the gate: a replacement re-handshakes before it takes writes")
	}

	bare := NewGate(nil)
	host(bare, initReq)
	server(bare, initResult)
	host(bare, initialized)
	msg := []byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`)
	if n := testing.AllocsPerRun(100, func() {
		bare.FromHost(msg, time.Time{})
		bare.Forwarded(time.Time{})
		bare.FromUpstream(msg, time.Time{})
	}); n != 0 {
		t.Fatalf("%v allocations per message once ready, want 0", n)
	}
}

// interceptorDecorators are the values standing in front of an interceptor, made
// around inner as the proxy makes them.
var interceptorDecorators = map[string]func(inner relay.Interceptor) relay.Interceptor{
	"replay.Gate": func(inner relay.Interceptor) relay.Interceptor { return NewGate(inner) },
}

// plainInterceptor has none of the capabilities.
type plainInterceptor struct{}

func (plainInterceptor) FromHost(msg []byte, _ time.Time) []byte               { return msg }
func (plainInterceptor) Forwarded(time.Time)                                   {}
func (plainInterceptor) FromProxy(msg []byte, _ relay.Own, _ time.Time) []byte { return msg }
func (plainInterceptor) FromUpstream([]byte, time.Time)                        {}
func (plainInterceptor) ToProxy([]byte, time.Time)                             {}
func (plainInterceptor) UpstreamLost(time.Time)                                {}
func (plainInterceptor) Capabilities() relay.Capabilities                      { return relay.Capabilities{} }

// allInterceptor has every capability there is, all set by reflection.
type allInterceptor struct{ plainInterceptor }

func (allInterceptor) Capabilities() relay.Capabilities {
	ic := intercept.New(intercept.Options{}).Capabilities()
	ic.Passive, ic.KeepsBriefly = true, true
	return ic
}

// capsMissing names each capability inner has and outer has not: a field of
// relay.Capabilities set (or true) in inner's and nil (or false) in outer's. It walks
// the struct, so a capability added to it is checked with no change here.
func capsMissing(inner, outer relay.Capabilities) []string {
	iv, ov := reflect.ValueOf(inner), reflect.ValueOf(outer)
	var names []string
	for i := range iv.NumField() {
		if !iv.Field(i).IsZero() && ov.Field(i).IsZero() {
			names = append(names, iv.Type().Field(i).Name)
		}
	}
	return names
}

// TestInterceptorDecoratorsExposeWhatTheirInnerExposes: the relay learns what
// interception can do from the Capabilities of the value it is given, so a decorator
// must expose every one its inner value has. replay.Gate did not expose
// relay.KeyedInterceptor when capabilities were optional interfaces: with a recorder,
// long host calls were read whole (+129 MB for a 64 MB one;
// TestLongHostCallStreamsWithARecorder). And it must not claim Keyed for an inner
// value without it, which needs its calls whole.
func TestInterceptorDecoratorsExposeWhatTheirInnerExposes(t *testing.T) {
	all := allInterceptor{}.Capabilities()
	if got, want := len(capsMissing(all, relay.Capabilities{})), reflect.TypeFor[relay.Capabilities]().NumField(); got != want {
		t.Fatalf("the checker sees %d capabilities of %d: allInterceptor lacks one, or capsMissing skips it", got, want)
	}
	inners := map[string]relay.Interceptor{
		"intercept.Interceptor": intercept.New(intercept.Options{}),
		"plain":                 plainInterceptor{},
		"all":                   allInterceptor{},
	}
	for dname, decorate := range interceptorDecorators {
		for iname, inner := range inners {
			d := decorate(inner).Capabilities()
			if m := capsMissing(inner.Capabilities(), d); len(m) > 0 {
				t.Errorf("%s around %s does not expose %v, which its inner value does", dname, iname, m)
			}
			if d.Keyed != nil && inner.Capabilities().Keyed == nil {
				t.Errorf("%s around %s claims Keyed, which its inner value has not: the relay would stream its calls past it", dname, iname)
			}
		}
	}
}

// TestRelayCapabilitiesNameEveryInterface: every interface of the relay's but the
// seam itself, what it hands out and the policy hooks' cutter (AnswerCut, a Hooks
// value's, not interception's) is a field of relay.Capabilities, so a capability
// added as an interface is passed on by decorators (and checked above).
func TestRelayCapabilitiesNameEveryInterface(t *testing.T) {
	notCapabilities := []string{"Interceptor", "StreamedArgs", "StreamedResult", "AnswerCut"}
	fields := map[string]bool{}
	ct := reflect.TypeFor[relay.Capabilities]()
	for i := range ct.NumField() {
		fields[ct.Field(i).Type.Name()] = true
	}
	files, err := filepath.Glob("../relay/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.IsExported() {
				if _, ok := ts.Type.(*ast.InterfaceType); ok {
					seen++
					if !fields[ts.Name.Name] && !slices.Contains(notCapabilities, ts.Name.Name) {
						t.Errorf("relay.%s (%s) is not a field of relay.Capabilities", ts.Name.Name, filepath.Base(f))
					}
				}
			}
			return true
		})
	}
	if seen < len(notCapabilities)+5 {
		t.Fatalf("found %d interfaces in relay: the files moved?", seen)
	}
}
