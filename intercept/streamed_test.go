package intercept

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/relay"
)

// TestAnswerWantedWholeForHandshakes: the answers learn reads (initialize,
// tools/list, server/discover, in a batch too) are wanted whole, a call's reduced;
// an id is forgotten once answered, whole or streamed; with nothing awaited, no
// answer is wanted; with a cassette, every answer is wanted whole.
func TestAnswerWantedWholeForHandshakes(t *testing.T) {
	s := newSession(t)
	defer s.close()
	ask := func(id string, wantWant, wantWhole bool) {
		t.Helper()
		if want, whole := s.ic.AnswerWanted([]byte(id)); want != wantWant || whole != wantWhole {
			t.Fatalf("AnswerWanted(%s) = %v, %v; want %v, %v", id, want, whole, wantWant, wantWhole)
		}
	}
	ask("1", false, false) // nothing awaited yet
	s.host(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	s.host(`[{"jsonrpc":"2.0","id":"l","method":"tools/list"},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","arguments":{}}}]`)
	s.host(`{"jsonrpc":"2.0","id":4,"method":"server/discover"}`)
	ask(`"l"`, true, true)
	ask(`"l"`, true, true) // asking forgets nothing: the line may turn out no answer
	s.up(`{"jsonrpc":"2.0","id":"l","result":{"tools":[]}}`)
	ask(`"l"`, true, false) // answered
	ask("3", true, false)
	s.up(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}`) // whole
	ask("1", true, false)
	ask("4", true, true)

	c := newSessionWith(t, Options{Cassette: &memCassette{}})
	defer c.close()
	c.host(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","arguments":{}}}`)
	if want, whole := c.ic.AnswerWanted([]byte("3")); !want || !whole {
		t.Fatalf("with a cassette: AnswerWanted = %v, %v; want whole", want, whole)
	}
}

// fakeResult is a relay.StreamedResult as the relay's digest would give it.
type fakeResult struct {
	input, isErr bool
	err          json.RawMessage
	rep          string
	holds        int64
	size         int64
}

func (f fakeResult) Holds() int64       { return f.holds }
func (f fakeResult) ResultBytes() int64 { return f.size }

func (f fakeResult) Kind() (bool, bool)     { return f.input, f.isErr }
func (f fakeResult) Error() json.RawMessage { return f.err }
func (f fakeResult) Report(int) (json.RawMessage, bool) {
	if f.rep == "" {
		return nil, false
	}
	return json.RawMessage(f.rep), true
}

// TestStreamedAnswersEndCallsAndSpans: an answer given reduced ends its call's report
// by what it was reduced to: the outcome, the result, the error; in the order they
// were given. The observer is told each answer with its reduction (Line.Result), of
// which the spans end (telemetry/mcpspans' TestStreamedAnswersEndSpans).
func TestStreamedAnswersEndCallsAndSpans(t *testing.T) {
	obs := &recObserver{}
	s := newSessionWith(t, Options{Observer: obs})
	results := map[string]fakeResult{
		"a": {isErr: true, rep: `"reduced a"`},
		"b": {err: json.RawMessage(`{"code":-32000,"message":"boom"}`)},
		"c": {input: true, rep: `{"resultType":"input_required"}`},
		"d": {rep: `"reduced d"`},
	}
	for i, name := range []string{"a", "b", "c", "d"} {
		id := string(rune('1' + i))
		s.host(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `","arguments":{}}}`)
		s.ic.FromUpstreamStreamed([]byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{}}`), results[name], s.tick())
	}
	steps := s.close()
	want := map[string][2]string{ // outcome, result
		"a": {"tool_error", `"reduced a"`},
		"b": {"rpc_error", ""},
		"c": {"input_required", `{"resultType":"input_required"}`},
		"d": {"ok", `"reduced d"`},
	}
	if len(steps) != 4 {
		t.Fatalf("%d reports, want 4", len(steps))
	}
	for _, st := range steps {
		w := want[st.Tool]
		if st.Outcome != w[0] || string(st.Result) != w[1] {
			t.Errorf("%s: outcome %s result %s, want %s %s", st.Tool, st.Outcome, st.Result, w[0], w[1])
		}
	}
	if e := steps[1].Error; string(e) == "" {
		t.Errorf("b's report has no error")
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.results) != 4 {
		t.Fatalf("the observer was told %d answers, want 4", len(obs.results))
	}
	for i, name := range []string{"a", "b", "c", "d"} {
		if got, ok := obs.results[i].(fakeResult); !ok || fmt.Sprint(got) != fmt.Sprint(results[name]) {
			t.Errorf("answer %d: the observer was told %v, want %s's reduction %v", i, obs.results[i], name, results[name])
		}
	}
	if !obs.done {
		t.Error("the observer was not told Done")
	}
}

// recObserver is an Observer that keeps the reductions of the server's lines.
type recObserver struct {
	mu      sync.Mutex
	results []relay.StreamedResult
	done    bool
}

func (r *recObserver) Line(l *Line) {
	if l.From != FromServer {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, l.Result)
}
func (r *recObserver) Sent(time.Time)       {}
func (r *recObserver) Lost(*Lost)           {}
func (r *recObserver) Drain() time.Duration { return time.Second }
func (r *recObserver) Stop()                {}
func (r *recObserver) Looked()              {}
func (r *recObserver) Done(int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = true
}
