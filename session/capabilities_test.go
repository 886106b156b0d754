package session

import (
	"reflect"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/upstream"
)

// missing names each capability inner has and outer has not: a field of
// upstream.Capabilities set (or true) in inner's and nil (or false) in outer's. It
// walks the struct, so a capability added to it is checked with no change here.
func missing(inner, outer upstream.Capabilities) []string {
	iv, ov := reflect.ValueOf(inner), reflect.ValueOf(outer)
	var names []string
	for i := range iv.NumField() {
		if !iv.Field(i).IsZero() && ov.Field(i).IsZero() {
			names = append(names, iv.Type().Field(i).Name)
		}
	}
	return names
}

// TestMissingSeesEveryField checks the checker: with everything set inside and
// nothing outside, each field of upstream.Capabilities is named.
func TestMissingSeesEveryField(t *testing.T) {
	all := allCaps{}.Capabilities()
	if got, want := len(missing(all, upstream.Capabilities{})), reflect.TypeFor[upstream.Capabilities]().NumField(); got != want {
		t.Fatalf("missing names %d capabilities of %d: allCaps lacks one, or missing skips it", got, want)
	}
}

// TestReviveKeepsCapabilities: session.Conn, the decorator around every stdio server's
// Conn, has every capability the Conn it wraps has: one it dropped would silently send
// the relay down a slower path (a server's every line lexed twice) or lose a stop.
func TestReviveKeepsCapabilities(t *testing.T) {
	f := newFixture(t, fast(), []string{"--reply"}, nil)
	inner := f.c.last.Load().conn
	if _, ok := inner.(*upstream.Process); !ok {
		t.Fatalf("the fixture's server is a %T, want an *upstream.Process", inner)
	}
	if m := missing(inner.Capabilities(), f.c.Capabilities()); len(m) > 0 {
		t.Errorf("the server's Conn has %v; session.Conn around it has not", m)
	}
	caps := f.c.Capabilities()
	for name, has := range map[string]bool{"Holder": caps.Holder != nil, "LexedWriter": caps.LexedWriter != nil, "Settler": caps.Settler != nil} {
		if !has {
			t.Errorf("session.Conn is not a %s", name)
		}
	}
}

// TestReviveKeepsEveryCapability: around a Conn that has every capability there is,
// session.Conn has every one too.
func TestReviveKeepsEveryCapability(t *testing.T) {
	c := New(allCaps{&upstream.NoServer{Reason: "a stand-in"}}, Options{Name: "all"})
	defer c.Close()
	if m := missing(allCaps{}.Capabilities(), c.Capabilities()); len(m) > 0 {
		t.Errorf("around a Conn with every capability, session.Conn lacks %v", m)
	}
	if got := c.Capabilities().SessionIdentifier.SessionID(); got != "s-1" {
		t.Errorf("session id through session.Conn: %q, want the server's %q", got, "s-1")
	}
}

// allCaps is a Conn with every capability (those it does not implement itself are
// stand-ins that are never called here).
type allCaps struct{ *upstream.NoServer }

func (allCaps) SessionID() string { return "s-1" }

func (a allCaps) Capabilities() upstream.Capabilities {
	p := &upstream.Process{}
	return upstream.Capabilities{
		Batcher: p, Terminator: p, Exiter: p, ExitDescriber: p, Settler: stubSettler{},
		Holder: stubHolder{}, LexedWriter: stubLexedWriter{}, LexedReader: p,
		SessionIdentifier: a, Streamer: p, LineWriter: p, CopiesWrites: true,
	}
}

type stubSettler struct{}

func (stubSettler) Settled() {}

type stubHolder struct{}

func (stubHolder) Held() [][]byte { return nil }

type stubLexedWriter struct{}

func (stubLexedWriter) WriteLexed([]byte, *jsonlex.Line, bool) error { return nil }
