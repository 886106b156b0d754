package intercept

import (
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// shedBudget is a queue budget every answer of shedRun's larger sizes passes by
// itself, so those are shed whatever bookkeeping's pace, and its small calls fit.
const shedBudget = 400

// shedRun drives calls and answers through an Interceptor whose queue is over budget
// for every large answer. Each byte of plan is one call: bit 0 an error answer rather
// than a result, bit 1 the answer handed on with the upstream's lex, bits 2-4 its size
// class (0 small, under the budget; others over it, shed). payload, when it is valid
// JSON, is every answer's extra member. Every call must get one report, with the
// outcome its answer says (a shed answer keeps its id and whether it was an error), or
// as not recorded when its request was shed.
func shedRun(t *testing.T, plan []byte, payload []byte) {
	s := newSessionWith(t, Options{QueueBytes: shedBudget})
	extra := `"x"`
	if len(payload) > 0 && jsonlex.Valid(payload) {
		extra = string(payload)
	}
	var lx jsonlex.Line
	want := map[string]string{}
	for i, b := range plan {
		id := strconv.Itoa(i + 1)
		tool := "t" + id
		s.host(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"i":` + id + `,"_bir_call_id":"c` + id + `"}}}`)
		pad := ""
		if size := int(b>>2) & 7; size > 0 {
			pad = strings.Repeat("p", size*shedBudget)
		}
		var ans string
		if b&1 != 0 {
			ans = `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32000,"message":"` + pad + `","data":` + extra + `}}`
			want[tool] = "rpc_error"
		} else {
			ans = `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"` + pad + `"}],"extra":` + extra + `}}`
			want[tool] = "ok"
		}
		if b&2 != 0 && lx.LexValid([]byte(ans)) {
			s.ic.FromUpstreamLexed([]byte(ans), &lx, s.tick())
		} else {
			s.ic.FromUpstream([]byte(ans), s.tick())
		}
	}
	s.ic.UpstreamLost(s.tick())
	steps := s.close()
	if len(steps) != len(plan) {
		t.Fatalf("%d reports for %d calls", len(steps), len(plan))
	}
	seen := map[string]bool{}
	for _, st := range steps {
		if st.CallID == nil || seen[*st.CallID] {
			t.Fatalf("a report with no callId, or a second one: %+v", st)
		}
		seen[*st.CallID] = true
		if st.Tool == "" {
			// A request the budget had no room for (the answers before it were still
			// queued): reported, as not recorded.
			if st.Outcome != "rpc_error" || !strings.Contains(string(st.Error), "fell behind") {
				t.Fatalf("%s: a shed request reported %s %s", *st.CallID, st.Outcome, st.Error)
			}
			continue
		}
		if st.Outcome != want[st.Tool] {
			t.Fatalf("%s: outcome %s, want %s (its answer was read with another message's spans?)", st.Tool, st.Outcome, want[st.Tool])
		}
	}
}

// TestShedLexedAnswersEndTheirCalls: an answer shed over the queue's budget is
// replaced by a short one with its id; the upstream's lex of the original must go
// with it. Kept, bookkeeping read the short bytes with the long one's spans: a slice
// bounds panic that took the proxy down (issue 21), or, when the spans fit, members
// that are not there and a call left to end upstream_lost.
func TestShedLexedAnswersEndTheirCalls(t *testing.T) {
	var plan []byte
	for i := range 64 {
		plan = append(plan, byte(i)) // every kind and size, lexed and read
	}
	plan = append(plan, 0b11110, 0b11111, 0b00110, 0b00111, 0b11110)
	shedRun(t, plan, nil)
}

func FuzzShedThenContinue(f *testing.F) {
	f.Add([]byte{0b11110, 0b00010, 0b11111, 0b00011}, []byte(nil))
	f.Add([]byte{0b00110, 0b00111, 0, 1, 2, 3}, []byte(`{"a":[1,2,{"b":null}]}`))
	// A deeply nested member in a shed answer: nothing that reads it may recurse.
	f.Add([]byte{0b11110, 0b11111}, []byte(strings.Repeat("[", 100000)+strings.Repeat("]", 100000)))
	f.Fuzz(func(t *testing.T, plan, payload []byte) {
		if len(plan) > 200 {
			plan = plan[:200]
		}
		shedRun(t, plan, payload)
	})
}
