package intercept

import (
	"strconv"
	"strings"
	"testing"
)

// TestAnAnswerThatTurnsIntoARequestKeepsTheHandshakeWhole: a long line whose head is
// an answer to the host's tools/list (so it is kept whole) but which turns into a
// request of the server's (a later "method") answers nothing: the host's tools/list
// still waits, and its real answer, long, must still be kept whole for registration
// to learn from. Asking AnswerWanted forgot the id, so the real answer was reduced.
func TestAnAnswerThatTurnsIntoARequestKeepsTheHandshakeWhole(t *testing.T) {
	s := newSession(t)
	defer s.close()
	s.host(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	if want, whole := s.ic.AnswerWanted([]byte("5")); !want || !whole {
		t.Fatalf("AnswerWanted(5) = %v, %v for the host's tools/list; want whole", want, whole)
	}
	// The line ended a request of the server's (relay.requestStandIn is what
	// interception is given of it, or the whole line).
	s.up(`{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage"}`)
	if want, whole := s.ic.AnswerWanted([]byte("5")); !want || !whole {
		t.Fatalf("after a request of the server's with the same id, AnswerWanted(5) = %v, %v; want the tools/list answer still whole", want, whole)
	}
	s.up(`{"jsonrpc":"2.0","id":5,"result":{"tools":[]}}`)
	if n := s.ic.handshakes.n.Load(); n != 0 {
		t.Fatalf("%d handshake ids kept after the answer", n)
	}
}

// TestAReducedHandshakeAnswerTeachesNothing: a long answer whose head's id is a
// call's but whose last id (the one the host keeps) is the host's tools/list is
// reduced (the docs say registration learns nothing from it): it must not teach an
// empty tool list, which made the first tools/list answer read whole be ignored,
// and its id must be forgotten (left, it kept every upstream message read twice on
// the pump for the rest of the session).
func TestAReducedHandshakeAnswerTeachesNothing(t *testing.T) {
	s := newSession(t)
	s.host(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}}`)
	if want, whole := s.ic.AnswerWanted([]byte("1")); !want || whole {
		t.Fatalf("AnswerWanted(1) = %v, %v; want it reduced", want, whole)
	}
	s.ic.FromUpstreamStreamed([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}`), fakeResult{rep: `{"tools":[{"name":"x"}]}`}, s.tick())
	if n := s.ic.handshakes.n.Load(); n != 0 {
		t.Errorf("%d handshake ids kept after the streamed answer to the last", n)
	}
	s.host(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
	s.up(`{"jsonrpc":"2.0","id":8,"result":{"tools":[{"name":"real"}]}}`)
	s.close()
	if len(s.sink.facts) == 0 {
		t.Fatal("nothing learned from the tools/list answer read whole")
	}
	if f := s.sink.facts[len(s.sink.facts)-1]; strings.Join(f.Tools, ",") != "real" {
		t.Fatalf("learned tools %q (facts %+v), want the whole answer's [real]", f.Tools, s.sink.facts)
	}
}

// TestUnansweredHandshakesDoNotKeepEveryAnswerWhole: the server never answers
// tools/list requests (the host asks again on every list_changed the server sends,
// and cancels each when it times out): once maxHandshakeIDs had gone unanswered,
// every long answer for the rest of the session was kept whole, the memory the
// reduction exists to save. The oldest unanswered id is forgotten instead.
func TestUnansweredHandshakesDoNotKeepEveryAnswerWhole(t *testing.T) {
	s := newSession(t)
	defer s.close()
	for i := range maxHandshakeIDs + 10 {
		id := strconv.Itoa(1000 + i)
		s.host(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`)
		s.host(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}}`)
	}
	s.host(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"a","arguments":{}}}`)
	if want, whole := s.ic.AnswerWanted([]byte(`"c"`)); !want || whole {
		t.Fatalf("AnswerWanted for a call after %d unanswered tools/list = %v, %v; want it reduced", maxHandshakeIDs+10, want, whole)
	}
	if n := s.ic.handshakes.n.Load(); n > maxHandshakeIDs {
		t.Fatalf("%d handshake ids kept, over the bound %d", n, maxHandshakeIDs)
	}
	// The latest handshake, still unanswered, is still kept whole.
	s.host(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{}}`)
	if want, whole := s.ic.AnswerWanted([]byte(`"i"`)); !want || !whole {
		t.Fatalf("AnswerWanted for the latest initialize = %v, %v; want it whole", want, whole)
	}
}
