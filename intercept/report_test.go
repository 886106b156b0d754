package intercept

import (
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/report"
)

// TestReportSaysResultBytesAsSent: resultBytes is the size of the result (the error,
// for an rpc_error) as the server sent it, whatever the report kept of it: a result
// redacted and clipped to the cap, one that streamed past, a multi-round call's last
// round, a task's final result; and none when no answer of the server's ended the call.
func TestReportSaysResultBytesAsSent(t *testing.T) {
	s := newSession(t)
	small := `{"content":[{"type":"text","text":"password: hunter2"}],"isError":false}`
	big := `{"content":[{"type":"text","text":"` + strings.Repeat("x", 200<<10) + `"}]}`
	rpcErr := `{"code":-32602,"message":"bad"}`
	bigRound := `{"resultType":"input_required","inputRequests":{},"pad":"` + strings.Repeat("p", 1<<20) + `"}`
	done := `{"content":[{"type":"text","text":"by notification"}]}`

	s.host(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"small","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":1,"result":` + small + `}`)
	s.host(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":2,"result":` + big + `}`)
	s.host(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rpc","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":3,"error":` + rpcErr + `}`)
	s.host(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"streamed","arguments":{}}}`)
	s.ic.FromUpstreamStreamed([]byte(`{"jsonrpc":"2.0","id":4,"result":{}}`), fakeResult{rep: `"reduced"`, size: 123456}, s.tick())
	// A round that asked for input with a result over what is kept of one, then a
	// round that asked again with a small one: the call ends (at close) with that.
	s.host(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"rounds","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","inputRequests":{}}}`)
	s.host(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"rounds","arguments":{},"inputResponses":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":6,"result":` + bigRound + `}`)
	s.host(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"task","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":7,"result":{"resultType":"task","taskId":"t1","status":"working"}}`)
	s.up(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"t1","status":"completed","result":` + done + `}}`)
	s.host(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"failed","arguments":{}}}`)
	s.up(`{"jsonrpc":"2.0","id":8,"result":{"resultType":"task","taskId":"t2","status":"working"}}`)
	s.up(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"t2","status":"failed","statusMessage":"gone"}}`)
	s.host(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"lost","arguments":{}}}`)
	s.ic.UpstreamLost(s.tick())
	steps := s.close()

	want := map[string]int64{
		"small": int64(len(small)), "big": int64(len(big)), "rpc": int64(len(rpcErr)), "streamed": 123456,
		"rounds": int64(len(bigRound)), "task": int64(len(done)), "failed": 0, "lost": 0,
	}
	for tool, n := range want {
		st := stepOf(t, steps, tool)
		if st.ResultBytes != n {
			t.Errorf("%s (%s): resultBytes %d, want %d", tool, st.Outcome, st.ResultBytes, n)
		}
	}
	if st := stepOf(t, steps, "big"); !st.ResultClipped || int64(len(st.Result)) >= st.ResultBytes {
		t.Errorf("big: the report kept %d bytes (clipped %v) of %d", len(st.Result), st.ResultClipped, st.ResultBytes)
	}
	if st := stepOf(t, steps, "rounds"); st.Rounds != 2 || st.Outcome != report.OutcomeInputRequired {
		t.Errorf("rounds: %d rounds, outcome %s", st.Rounds, st.Outcome)
	}
}
