package intercept

import (
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestDuplicateIDsFollowTheLastMember: of duplicate "id" members the last wins, as
// the host's JSON.parse reads them; an answer spelled so ends the call it answers
// (it was reported upstream_lost at session end), and a request spelled so is the
// call of its last id.
func TestDuplicateIDsFollowTheLastMember(t *testing.T) {
	for _, lexed := range []bool{false, true} {
		s := newSession(t)
		s.lexed = lexed
		s.host(`{"jsonrpc":"2.0","id":"first","method":"tools/call","id":7,"params":{"name":"dup","arguments":{}}}`)
		s.host(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"dup-result","arguments":{}}}`)
		s.up(`{"jsonrpc":"2.0","id":"other","result":{"content":[]},"id":7}`)
		// Of two "isError" the last counts, as for any member.
		s.up(`{"jsonrpc":"2.0","id":8,"result":{"isError":true,"content":[],"isError":false}}`)
		steps := s.sink.wait(t, 2)
		if steps[0].Tool != "dup" || steps[0].Outcome != "ok" || steps[1].Outcome != "ok" {
			t.Fatalf("lexed %v: reported %q as %q, %q as %q, want both ok", lexed, steps[0].Tool, steps[0].Outcome, steps[1].Tool, steps[1].Outcome)
		}
		s.close()
	}
}

// TestUnansweredCallsDoNotFillTheBudget: requests that are never answered must not
// pile up whole until the byte budget is spent and later calls lose their arguments:
// bookkeeping looks at them once enough bytes wait, and keeps only what the reports
// will hold.
func TestUnansweredCallsDoNotFillTheBudget(t *testing.T) {
	s := newSessionWith(t, Options{QueueBytes: 1 << 20})
	pad := `"` + strings.Repeat("x", 400) + `"`
	const n = 20000 // 8 MB of requests through a 1 MiB queue
	for i := range n {
		s.host(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"hang","arguments":{"pad":` + pad + `}}}`)
		if i%500 == 499 {
			// A host at a pace bookkeeping keeps up with: what waits must drain
			// without any answer coming to wake it.
			testutil.Eventually(t, "the queue to drain with no answer", func() bool {
				s.ic.q.mu.Lock()
				defer s.ic.q.mu.Unlock()
				return s.ic.q.bytes < s.ic.q.pile
			})
		}
	}
	s.ic.UpstreamLost(s.tick())
	steps := s.close()
	if len(steps) != n {
		t.Fatalf("%d reports, want %d", len(steps), n)
	}
	shed := 0
	for _, st := range steps {
		if st.Outcome != "upstream_lost" || strings.Contains(string(st.Error), "fell behind") || st.ArgsFingerprint == "" {
			shed++
		}
	}
	if shed > 0 {
		t.Fatalf("%d of %d calls were not recorded in full: bookkeeping fell behind while the CPUs were idle", shed, n)
	}
}
