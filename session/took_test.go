package session

import (
	"strings"
	"testing"
	"time"
)

// TestReviveTookWithoutInitialized: a host that never sent notifications/initialized
// (nothing to restore after initialize) still has its session taken back by a server
// that accepts the replayed initialize: the revival is one, said once, with the
// server's facts (g.took was set only when something was sent after initialize, so
// this revival was never announced, nor counted).
func TestReviveTookWithoutInitialized(t *testing.T) {
	f := newFixture(t, fast(), []string{"--reply"}, nil)
	if err := f.write(initReq); err != nil {
		t.Fatal(err)
	}
	if a := f.next(); !strings.Contains(a, `"id":0,"result"`) {
		t.Fatalf("initialize answered %s", a)
	}
	f.kill()
	f.nextLost()
	if err := f.write(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); err != nil {
		t.Fatal(err)
	}
	if a := f.next(); a != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Fatalf("got %s", a)
	}
	select {
	case sf := <-f.facts:
		if sf.ProtocolVersion != "2025-06-18" {
			t.Fatalf("facts %+v", sf)
		}
	case <-time.After(deadline):
		t.Fatal("the recorder was not told of the revival")
	}
	// The ping's answer was read after the revival was announced (or not): any
	// further registration has been made by now.
	select {
	case sf := <-f.facts:
		t.Fatalf("the revival was registered a second time: %+v", sf)
	default:
	}
	if !strings.Contains(f.logs.String(), "revived the server") {
		t.Fatalf("the revival was never said:\n%s", f.logs)
	}
}
