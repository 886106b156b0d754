package session

import (
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/upstream"
)

// holdFixture is a Conn whose reader stops at each ReplacedError until the test lets
// it settle, as a relay busy answering the lost requests would: writes in between
// meet the Conn between two servers.
type holdFixture struct {
	*fixture
	settle chan struct{}
	undel  chan *upstream.UndeliveredError
}

func newHoldFixture(t *testing.T, p Policy, first, then []string) *holdFixture {
	h := &holdFixture{settle: make(chan struct{}), undel: make(chan *upstream.UndeliveredError, 4)}
	h.fixture = newFixtureReader(t, p, first, then, func(f *fixture, err error) bool {
		if re, ok := upstream.IsReplaced(err); ok {
			f.lost <- re.Reason
			<-h.settle
			f.c.Settled()
			return true
		}
		if ue, ok := upstream.IsUndelivered(err); ok {
			h.undel <- ue
			return true
		}
		return false
	})
	return h
}

// TestReviveHoldsWritesBetweenServers: what the host writes after its server died and
// before the next one is up is neither failed nor lost: it is held, said to be held
// (so the relay does not answer it as the dead server's), and the next server gets
// it after its handshake, in order.
func TestReviveHoldsWritesBetweenServers(t *testing.T) {
	h := newHoldFixture(t, fast(), []string{"--reply"}, nil)
	h.session()
	h.kill()
	h.nextLost()
	for _, id := range []string{"7", "8"} {
		if err := h.write(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`); err != nil {
			t.Fatalf("a write between two servers failed: %v", err)
		}
	}
	if held := h.c.Held(); len(held) != 2 || !strings.Contains(string(held[0]), `"id":7`) {
		t.Fatalf("Held() = %q, want the two pings", held)
	}
	close(h.settle)
	for _, id := range []string{"7", "8"} {
		if a := h.next(); !strings.Contains(a, `"id":`+id+`,"result"`) {
			t.Fatalf("want the answer to %s from the next server, got %s", id, a)
		}
	}
	if held := h.c.Held(); len(held) != 0 {
		t.Fatalf("still held after the next server answered: %q", held)
	}
}

// TestReviveHeldWritesAreBounded: when no server comes back within Policy.Wait, the
// held messages come back from Read, for the reader to answer: nothing waits forever.
func TestReviveHeldWritesAreBounded(t *testing.T) {
	p := fast()
	p.Wait = 100 * time.Millisecond
	h := newHoldFixture(t, p, []string{"--reply"}, []string{"--exit-now", "--exit-code", "3"})
	h.session()
	h.kill()
	h.nextLost()
	if err := h.write(`{"jsonrpc":"2.0","id":9,"method":"ping"}`); err != nil {
		t.Fatalf("a write between two servers failed: %v", err)
	}
	began := time.Now()
	close(h.settle)
	select {
	case ue := <-h.undel:
		if len(ue.Msgs) != 1 || !strings.Contains(string(ue.Msgs[0]), `"id":9`) || !strings.Contains(ue.Reason, "not back within") {
			t.Fatalf("undelivered %q: %s", ue.Msgs, ue.Reason)
		}
		if d := time.Since(began); d > 3*time.Second {
			t.Fatalf("held for %v with a wait of %v", d, p.Wait)
		}
	case <-time.After(deadline):
		t.Fatal("the held message never came back")
	}
}

// TestReviveHoldsAListenOnce: a listen request written to a server in the moment it
// dies is held by its writer (the write failed) and by the death (it is open, its
// table says): whichever comes first, the next server gets it once, not twice with the
// same id. In a batch (a hostile host's; the stateless era has none) the writer holds
// the batch and the death the listen alone, and the next server got the listen twice,
// two streams of one id: it gets the batch, once.
func TestReviveHoldsAListenOnce(t *testing.T) {
	listen := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"notifications":{"toolsListChanged":true}}}`
	for _, written := range []string{listen, `[{"jsonrpc":"2.0","id":1,"method":"ping"}, ` + listen + `]`} {
		msg := []byte(written)
		for _, deathFirst := range []bool{true, false} {
			c := &Conn{name: "t", ids: upstream.NewOwnIDs("bir:t:"), setup: upstream.NewSetup(), st: stBetween}
			c.held.mu = &c.mu
			dead := &gen{}
			c.setup.FromHost(msg) // writeOnce, before its write to the dying server
			die := func() {
				c.mu.Lock()
				c.held.relistenLocked(c.setup.Listens().Relisten())
				c.mu.Unlock()
			}
			if deathFirst {
				die()
			}
			if err := c.holdAfter(dead, msg); err != nil {
				t.Fatal(err)
			}
			if !deathFirst {
				die()
			}
			if held := c.Held(); len(held) != 1 || string(held[0]) != written {
				t.Errorf("death first %v: held %q, want %s once", deathFirst, held, written)
			}
			if c.held.bytes != len(msg) {
				t.Errorf("death first %v: held bytes %d, want %d", deathFirst, c.held.bytes, len(msg))
			}
		}
	}
}
