package intercept

import (
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/bir-dev/bir-proxy/report"
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

// blockingResult is a long answer's reduction that bookkeeping waits on until
// release is closed (a reduction that runs behind the pipe); held says it is.
type blockingResult struct {
	fakeResult
	held    chan struct{}
	release chan struct{}
}

func (b *blockingResult) Error() json.RawMessage {
	close(b.held)
	<-b.release
	return nil
}

// stalledBookkeeping is a session whose queue holds budget bytes, with bookkeeping
// waiting on the first call's long answer until first.release is closed.
func stalledBookkeeping(t *testing.T, budget int64) (*session, *blockingResult) {
	t.Helper()
	s := newSessionWith(t, Options{QueueBytes: budget})
	first := &blockingResult{held: make(chan struct{}), release: make(chan struct{})}
	s.host(`{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	s.ic.FromUpstreamStreamed([]byte(`{"jsonrpc":"2.0","id":0,"result":{}}`), first, s.tick())
	select {
	case <-first.held:
	case <-time.After(10 * time.Second):
		t.Fatal("bookkeeping never looked at the first long answer")
	}
	return s, first
}

// TestStreamedResultsHeldAreBounded: each long answer's reduction waiting for
// bookkeeping keeps up to a clipped result (~1 MiB), but only its small stand-in was
// counted against the queue's budget: with bookkeeping waiting on a slow reduction, a
// server answering every call at length had the proxy hold a reduction per answer,
// without bound. Each now counts as what it may keep; past the budget the answer is
// reported as not recorded and its reduction let go.
func TestStreamedResultsHeldAreBounded(t *testing.T) {
	const budget = 8 << 20
	s, first := stalledBookkeeping(t, budget)
	const n = 200
	var alive []weak.Pointer[fakeResult]
	for i := 1; i <= n; i++ {
		id := strconv.Itoa(i)
		s.host(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
		r := &fakeResult{rep: `"x"`, holds: 1 << 20}
		alive = append(alive, weak.Make(r))
		s.ic.FromUpstreamStreamed([]byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{}}`), r, s.tick())
	}
	runtime.GC()
	held := 0
	for _, w := range alive {
		if w.Value() != nil {
			held++
		}
	}
	if limit := budget / (1 << 20); held > limit {
		t.Errorf("%d reductions held while bookkeeping waits, at most %d fit the queue's %d MiB", held, limit, budget>>20)
	}
	if held == 0 {
		t.Errorf("the checker is wrong: no reduction held at all")
	}
	close(first.release)
	steps := s.close()
	if len(steps) != n+1 {
		t.Fatalf("%d reports, want %d", len(steps), n+1)
	}
	notRecorded := 0
	for _, st := range steps {
		if strings.Contains(string(st.Result), "not recorded") {
			notRecorded++
		}
	}
	if notRecorded != n-held {
		t.Errorf("%d answers reported as not recorded, want the %d let go", notRecorded, n-held)
	}
}

// TestACancelledHandshakeIsForgotten: a handshake request the host cancelled is
// answered by no server (the spec lets it not answer), so its id was kept until 256
// more pushed it out: and while any id is kept, every message the server sends is
// read once more on the upstream's pump. A cancellation forgets it.
func TestACancelledHandshakeIsForgotten(t *testing.T) {
	s := newSession(t)
	defer s.close()
	s.host(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	s.host(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{}}`)
	if n := s.ic.handshakes.n.Load(); n != 2 {
		t.Fatalf("the checker is wrong: %d handshake ids kept, want 2", n)
	}
	s.host(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5.0,"reason":"timed out"}}`)
	s.host(`[{"jsonrpc":"2.0","method":"notifications/cancel\u006ced","params":{"requestId":"\u0069"}}]`)
	if n := s.ic.handshakes.n.Load(); n != 0 {
		t.Fatalf("%d handshake ids kept after both were cancelled", n)
	}
	// Answers the pump lexed, in a batch, end a handshake as answers read whole do.
	s.lexed = true
	s.host(`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	s.up(`[{"jsonrpc":"2.0","id":99,"result":{}},{"jsonrpc":"2.0","id":6,"result":{"tools":[]}}]`)
	if n := s.ic.handshakes.n.Load(); n != 0 {
		t.Fatalf("%d handshake ids kept after a lexed batch answered it", n)
	}
}

// TestAHandshakeCancelledInItsBatchIsForgotten: a host batch holding a handshake
// request and then its cancel had the cancel looked at before the request was noted,
// so the id was kept (every server message read once more, its answer kept whole)
// until 256 newer pushed it out; a cancel before a request of the same id, in one
// batch, is of an earlier request and leaves the new one noted.
func TestAHandshakeCancelledInItsBatchIsForgotten(t *testing.T) {
	s := newSession(t)
	defer s.close()
	s.host(`[{"jsonrpc":"2.0","id":5,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}]`)
	if n := s.ic.handshakes.n.Load(); n != 0 {
		t.Fatalf("%d handshake ids kept after the batch cancelled its request", n)
	}
	s.host(`[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}},{"jsonrpc":"2.0","id":6,"method":"tools/list"}]`)
	if !s.ic.handshakes.has([]byte("6")) {
		t.Fatal("a request after a cancel of its id (an earlier request's) was not noted")
	}
}

// TestAShedLongErrorAnswerIsAnError: a long answer that was an error, shed because
// bookkeeping fell behind, is reported as an error not recorded, as a shed error
// answer read whole is: its stand-in is a result's, so once its reduction was let go
// with it, the failed call was reported as having succeeded (outcome ok).
func TestAShedLongErrorAnswerIsAnError(t *testing.T) {
	const budget = 4 << 20
	s, first := stalledBookkeeping(t, budget)
	const n = 20
	for i := 1; i <= n; i++ {
		id := strconv.Itoa(i)
		s.host(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
		r := &fakeResult{err: json.RawMessage(`{"code":-32000,"message":"boom"}`), holds: 1 << 20}
		// The relay's stand-in of an error answer (relay.answerStandIn).
		s.ic.FromUpstreamStreamed([]byte(`{"jsonrpc":"2.0","id":`+id+`,"error":{}}`), r, s.tick())
	}
	close(first.release)
	steps := s.close()
	if len(steps) != n+1 {
		t.Fatalf("%d reports, want %d", len(steps), n+1)
	}
	shed := 0
	for _, st := range steps[1:] {
		if st.Outcome != report.OutcomeRPCError {
			t.Errorf("a call answered with an error reported as %s: %s %s", st.Outcome, st.Result, st.Error)
		}
		if strings.Contains(string(st.Error), "not recorded") {
			shed++
		}
	}
	if shed == 0 {
		t.Error("the checker is wrong: nothing was shed")
	}
}
