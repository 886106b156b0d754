package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// TestReplayDispatchToHiddenTool: through the binary with the reference recorder, a
// dispatch to a tool --ignore-tool hides, and one to a tool --allow-tool does not
// name, each get the unknown-tool error in their posted result and step report, and
// neither reaches the server; a dispatch to a shown tool runs.
func TestReplayDispatchToHiddenTool(t *testing.T) {
	t.Parallel()
	s := startReplayWith(t, []string{"--allow-tool", "echo", "--allow-tool", "f*", "--ignore-tool", "FAIL"})
	ctx := testutil.Context(t)
	s.handshake()
	s.dispatch(
		recordertest.Dispatch{DispatchID: "ignored", Tool: "fail", Arguments: json.RawMessage(`{"ignored":1}`)},
		recordertest.Dispatch{DispatchID: "unlisted", Tool: "need_input", Arguments: json.RawMessage(`{"unlisted":1}`)},
		recordertest.Dispatch{DispatchID: "shown", Tool: "echo", Arguments: json.RawMessage(`{"shown":1}`)},
	)
	rs := s.results(ctx, "ignored", "unlisted", "shown")
	for id, tool := range map[string]string{"ignored": "fail", "unlisted": "need_input"} {
		r := rs[id]
		if r.Outcome != "rpc_error" || r.Get("error.code").Int() != -32602 || r.Get("error.message").String() != "Unknown tool: "+tool {
			t.Errorf("dispatch %s to the hidden %s posted %s %s", id, tool, r.Outcome, r.Body)
		}
	}
	if rs["shown"].Outcome != "ok" {
		t.Errorf("the dispatch to a shown tool posted %s %s", rs["shown"].Outcome, rs["shown"].Body)
	}
	snap, err := s.rec.Wait(ctx, func(v recordertest.Snapshot) bool { return len(v.Steps) >= 3 })
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range snap.Steps {
		switch id := st.Get("dispatchId").String(); id {
		case "ignored", "unlisted":
			if st.Get("outcome").String() != "rpc_error" || !strings.HasPrefix(st.Get("error.message").String(), "Unknown tool: ") {
				t.Errorf("step report of %s: %s", id, st.Body)
			}
		}
	}
	// A host ping goes after anything the proxy wrote before it: once the server has
	// it, a hidden dispatch sent upstream would be in its log.
	s.Send(`{"jsonrpc":"2.0","id":"sync","method":"ping"}`)
	if got := s.recv(); gjson.Get(got, "id").String() != "sync" {
		t.Fatalf("the ping answered %s", got)
	}
	s.waitReceived(ctx, "the shown dispatch", callTo(`"shown"`))
	for _, l := range s.received() {
		if callTo(`"ignored"`)(l) || callTo(`"unlisted"`)(l) {
			t.Errorf("a dispatch to a hidden tool reached the server: %s", l)
		}
	}
	s.finish()
}

// TestHiddenCallNotification: a tools/call of a hidden tool without an id (a
// notification, alone and in a batch) never reaches the server, nothing is written
// to the host for it, and the journal records it as any tools/call notification is
// (docs/recording.md): rpc_error -32600.
func TestHiddenCallNotification(t *testing.T) {
	t.Parallel()
	ps := startPolicy(t, "--ignore-tool", "secret_*")
	ps.Send(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"secret_a","arguments":{"_bir_call_id":"n-1","alone":1}}}`)
	ps.Send(`[{"jsonrpc":"2.0","method":"tools/call","params":{"name":"secret_b","arguments":{"_bir_call_id":"n-2","batched":1}}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
	ps.Send(`[{"jsonrpc":"2.0","method":"tools/call","params":{"name":"secret_c","arguments":{"_bir_call_id":"n-3","all":1}}}]`)
	// The sync's answer is the next message (policyserver answers no batch): nothing
	// came for the hidden notifications.
	ps.sync(t, 3)
	if ps.received(t, "secret_") {
		t.Errorf("a hidden notification reached the server:\n%s", strings.Join(lines(t, ps.record), ""))
	}
	if !ps.received(t, `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`) {
		t.Errorf("the rest of the batch was not sent as it was less the hidden call:\n%s", strings.Join(lines(t, ps.record), ""))
	}
	ps.end()
	got := map[string]string{}
	for _, r := range journalReports(t, ps) {
		got[gjson.Get(r, "callId").String()] = gjson.Get(r, "outcome").String() + " " + gjson.Get(r, "error.code").Raw + " " + gjson.Get(r, "tool").String()
	}
	for id, tool := range map[string]string{"n-1": "secret_a", "n-2": "secret_b", "n-3": "secret_c"} {
		if want := "rpc_error -32600 " + tool; got[id] != want {
			t.Errorf("the journal has %q for %s, want %q\n%s", got[id], id, want, strings.Join(journalReports(t, ps), "\n"))
		}
	}
}

// TestCallTimeoutHostNotReading: a call passes its deadline while the host is not
// reading (a 200 kB answer fills the pipe to it). The call is still reported as a
// timeout, and when the host then ends the session the proxy exits within its
// bound: the deadline's answer, stuck on its way to the host, must not hold the lock
// the end of the session takes.
func TestCallTimeoutHostNotReading(t *testing.T) {
	eachStop(t, func(t *testing.T, sig bool) {
		raw := testutil.Build(t, "./testdata/rawserver")
		state := t.TempDir()
		const grace = 500 * time.Millisecond
		s := startProxy(t, []string{"BIR_OFF=0", "XDG_STATE_HOME=" + state, "BIR_RECORDER_URL="},
			"--server", "stuck", "--call-timeout", "200ms", "--stop-grace", grace.String(), "--", raw, "--reply", "--reply-size", "200000")
		s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang","arguments":{"_bir_call_id":"stuck-2"}}}`)
		journal := filepath.Join(state, "bir-proxy", "journal", "stuck.jsonl")
		testutil.Eventually(t, "the timeout's report", func() bool {
			for _, r := range lines(t, journal) {
				if gjson.Get(r, "callId").String() == "stuck-2" {
					return gjson.Get(r, "outcome").String() == "timeout"
				}
			}
			return false
		})
		endSession(t, s, sig, grace+3*time.Second+time.Second)
	})
}

// TestCallTimeoutRacesTheAnswer: rounds of 8 calls in flight whose answers come as
// their deadlines pass, through a proxy built with -race: each call gets exactly one
// answer, the server's or the deadline's, never both, and the race detector finds
// nothing.
func TestCallTimeoutRacesTheAnswer(t *testing.T) {
	t.Parallel()
	srv := testutil.Build(t, "./testdata/policyserver")
	sent := filepath.Join(t.TempDir(), "sent")
	cmd := exec.Command(testutil.BuildRace(t, "./cmd/bir-proxy"), "--server", "race", "--call-timeout", "100ms", "--", srv, "--sent", sent)
	cmd.Env = append(os.Environ(), "BIR_OFF=0", "XDG_STATE_HOME="+t.TempDir(), "BIR_RECORDER_URL=")
	p := testutil.Start(t, cmd)
	s := &testHost{Proc: p, t: t, out: framing.NewReader(p.Stdout)}
	const rounds, width = 25, 8
	answers := map[string]int{}
	timedOut := 0
	for r := range rounds {
		want := map[string]bool{}
		for i := range width {
			id := strconv.Itoa(r*width + i + 1)
			want[id] = true
			s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":%d}}}`, id, 90+(r*width+i)%21))
		}
		for len(want) > 0 {
			got := s.recv()
			id := gjson.Get(got, "id").Raw
			answers[id]++
			if gjson.Get(got, "error.code").Int() == -32001 {
				timedOut++
			}
			delete(want, id)
		}
	}
	// Every answer the server sent has passed the proxy (dropped, or to the host)
	// before the ping's.
	testutil.Eventually(t, "the server's answers", func() bool { return len(lines(t, sent)) >= rounds*width })
	s.Send(`{"jsonrpc":"2.0","id":"sync","method":"ping"}`)
	for {
		got := s.recv()
		id := gjson.Get(got, "id").Raw
		if id == `"sync"` {
			break
		}
		answers[id]++
	}
	for id, n := range answers {
		if n != 1 {
			t.Errorf("call %s was answered %d times", id, n)
		}
	}
	if len(answers) != rounds*width {
		t.Errorf("%d calls answered, want %d", len(answers), rounds*width)
	}
	t.Logf("%d of %d calls answered at their deadline", timedOut, rounds*width)
	s.Stdin.Close()
	s.ExitCode()
	if strings.Contains(s.Stderr.String(), "DATA RACE") {
		t.Errorf("the race detector found a race:\n%s", s.Stderr.String())
	}
}
