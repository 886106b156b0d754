package intercept

import "testing"

// TestDuplicateIDsFollowTheLastMember: of duplicate "id" members the last wins, as
// the host's JSON.parse reads them; an answer spelled so ends the call it answers
// (it was reported upstream_lost at session end), and a request spelled so is the
// call of its last id.
func TestDuplicateIDsFollowTheLastMember(t *testing.T) {
	s := newSession(t)
	s.host(`{"jsonrpc":"2.0","id":"first","method":"tools/call","id":7,"params":{"name":"dup","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":"other","result":{"content":[]},"id":7}`)
	steps := s.sink.wait(t, 1)
	if steps[0].Tool != "dup" || steps[0].Outcome != "ok" {
		t.Fatalf("reported %q as %q, want dup ok", steps[0].Tool, steps[0].Outcome)
	}
	s.close()
}
