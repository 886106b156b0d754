package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// replaySession is a proxy recording to rec, over rawserver logging what it receives.
type replaySession struct {
	*testHost
	rec     *recordertest.Server
	record  string // rawserver's --record file
	proxyID string
	mu      sync.Mutex // serializes host writes from several goroutines
}

func startReplay(t *testing.T, rawArgs ...string) *replaySession {
	t.Helper()
	return startReplayWith(t, nil, rawArgs...)
}

// startReplayWith is startReplay with flags of the proxy's own before the server.
func startReplayWith(t *testing.T, proxyArgs []string, rawArgs ...string) *replaySession {
	t.Helper()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	record := filepath.Join(t.TempDir(), "received")
	args := append(append(append([]string{"--server", "replay"}, proxyArgs...), "--", raw, "--reply", "--strict-tools", "--record", record), rawArgs...)
	s := startProxy(t, recording(rec, t.TempDir()), args...)
	regs, err := rec.WaitRegistrations(testutil.Context(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	return &replaySession{testHost: s, rec: rec, record: record, proxyID: regs[0].ProxyID}
}

func (s *replaySession) sendLocked(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Send(line)
}

// handshake is the session era's opening, as an SDK host sends it.
func (s *replaySession) handshake() {
	s.t.Helper()
	s.Send(`{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test-host","version":"0.0.1"}},"jsonrpc":"2.0","id":0}`)
	if got := s.recv(); !strings.Contains(got, `"serverInfo"`) {
		s.t.Fatalf("initialize answered %s", got)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func (s *replaySession) dispatch(ds ...recordertest.Dispatch) { s.rec.Dispatch(s.proxyID, ds...) }

// results waits until every id has a result and returns them by dispatch id; a
// dispatch posted twice fails the test.
func (s *replaySession) results(ctx context.Context, ids ...string) map[string]recordertest.Result {
	s.t.Helper()
	return s.resultsRepeats(ctx, false, ids...)
}

// resultsRepeats is results; with repeats, a result posted again is allowed (the
// recorder answered it, but a restart cut the answer off: it is sent again, at least
// once as reports are) and the last one is kept.
func (s *replaySession) resultsRepeats(ctx context.Context, repeats bool, ids ...string) map[string]recordertest.Result {
	s.t.Helper()
	snap, err := s.rec.Wait(ctx, func(v recordertest.Snapshot) bool {
		have := map[string]bool{}
		for _, r := range v.Results {
			have[r.DispatchID] = true
		}
		for _, id := range ids {
			if !have[id] {
				return false
			}
		}
		return true
	})
	if err != nil {
		s.t.Fatalf("results of %v: %v", ids, err)
	}
	out := map[string]recordertest.Result{}
	for _, r := range snap.Results {
		if _, dup := out[r.DispatchID]; dup && !repeats {
			s.t.Fatalf("dispatch %s posted twice", r.DispatchID)
		}
		out[r.DispatchID] = recordertest.Result{ProxyID: r.ProxyID, DispatchID: r.DispatchID, Outcome: r.Outcome, Body: slices.Clone(r.Body)}
	}
	return out
}

// handed waits until the recorder has put every id in a poll answer.
func (s *replaySession) handed(ctx context.Context, ids ...string) {
	s.t.Helper()
	if _, err := s.rec.Wait(ctx, func(v recordertest.Snapshot) bool {
		n := 0
		for _, h := range v.Handed {
			if slices.Contains(ids, h.DispatchID) {
				n++
			}
		}
		return n >= len(ids)
	}); err != nil {
		s.t.Fatal(err)
	}
}

// received is what the server has received so far, a line each.
func (s *replaySession) received() []string {
	data, _ := os.ReadFile(s.record)
	lines := strings.Split(string(data), "\n")
	return lines[:len(lines)-1] // the last is empty or being written
}

// waitReceived waits until the server's log has a line for which match is true and
// returns its index. The log is a file, seen only by looking.
func (s *replaySession) waitReceived(_ context.Context, what string, match func(string) bool) int {
	s.t.Helper()
	at := -1
	testutil.Eventually(s.t, "the server to receive "+what, func() bool {
		at = slices.IndexFunc(s.received(), match)
		return at >= 0
	})
	return at
}

// callTo matches the tools/call the server received whose arguments hold marker.
func callTo(marker string) func(string) bool {
	return func(l string) bool {
		return gjson.Get(l, "method").String() == "tools/call" && strings.Contains(gjson.Get(l, "params.arguments").Raw, marker)
	}
}

// cancelOf matches the notifications/cancelled of request id (raw JSON).
func cancelOf(id string) func(string) bool {
	return func(l string) bool {
		return gjson.Get(l, "method").String() == "notifications/cancelled" && gjson.Get(l, "params.requestId").Raw == id
	}
}

// finish closes the host's side, waits for the proxy, and checks that nothing of the
// proxy's own traffic reached the host on the way out.
func (s *replaySession) finish() {
	s.t.Helper()
	s.Stdin.Close()
	s.ExitCode()
	for {
		msg, err := s.out.Read()
		if err != nil {
			break
		}
		if strings.Contains(string(msg), "bir:"+s.proxyID) && !strings.Contains(string(msg), `"host"`) {
			s.t.Errorf("the host got dispatch traffic: %s", msg)
		}
	}
}

// TestReplayInterleavedWithHostCalls: 200 dispatches and 200 host calls on one
// upstream, both concurrent. Every host call gets exactly its answer, the host sees
// no byte of dispatch traffic, every dispatch is posted once with its own result, and
// no dispatch goes upstream under an id a host request uses — the host's "bir:" ids
// included, even ones spelled in the proxy's own namespace.
func TestReplayInterleavedWithHostCalls(t *testing.T) {
	t.Parallel()
	s := startReplay(t)
	ctx := testutil.Context(t)
	s.handshake()

	// Host requests in flight throughout, under ids of the proxy's own namespace: the
	// ids the proxy would pick first. They hang until the host cancels them.
	const squatted = 50
	for i := 1; i <= squatted; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"bir:%s:%d","method":"tools/call","params":{"name":"hang","arguments":{"squat":%d}}}`, s.proxyID, i, i))
	}
	s.waitReceived(ctx, "the last squatting call", callTo(fmt.Sprintf(`"squat":%d`, squatted)))

	const n = 200
	hostIDs := make([]string, n) // raw JSON ids
	for i := range n {
		switch i % 4 {
		case 0:
			hostIDs[i] = fmt.Sprint(i + 1)
		case 1:
			hostIDs[i] = fmt.Sprintf(`"h-%d"`, i)
		case 2:
			hostIDs[i] = fmt.Sprintf(`"bir:%d"`, i)
		default:
			hostIDs[i] = fmt.Sprintf(`"bir:%s:%d"`, s.proxyID, 100000+i)
		}
	}
	byID := map[string]int{}
	for i, id := range hostIDs {
		byID[id] = i
	}

	// The host reads every answer and checks each is its own.
	answers := make(chan error, 1)
	go func() {
		got := map[int]bool{}
		for len(got) < n {
			msg, err := s.out.Read()
			if err != nil {
				answers <- fmt.Errorf("reading answer %d: %w", len(got)+1, err)
				return
			}
			id := gjson.GetBytes(msg, "id").Raw
			i, ok := byID[id]
			if !ok || got[i] {
				answers <- fmt.Errorf("the host got a line that is not the answer to one of its calls: %s", msg)
				return
			}
			if text := gjson.GetBytes(msg, "result.content.0.text").String(); text != fmt.Sprintf(`{"host":%d}`, i) {
				answers <- fmt.Errorf("call %s got someone else's answer: %s", id, msg)
				return
			}
			got[i] = true
		}
		answers <- nil
	}()

	var wg sync.WaitGroup
	const writers = 4
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n; i += writers {
				s.sendLocked(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"host":%d}}}`, hostIDs[i], i))
			}
		})
	}
	wg.Go(func() {
		for i := 0; i < n; i += 10 {
			var batch []recordertest.Dispatch
			for j := i; j < i+10; j++ {
				args := fmt.Sprintf(`{"d":"D-%d"}`, j)
				if j%3 == 0 {
					args = fmt.Sprintf(`{"_bir_call_id":"left-by-the-recorder","d":"D-%d"}`, j)
				}
				batch = append(batch, recordertest.Dispatch{DispatchID: fmt.Sprintf("D-%d", j), Tool: "echo", Arguments: json.RawMessage(args)})
			}
			s.dispatch(batch...)
			time.Sleep(time.Millisecond) // spread over the host's calls, not all in one poll
		}
	})
	wg.Wait()
	select {
	case err := <-answers:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the host's calls were not all answered")
	}

	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("D-%d", i)
	}
	results := s.results(ctx, ids...)
	for i, id := range ids {
		r := results[id]
		if r.Outcome != "ok" || r.Get("result.content.0.text").String() != fmt.Sprintf(`{"d":"D-%d"}`, i) {
			t.Fatalf("dispatch %s posted %s", id, r.Body)
		}
		if r.Get("durationMs").Type != gjson.Number || r.ProxyID != s.proxyID {
			t.Fatalf("dispatch %s: %s", id, r.Body)
		}
	}

	// What the upstream saw: no dispatch under a host's id, none under a squatted one,
	// and never the correlation key.
	hostSeen := map[string]bool{}
	var dispatchIDs []string
	for _, l := range s.received() {
		id := gjson.Get(l, "id").Raw
		args := gjson.Get(l, "params.arguments").Raw
		switch {
		case strings.Contains(args, `"d":"D-`):
			dispatchIDs = append(dispatchIDs, id)
			if strings.Contains(args, "_bir_call_id") {
				t.Fatalf("the upstream received the correlation key in a dispatch: %s", l)
			}
			if gjson.Get(l, "params._meta").Exists() || strings.Contains(l, "progressToken") {
				t.Fatalf("a session-era dispatch carries _meta: %s", l)
			}
		case id != "":
			hostSeen[id] = true
		}
	}
	if len(dispatchIDs) != n {
		t.Fatalf("the upstream received %d dispatches, want %d", len(dispatchIDs), n)
	}
	for _, id := range dispatchIDs {
		if hostSeen[id] {
			t.Fatalf("dispatch sent under id %s, which a host request also used", id)
		}
		if !strings.HasPrefix(id, `"bir:`+s.proxyID+`:`) {
			t.Fatalf("dispatch id %s is not in the proxy's namespace", id)
		}
	}

	// Each dispatch is also a step report: dispatchId set, callId null.
	snap, err := s.rec.Wait(ctx, func(v recordertest.Snapshot) bool {
		k := 0
		for _, st := range v.Steps {
			if st.Get("dispatchId").Type == gjson.String {
				k++
			}
		}
		return k >= n
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range snap.Steps {
		if st.Get("dispatchId").Type == gjson.String && (st.Get("callId").Type != gjson.Null || st.Get("outcome").String() != "ok") {
			t.Fatalf("dispatch report: %s", st.Body)
		}
	}

	for i := 1; i <= squatted; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"bir:%s:%d"}}`, s.proxyID, i))
	}
	s.finish()
}

// TestReplayWaitsForInitialized: a dispatch that arrives before the host's handshake
// reaches the upstream only after notifications/initialized; one the recorder cancels
// while it waits is posted cancelled without ever being sent.
func TestReplayWaitsForInitialized(t *testing.T) {
	t.Parallel()
	s := startReplay(t)
	ctx := testutil.Context(t)
	s.dispatch(recordertest.Dispatch{DispatchID: "early", Tool: "echo", Arguments: json.RawMessage(`{"early":true}`)},
		recordertest.Dispatch{DispatchID: "doomed", Tool: "echo", Arguments: json.RawMessage(`{"doomed":true}`)})
	s.handed(ctx, "early", "doomed")
	s.rec.Cancel(s.proxyID, "doomed")
	if r := s.results(ctx, "doomed")["doomed"]; r.Outcome != "cancelled" {
		t.Fatalf("doomed posted %s", r.Body)
	}

	s.Send(`{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test-host","version":"0.0.1"}},"jsonrpc":"2.0","id":0}`)
	s.recv()
	// Between the answer and notifications/initialized, a few round trips in which a
	// proxy that sent too early would be caught.
	for i := 1; i <= 5; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i))
		s.recv()
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if r := s.results(ctx, "early")["early"]; r.Outcome != "ok" {
		t.Fatalf("early posted %s", r.Body)
	}
	got := s.received()
	initialized := slices.IndexFunc(got, func(l string) bool { return strings.Contains(l, "notifications/initialized") })
	early := slices.IndexFunc(got, callTo(`"early"`))
	if initialized < 0 || early < initialized {
		t.Fatalf("the dispatch reached the server before notifications/initialized:\n%s", strings.Join(got, "\n"))
	}
	if slices.IndexFunc(got, callTo(`"doomed"`)) >= 0 {
		t.Fatalf("a dispatch cancelled while it waited was sent anyway")
	}
	s.finish()
}

// TestReplayStatelessCarriesHostMeta: in the stateless era a dispatch waits for the
// host's first request (here a server/discover, answered by a stateless server) and
// carries the host's protocol _meta fields, exactly as the host sent them, and no
// other (not the host's progressToken).
func TestReplayStatelessCarriesHostMeta(t *testing.T) {
	t.Parallel()
	s := startReplay(t, "--discover")
	ctx := testutil.Context(t)
	s.dispatch(recordertest.Dispatch{DispatchID: "sl", Tool: "echo", Arguments: json.RawMessage(`{"sl":1}`)})
	s.handed(ctx, "sl")
	meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"v2-host","version":"0.0.1"},"progressToken":"host-token","io.modelcontextprotocol/clientCapabilities":{ "elicitation" : {} }}`
	s.Send(`{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":` + meta + `}}`)
	if got := s.recv(); !strings.Contains(got, "supportedVersions") {
		t.Fatalf("discover answered %s", got)
	}
	if r := s.results(ctx, "sl")["sl"]; r.Outcome != "ok" {
		t.Fatalf("posted %s", r.Body)
	}
	got := s.received()
	i := slices.IndexFunc(got, callTo(`"sl"`))
	if i < 1 {
		t.Fatalf("the dispatch came before the host's first request:\n%s", strings.Join(got, "\n"))
	}
	want := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"v2-host","version":"0.0.1"},"io.modelcontextprotocol/clientCapabilities":{ "elicitation" : {} }}`
	if m := gjson.Get(got[i], "params._meta").Raw; m != want {
		t.Fatalf("dispatch _meta %s, want the host's protocol fields %s", m, want)
	}
	s.finish()
}

// TestReplayTimeoutCancelAndErrors: timeoutMs and a recorder's cancel each put
// notifications/cancelled upstream and post timeout / cancelled (and so say the step
// reports); a tool the server does not have is still sent and its error posted; the
// other answers are posted as what they are.
func TestReplayTimeoutCancelAndErrors(t *testing.T) {
	t.Parallel()
	s := startReplay(t)
	ctx := testutil.Context(t)
	s.handshake()
	s.dispatch(
		recordertest.Dispatch{DispatchID: "slow", Tool: "hang", Arguments: json.RawMessage(`{"slow":1}`), TimeoutMs: 300},
		recordertest.Dispatch{DispatchID: "stopme", Tool: "hang", Arguments: json.RawMessage(`{"stopme":1}`)},
		recordertest.Dispatch{DispatchID: "nope", Tool: "no_such_tool", Arguments: json.RawMessage(`{"nope":1}`)},
		recordertest.Dispatch{DispatchID: "fails", Tool: "fail", Arguments: json.RawMessage(`{}`)},
		recordertest.Dispatch{DispatchID: "asks", Tool: "need_input", Arguments: json.RawMessage(`{}`)},
	)
	stop := s.waitReceived(ctx, "the dispatch to cancel", callTo(`"stopme"`))
	s.rec.Cancel(s.proxyID, "stopme")
	rs := s.results(ctx, "slow", "stopme", "nope", "fails", "asks")
	for id, want := range map[string]string{"slow": "timeout", "stopme": "cancelled", "nope": "rpc_error", "fails": "tool_error", "asks": "input_required"} {
		if rs[id].Outcome != want {
			t.Errorf("%s posted %s, want outcome %s", id, rs[id].Body, want)
		}
	}
	if msg := rs["nope"].Get("error.message").String(); !strings.Contains(msg, "Unknown tool") {
		t.Errorf("unknown tool's error: %s", rs["nope"].Body)
	}
	if rs["asks"].Get("result.requestState").String() != "rawserver-state-1" {
		t.Errorf("input_required not posted as it came: %s", rs["asks"].Body)
	}
	slow := s.waitReceived(ctx, "the timed-out dispatch", callTo(`"slow"`))
	s.waitReceived(ctx, "the cancel of the timed-out dispatch", cancelOf(gjson.Get(s.received()[slow], "id").Raw))
	s.waitReceived(ctx, "the cancel of the cancelled dispatch", cancelOf(gjson.Get(s.received()[stop], "id").Raw))
	s.waitReceived(ctx, "the call of the unknown tool", callTo(`"nope"`))

	snap, err := s.rec.Wait(ctx, func(v recordertest.Snapshot) bool { return len(v.Steps) >= 5 })
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range snap.Steps {
		id := st.Get("dispatchId").String()
		if want := map[string]string{"slow": "timeout", "stopme": "cancelled"}[id]; want != "" && st.Get("outcome").String() != want {
			t.Errorf("step report of %s says %s, want %s", id, st.Get("outcome"), want)
		}
	}
	s.finish()
}

// TestReplayRecorderRestarted: a recorder that restarts mid-replay forgets every
// proxy; this one registers again and later dispatches run.
func TestReplayRecorderRestarted(t *testing.T) {
	t.Parallel()
	s := startReplay(t)
	ctx := testutil.Context(t)
	s.handshake()
	s.dispatch(recordertest.Dispatch{DispatchID: "a1", Tool: "echo", Arguments: json.RawMessage(`{"a":1}`)})
	s.results(ctx, "a1")
	if err := s.rec.Restart(); err != nil {
		t.Fatal(err)
	}
	s.dispatch(recordertest.Dispatch{DispatchID: "a2", Tool: "echo", Arguments: json.RawMessage(`{"a":2}`)})
	// a1's 200 may have been cut by the restart, and a1 posted again.
	if r := s.resultsRepeats(ctx, true, "a2")["a2"]; r.Outcome != "ok" {
		t.Fatalf("a2 posted %s", r.Body)
	}
	if regs := s.rec.Registrations(); len(regs) < 2 {
		t.Fatalf("%d registrations: the proxy did not register again", len(regs))
	}
	s.finish()
}

// TestReplayRecorderDownForAMinute: while the recorder is unreachable the proxy
// knocks a few dozen times at most in a minute (backoff, not a spin), and host calls
// go on unslowed; once it is back, dispatches run again.
func TestReplayRecorderDownForAMinute(t *testing.T) {
	t.Parallel()
	down, most := time.Minute, 36
	if testing.Short() {
		down, most = 10*time.Second, 20
	}
	s := startReplay(t)
	ctx := testutil.Context(t)
	s.handshake()
	s.dispatch(recordertest.Dispatch{DispatchID: "before", Tool: "echo", Arguments: json.RawMessage(`{}`)})
	s.results(ctx, "before")
	if err := s.rec.Unreachable(); err != nil {
		t.Fatal(err)
	}
	// The test's own process may stop for a while (a neighbour test's 100 MB
	// buffers, under -race): that is not the proxy making the host wait, and a call
	// that took 3 s once failed the check for it.
	stalls := testutil.WatchStalls(t)
	var worst, worstRaw time.Duration
	calls := 0
	for end := time.Now().Add(down); time.Now().Before(end); calls++ {
		t0 := time.Now()
		s.Send(toolCall(1000+calls, fmt.Sprintf(`{"_bir_call_id":"c-%d"}`, calls)))
		s.recv()
		t1 := time.Now()
		worstRaw = max(worstRaw, t1.Sub(t0))
		worst = max(worst, t1.Sub(t0)-stalls.Stalled(t0, t1))
		time.Sleep(20 * time.Millisecond) // a host at an agent's pace
	}
	refused := s.rec.Refused()
	t.Logf("recorder unreachable for %s: %d connection attempts at its port; %d host calls, slowest %s (%s with the test's own stalls)", down, refused, calls, worst, worstRaw)
	if refused > most {
		t.Errorf("%d attempts while the recorder was down for %s; want at most %d", refused, down, most)
	}
	if refused == 0 {
		t.Errorf("no attempt at all: the proxy stopped trying")
	}
	if worst > time.Second {
		t.Errorf("a host call took %s while the recorder was down", worst)
	}
	if err := s.rec.Up(); err != nil {
		t.Fatal(err)
	}
	s.dispatch(recordertest.Dispatch{DispatchID: "after", Tool: "echo", Arguments: json.RawMessage(`{}`)})
	if r := s.results(ctx, "after")["after"]; r.Outcome != "ok" {
		t.Fatalf("after posted %s", r.Body)
	}
	s.finish()
}

// TestNoPollWithoutRecorder: under BIR_OFF=1 and in journal mode no request of any
// kind, polls included, reaches a recorder that is running.
func TestNoPollWithoutRecorder(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	state := t.TempDir()
	for _, mode := range []struct {
		name string
		env  []string
		dir  string
	}{
		{"off", append(rec.Env(), "BIR_OFF=1"), ""},
		// No recorder configured (an empty working directory, no BIR_RECORDER_URL).
		{"journal", []string{"BIR_OFF=0", "BIR_RECORDER_URL=", "XDG_STATE_HOME=" + state}, t.TempDir()},
	} {
		s := startProxyIn(t, mode.dir, mode.env, "--server", "nopoll-"+mode.name, "--", raw, "--reply")
		s.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
		s.recv()
		s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		s.Send(toolCall(1, `{"_bir_call_id":"c-1"}`))
		s.recv()
		s.Stdin.Close()
		if code := s.ExitCode(); code != 0 {
			t.Fatalf("%s: exit %d", mode.name, code)
		}
	}
	if reqs := rec.Requests(); len(reqs) != 0 {
		t.Fatalf("the recorder got %d requests (first %s %s)", len(reqs), reqs[0].Method, reqs[0].Path)
	}
	if data, err := os.ReadFile(filepath.Join(state, "bir-proxy", "journal", "nopoll-journal.jsonl")); err != nil || !strings.Contains(string(data), `"callId":"c-1"`) {
		t.Fatalf("journal mode did not write the journal: %v %s", err, data)
	}
}

// TestReplayExitWithDispatchInFlight: a dispatch still running when the host leaves,
// or when the proxy is told to stop, is posted cancelled, and the proxy exits within
// its usual grace.
func TestReplayExitWithDispatchInFlight(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"eof", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			s := startReplay(t)
			ctx := testutil.Context(t)
			s.handshake()
			s.dispatch(recordertest.Dispatch{DispatchID: "stuck", Tool: "hang", Arguments: json.RawMessage(`{"stuck":1}`)},
				recordertest.Dispatch{DispatchID: "a", Tool: "hang", Arguments: json.RawMessage(`{}`)},
				recordertest.Dispatch{DispatchID: "b", Tool: "hang", Arguments: json.RawMessage(`{}`)},
				recordertest.Dispatch{DispatchID: "c", Tool: "hang", Arguments: json.RawMessage(`{}`)},
				recordertest.Dispatch{DispatchID: "queued", Tool: "hang", Arguments: json.RawMessage(`{}`)})
			s.waitReceived(ctx, "the dispatch", callTo(`"stuck"`))
			s.handed(ctx, "queued")
			t0 := time.Now()
			if how == "eof" {
				s.Stdin.Close()
			} else if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.Done():
			case <-ctx.Done():
				t.Fatal("the proxy did not exit")
			}
			took := time.Since(t0)
			t.Logf("exited %s after the host left", took.Round(time.Millisecond))
			// The server exits at once on EOF; the proxy's own grace for dispatch
			// results is a second, as for reports.
			if took > 4*time.Second {
				t.Errorf("the proxy took %s to exit", took)
			}
			rs := s.results(ctx, "stuck", "a", "b", "c", "queued")
			for id, r := range rs {
				if r.Outcome != "cancelled" {
					t.Errorf("%s posted %s, want cancelled", id, r.Body)
				}
			}
			if msg, err := s.out.Read(); err != io.EOF {
				t.Errorf("the host got more than its handshake: %s %v", msg, err)
			}
		})
	}
}

// TestReplayServerDiesUnderDispatches: a server that goes away on its own while
// dispatches run or wait leaves every one of them posted upstream_lost (not
// cancelled: the proxy was not exiting when it happened).
func TestReplayServerDiesUnderDispatches(t *testing.T) {
	t.Parallel()
	// initialize, notifications/initialized, then four dispatches: it exits after
	// receiving the last that can run. Without revival the proxy ends with it.
	s := startReplayWith(t, []string{"--no-revive"}, "--exit-after", "6", "--exit-code", "3")
	ctx := testutil.Context(t)
	s.handshake()
	var ids []string
	var ds []recordertest.Dispatch
	for i := range 6 {
		ids = append(ids, fmt.Sprintf("x%d", i))
		ds = append(ds, recordertest.Dispatch{DispatchID: ids[i], Tool: "hang", Arguments: json.RawMessage(`{}`)})
	}
	s.dispatch(ds...) // in one poll answer: all reach the proxy before the server dies
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("the proxy outlived its server")
	}
	rs := s.results(ctx, ids...)
	for id, r := range rs {
		// The four running were lost with the server. The two still queued are lost
		// too, or cancelled when the proxy's exit — which the loss causes without
		// revival — is seen first: both are the SPEC's answers for a queued dispatch
		// when the proxy exits because its server went away.
		queued := id == "x4" || id == "x5"
		if r.Outcome != "upstream_lost" && !(queued && r.Outcome == "cancelled") {
			t.Errorf("%s posted %s, want upstream_lost", id, r.Body)
		}
	}
	if code := s.ExitCode(); code != 3 {
		t.Errorf("exit %d, want the server's 3", code)
	}
}

// TestReplayServerRevivedUnderDispatches: with revival (the default), the dispatches
// in flight when the server dies are posted upstream_lost, the proxy stays, and a
// later dispatch runs on the revived server.
func TestReplayServerRevivedUnderDispatches(t *testing.T) {
	t.Parallel()
	s := startReplay(t, "--exit-after", "6", "--exit-code", "3")
	ctx := testutil.Context(t)
	s.handshake()
	var ids []string
	var ds []recordertest.Dispatch
	for i := range 4 {
		ids = append(ids, fmt.Sprintf("y%d", i))
		ds = append(ds, recordertest.Dispatch{DispatchID: ids[i], Tool: "hang", Arguments: json.RawMessage(`{}`)})
	}
	s.dispatch(ds...)
	for id, r := range s.results(ctx, ids...) {
		if r.Outcome != "upstream_lost" {
			t.Errorf("%s posted %s, want upstream_lost", id, r.Body)
		}
	}
	s.dispatch(recordertest.Dispatch{DispatchID: "after", Tool: "echo", Arguments: json.RawMessage(`{"n":1}`)})
	if r := s.results(ctx, "after")["after"]; r.Outcome != "ok" {
		t.Fatalf("the dispatch after the revival posted %s, want ok", r.Body)
	}
}

// TestReplayFollowsTasks: a dispatch answered with a task handle is followed by the
// proxy (SPEC §4), in both eras' shapes: tasks/get at the task's interval under the
// proxy's own ids (2025-11-25: then tasks/result) until the task ends, and the
// recorder gets the tool's final result; a task still working when timeoutMs passes
// gets tasks/cancel (seen in the server's log) and is posted timeout. The host sees
// none of it. In the stateless era every task request carries the host's protocol
// _meta, as the dispatch does.
func TestReplayFollowsTasks(t *testing.T) {
	t.Parallel()
	for _, era := range []string{"session", "stateless"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			var s *replaySession
			meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
			if era == "session" {
				s = startReplay(t)
				s.handshake()
			} else {
				s = startReplay(t, "--discover")
				s.Send(`{"jsonrpc":"2.0","id":"probe","method":"server/discover","params":{"_meta":` + meta + `}}`)
				if got := s.recv(); !strings.Contains(got, "supportedVersions") {
					t.Fatalf("discover answered %s", got)
				}
			}
			ctx := testutil.Context(t)
			s.dispatch(
				recordertest.Dispatch{DispatchID: "ext", Tool: "task", Arguments: json.RawMessage(`{"ext":1}`), TimeoutMs: 60000},
				recordertest.Dispatch{DispatchID: "util", Tool: "task_legacy", Arguments: json.RawMessage(`{"util":1}`), TimeoutMs: 60000},
				recordertest.Dispatch{DispatchID: "ext-late", Tool: "task_forever", Arguments: json.RawMessage(`{"extlate":1}`), TimeoutMs: 1000},
				recordertest.Dispatch{DispatchID: "util-late", Tool: "task_legacy_forever", Arguments: json.RawMessage(`{"utillate":1}`), TimeoutMs: 1000},
			)
			rs := s.results(ctx, "ext", "util", "ext-late", "util-late")
			for id, want := range map[string]string{"ext": `{"ext":1}`, "util": `{"util":1}`} {
				if r := rs[id]; r.Outcome != "ok" || r.Get("result.content.0.text").String() != want {
					t.Errorf("%s posted %s, want ok with the tool's result", id, r.Body)
				}
			}
			for _, id := range []string{"ext-late", "util-late"} {
				if r := rs[id]; r.Outcome != "timeout" || !strings.Contains(r.Get("error.message").String(), "tasks/cancel was sent") {
					t.Errorf("%s posted %s, want timeout", id, r.Body)
				}
			}

			// rawserver numbers its tasks in the order the calls came: the dispatches'.
			taskOf := map[string]string{}
			n := 0
			for _, l := range s.received() {
				if gjson.Get(l, "method").String() == "tools/call" {
					n++
					taskOf[gjson.Get(l, "params.name").String()] = fmt.Sprintf("rawtask-%d", n)
				}
			}
			s.waitReceived(ctx, "the tasks/cancel of the late tasks", func(string) bool {
				cancelled := map[string]bool{}
				for _, l := range s.received() {
					if gjson.Get(l, "method").String() == "tasks/cancel" {
						cancelled[gjson.Get(l, "params.taskId").String()] = true
					}
				}
				return cancelled[taskOf["task_forever"]] && cancelled[taskOf["task_legacy_forever"]]
			})
			seen := map[string]int{}
			for _, l := range s.received() {
				m := gjson.Get(l, "method").String()
				if !strings.HasPrefix(m, "tasks/") {
					continue
				}
				seen[m+" "+gjson.Get(l, "params.taskId").String()]++
				if id := gjson.Get(l, "id").String(); !strings.HasPrefix(id, "bir:"+s.proxyID+":") {
					t.Errorf("a task request under an id not the proxy's own: %s", l)
				}
				if got := gjson.Get(l, "params._meta").Raw; era == "stateless" && got != meta || era == "session" && got != "" {
					t.Errorf("%s carries _meta %s", m, got)
				}
			}
			for name, want := range map[string][]string{
				"task":                {"tasks/get"},
				"task_legacy":         {"tasks/get", "tasks/result"},
				"task_forever":        {"tasks/get", "tasks/cancel"},
				"task_legacy_forever": {"tasks/get", "tasks/cancel"},
			} {
				for _, m := range want {
					if seen[m+" "+taskOf[name]] == 0 {
						t.Errorf("no %s of %s's task: %v", m, name, seen)
					}
				}
			}
			for _, name := range []string{"task", "task_legacy"} {
				if seen["tasks/cancel "+taskOf[name]] != 0 {
					t.Errorf("a task that ended was cancelled: %s", name)
				}
			}
			// Polled at the task's 100 ms, not faster: about ten in the late ones' second.
			if g := seen["tasks/get "+taskOf["task_forever"]]; g > 11 {
				t.Errorf("%d tasks/get in a second at pollIntervalMs 100", g)
			}
			s.finish()
		})
	}
}

// TestReplayExitWhileFollowingTask: the host leaving while a dispatch follows a task
// that never ends (no timeoutMs) posts it cancelled, and the proxy exits as promptly
// as with a plain call in flight: the tasks/cancel it sends on the way out waits for
// no one.
func TestReplayExitWhileFollowingTask(t *testing.T) {
	t.Parallel()
	s := startReplay(t)
	ctx := testutil.Context(t)
	s.handshake()
	s.dispatch(recordertest.Dispatch{DispatchID: "endless", Tool: "task_forever", Arguments: json.RawMessage(`{"endless":1}`)})
	s.waitReceived(ctx, "a tasks/get", func(l string) bool { return gjson.Get(l, "method").String() == "tasks/get" })
	t0 := time.Now()
	s.Stdin.Close()
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("the proxy did not exit")
	}
	took := time.Since(t0)
	t.Logf("exited %s after the host left", took.Round(time.Millisecond))
	if took > 4*time.Second {
		t.Errorf("the proxy took %s to exit", took)
	}
	if r := s.results(ctx, "endless")["endless"]; r.Outcome != "cancelled" {
		t.Errorf("posted %s, want cancelled", r.Body)
	}
	if msg, err := s.out.Read(); err != io.EOF {
		t.Errorf("the host got more than its handshake: %s %v", msg, err)
	}
}

// TestReplayTaskHugeAnswersStayBounded: a task whose every tasks/get answer is 8 MB
// (a statusMessage of x's; 100 ms apart, for five seconds) and another that completes
// with an 8 MB result cost the proxy one answer at a time: its peak RSS stays under a
// bound well below what the answers add up to (over 200 MB), and the completed one's
// result is posted (clipped past 16 MiB only).
func TestReplayTaskHugeAnswersStayBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the proxy's RSS from /proc")
	}
	t.Parallel()
	const size = 8 << 20
	s := startReplay(t, "--reply-size", fmt.Sprint(size))
	ctx := testutil.Context(t)
	s.handshake()
	s.dispatch(
		recordertest.Dispatch{DispatchID: "big", Tool: "task", Arguments: json.RawMessage(`{}`), TimeoutMs: 60000},
		recordertest.Dispatch{DispatchID: "endless", Tool: "task_forever", Arguments: json.RawMessage(`{}`), TimeoutMs: 5000},
	)
	rs := s.results(ctx, "big", "endless")
	if r := rs["big"]; r.Outcome != "ok" || len(r.Get("result.content.0.text").String()) != size {
		t.Errorf("big posted %s (%d bytes)", r.Outcome, len(r.Body))
	}
	if r := rs["endless"]; r.Outcome != "timeout" {
		t.Errorf("endless posted %s", r.Body)
	}
	gets := 0
	for _, l := range s.received() {
		if strings.Contains(l, `"tasks/get"`) {
			gets++
		}
	}
	hwm := procStatusKB(t, s.Cmd.Process.Pid, "VmHWM") << 10
	t.Logf("%d tasks/get answers of 8 MB; peak RSS %d MB", gets, hwm>>20)
	if gets < 25 {
		t.Fatalf("only %d tasks/get: the answers did not add up", gets)
	}
	const bound = 150 << 20
	if hwm > bound {
		t.Errorf("peak RSS %d MB, over %d MB", hwm>>20, bound>>20)
	}
	s.finish()
}
