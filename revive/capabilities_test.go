package revive

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"testing"

	"github.com/bir-dev/bir-proxy/upstream"
)

// capabilities is every optional interface of upstream/capabilities.go, as a check.
var capabilities = map[string]func(any) bool{
	"Batcher":       func(x any) bool { _, ok := x.(upstream.Batcher); return ok },
	"Terminator":    func(x any) bool { _, ok := x.(upstream.Terminator); return ok },
	"Exiter":        func(x any) bool { _, ok := x.(upstream.Exiter); return ok },
	"Settler":       func(x any) bool { _, ok := x.(upstream.Settler); return ok },
	"ExitDescriber": func(x any) bool { _, ok := x.(upstream.ExitDescriber); return ok },
	"Holder":        func(x any) bool { _, ok := x.(upstream.Holder); return ok },
	"LexedReader":   func(x any) bool { _, ok := x.(upstream.LexedReader); return ok },
	"LexedWriter":   func(x any) bool { _, ok := x.(upstream.LexedWriter); return ok },
	// No stdio Conn has it: revive never wraps one that does.
	"SessionIdentifier": func(x any) bool { _, ok := x.(upstream.SessionIdentifier); return ok },
}

// TestCapabilityListIsWhole: the list above is every interface capabilities.go
// declares, so a capability added there is checked here too.
func TestCapabilityListIsWhole(t *testing.T) {
	src, err := os.ReadFile("../upstream/capabilities.go")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, m := range regexp.MustCompile(`(?m)^type (\w+) interface`).FindAllSubmatch(src, -1) {
		declared = append(declared, string(m[1]))
	}
	var listed []string
	for name := range capabilities {
		listed = append(listed, name)
	}
	sort.Strings(declared)
	sort.Strings(listed)
	if len(declared) == 0 || !slices.Equal(declared, listed) {
		t.Fatalf("capabilities.go declares %v; this test checks %v", declared, listed)
	}
}

// TestReviveKeepsCapabilities: revive.Conn, the decorator around every stdio server's
// Conn, has every capability the Conn it wraps has: one it dropped would silently send
// the relay down a slower path (a server's every line lexed twice) or lose a stop.
func TestReviveKeepsCapabilities(t *testing.T) {
	f := newFixture(t, fast(), []string{"--reply"}, nil)
	inner := f.c.last.Load().conn
	if _, ok := inner.(*upstream.Process); !ok {
		t.Fatalf("the fixture's server is a %T, want an *upstream.Process", inner)
	}
	for name, has := range capabilities {
		if has(inner) && !has(f.c) {
			t.Errorf("the server's Conn is a %s; revive.Conn around it is not", name)
		}
	}
	for _, name := range []string{"Holder", "LexedWriter", "Settler"} {
		if !capabilities[name](f.c) {
			t.Errorf("revive.Conn is not a %s", name)
		}
	}
}
