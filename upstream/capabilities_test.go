package upstream

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"testing"
)

// TestCapabilitiesNameEveryInterface: each capability interface declared in
// capabilities.go and stream.go (but the parts a capability hands out) is a field of
// Capabilities of that type, so a capability added as an interface cannot be left out
// of the one value decorators pass on.
func TestCapabilitiesNameEveryInterface(t *testing.T) {
	var declared []string
	for _, file := range []string{"capabilities.go", "stream.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^type (\w+) interface`).FindAllSubmatch(src, -1) {
			declared = append(declared, string(m[1]))
		}
	}
	// What a capability hands out or is handed, not a capability of a Conn.
	parts := []string{"LinePart", "StreamHandler", "StreamSink"}
	ct := reflect.TypeFor[Capabilities]()
	for _, name := range declared {
		if slices.Contains(parts, name) {
			continue
		}
		f, ok := ct.FieldByName(name)
		if !ok || f.Type.Name() != name {
			t.Errorf("capability %s has no field %s %s in Capabilities", name, name, name)
		}
	}
	if len(declared) < 10 {
		t.Fatalf("found %d capability interfaces: the files moved?", len(declared))
	}
}

// TestEachConnSaysWhatItIs: what a Conn says it can do is itself (the relay calls
// the field, which must reach the Conn's own method), and a Process promises to copy
// what it is written (the relay lends it host messages on a pure pipe).
func TestEachConnSaysWhatItIs(t *testing.T) {
	p := &Process{}
	pc := p.Capabilities()
	for name, v := range map[string]any{"Batcher": pc.Batcher, "Terminator": pc.Terminator, "Exiter": pc.Exiter,
		"ExitDescriber": pc.ExitDescriber, "LexedReader": pc.LexedReader, "Streamer": pc.Streamer, "LineWriter": pc.LineWriter} {
		if v != any(p) {
			t.Errorf("Process's %s is %T, not the Process", name, v)
		}
	}
	if !pc.CopiesWrites {
		t.Error("Process does not say it copies what it is written")
	}
	n := &NoServer{}
	if nc := n.Capabilities(); nc.Exiter != any(n) || nc.Batcher != nil {
		t.Errorf("NoServer says %+v, want only its exit status", nc)
	}
	r := &remoteConn{}
	rc := r.Capabilities()
	for name, v := range map[string]any{"Batcher": rc.Batcher, "Terminator": rc.Terminator, "SessionIdentifier": rc.SessionIdentifier} {
		if v != any(r) {
			t.Errorf("remoteConn's %s is %T, not the remoteConn", name, v)
		}
	}
	// Holding and settling a replaced session are the session room's (package session), as
	// for a child: a remote connection is one session.
	if rc.Holder != nil || rc.Settler != nil {
		t.Errorf("remoteConn says it holds (%T) or settles (%T): that is revive's", rc.Holder, rc.Settler)
	}
}
