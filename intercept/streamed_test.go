package intercept

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/telemetry"
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
// and span by what it was reduced to: the outcome, the result, the error, the
// captured result; in the order they were given.
func TestStreamedAnswersEndCallsAndSpans(t *testing.T) {
	c, url := newSpanCollector(t)
	x := telemetry.New(telemetry.Options{Config: telemetry.Config{TracesURL: url + "/v1/traces", Protocol: telemetry.ProtoProtobuf},
		Version: "1", Server: "s", BatchDelay: time.Hour})
	s := newSessionWith(t, Options{Tracing: &Tracing{Exporter: x, Transport: "pipe", Capture: true}})
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if st := x.Close(ctx); st.Exported != 4 {
		t.Fatalf("%+v", st)
	}
	want := map[string][3]string{ // outcome, result, error.type
		"a": {"tool_error", `"reduced a"`, "tool_error"},
		"b": {"rpc_error", "", "-32000"},
		"c": {"input_required", `{"resultType":"input_required"}`, ""},
		"d": {"ok", `"reduced d"`, ""},
	}
	if len(steps) != 4 {
		t.Fatalf("%d reports, want 4", len(steps))
	}
	for _, st := range steps {
		w := want[st.Tool]
		if st.Outcome != w[0] || string(st.Result) != w[1] {
			t.Errorf("%s: outcome %s result %s, want %s %s", st.Tool, st.Outcome, st.Result, w[0], w[1])
		}
		_, a := c.byName(t, "tools/call "+st.Tool)
		if a["error.type"] != w[2] {
			t.Errorf("%s: span error.type %q, want %q", st.Tool, a["error.type"], w[2])
		}
		if w[1] != "" && a["gen_ai.tool.call.result"] != w[1] {
			t.Errorf("%s: captured result %q, want %s", st.Tool, a["gen_ai.tool.call.result"], w[1])
		}
	}
	if e := steps[1].Error; string(e) == "" {
		t.Errorf("b's report has no error")
	}
}
