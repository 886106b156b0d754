package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/internal/jcs"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// recording returns the environment that points a proxy at rec, with recording on.
func recording(rec *recordertest.Server, state string) []string {
	return append(rec.Env(), "BIR_OFF=0", "XDG_STATE_HOME="+state)
}

func toolCall(id int, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":%s}}`, id, args)
}

// randomArgs is an arguments object with the correlation key placed, repeated and
// spelled at random, and a nested copy that belongs to the tool.
func randomArgs(r *rand.Rand, callID string) string {
	spellings := []string{`"_bir_call_id"`, `"\u005fbir_call_id"`, `"_bir\u005fcall_id"`}
	var ms []string
	for i := range r.IntN(5) {
		ms = append(ms, fmt.Sprintf(`"k%d":%s`, i, []string{`1`, `"v"`, `9007199254740993`, `{"_bir_call_id":"nested"}`, `[1.0,null]`, `"\u00e9"`}[r.IntN(6)]))
	}
	for range 1 + r.IntN(2) {
		pos := r.IntN(len(ms) + 1)
		ms = append(ms[:pos], append([]string{spellings[r.IntN(len(spellings))] + `:"` + callID + `"`}, ms[pos:]...)...)
	}
	return "{" + strings.Join(ms, []string{",", ", ", " ,\t "}[r.IntN(3)]) + "}"
}

// topLevelKeys lists the decoded top-level keys of a JSON object, duplicates kept.
func topLevelKeys(t *testing.T, obj string) []string {
	d := json.NewDecoder(strings.NewReader(obj))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", obj)
	}
	var keys []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatalf("%v in %s", err, obj)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatalf("%v in %s", err, obj)
		}
	}
	return keys
}

// TestKeyNeverReachesUpstream checks the bytes the upstream received for random calls,
// with recording on and off.
func TestKeyNeverReachesUpstream(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	for _, mode := range []string{"off", "on"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			record := filepath.Join(t.TempDir(), "received")
			env := []string{"BIR_OFF=1"}
			var rec *recordertest.Server
			if mode == "on" {
				rec = recordertest.Start(t)
				env = recording(rec, t.TempDir())
			}
			s := startProxy(t, env, "--server", "prop", "--", raw, "--reply", "--record", record)
			r := rand.New(rand.NewPCG(7, uint64(len(mode))))
			const n = 300
			sent := make([]string, n)
			for i := range n {
				sent[i] = randomArgs(r, fmt.Sprintf("c-%d", i))
				s.Send(toolCall(i, sent[i]))
				s.recv()
			}
			s.end()
			f, err := os.Open(record)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			i := 0
			for ; sc.Scan(); i++ {
				args := gjson.Get(sc.Text(), "params.arguments").Raw
				for _, k := range topLevelKeys(t, args) {
					if k == intercept.DefaultCorrelationKey {
						t.Fatalf("the upstream received the correlation key:\nsent %s\n got %s", sent[i], sc.Text())
					}
				}
				if want := strings.Count(sent[i], `"k`); strings.Count(args, `"k`) != want {
					t.Fatalf("other arguments lost:\nsent %s\n got %s", sent[i], args)
				}
			}
			if i != n {
				t.Fatalf("upstream received %d lines, want %d", i, n)
			}
			if rec == nil {
				return
			}
			steps, err := rec.WaitSteps(testutil.Context(t), n)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range steps {
				id := st.Get("callId").String()
				var k int
				fmt.Sscanf(id, "c-%d", &k)
				// The fingerprint is over what the host meant: its arguments minus the key.
				stripped, _ := jcs.Fingerprint([]byte(gjson.Get(readLine(t, record, k), "params.arguments").Raw))
				if st.Get("argsFingerprint").String() != stripped {
					t.Errorf("%s: fingerprint %s, want %s", id, st.Get("argsFingerprint"), stripped)
				}
			}
		})
	}
}

// calls makes tools/calls from to to (inclusive), one at a time, each with the
// arguments args gives for its id, and waits for each answer.
func (s *testHost) calls(from, to int, args func(i int) string) {
	s.t.Helper()
	for i := from; i <= to; i++ {
		s.Send(toolCall(i, args(i)))
		s.recv()
	}
}

func readLine(t *testing.T, path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(data), "\n")[n]
}

// TestRecorderDownThenUp: a whole session of calls with the recorder down, then up:
// every report arrives once, with seq 1..n in call order.
func TestRecorderDownThenUp(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	rec.Down()
	s := startProxy(t, recording(rec, t.TempDir()), "--server", "down", "--", raw, "--reply")
	const n = 1000
	s.calls(1, n, func(i int) string { return fmt.Sprintf(`{"_bir_call_id":"c-%d","i":%d}`, i, i) })
	if err := rec.Up(); err != nil {
		t.Fatal(err)
	}
	steps, err := rec.WaitSteps(testutil.Context(t), n)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]string{}
	for _, st := range steps {
		if _, dup := seen[st.Seq]; dup {
			t.Fatalf("seq %d delivered twice", st.Seq)
		}
		seen[st.Seq] = st.Get("callId").String()
	}
	for i := uint64(1); i <= n; i++ {
		if seen[i] != fmt.Sprintf("c-%d", i) {
			t.Fatalf("seq %d is %q, want c-%d: reports lost or out of order", i, seen[i], i)
		}
	}
	if d := rec.Duplicates(); d != 0 {
		// Allowed by the protocol, but a proxy that resends acknowledged reports wastes
		// the recorder's time; this one should not.
		t.Logf("%d duplicate deliveries", d)
	}
	s.end()
}

func TestRecorderRestartMidSession(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	s := startProxy(t, recording(rec, t.TempDir()), "--server", "restart", "--", raw, "--reply")
	s.calls(1, 10, func(i int) string { return `{}` })
	ctx := testutil.Context(t)
	if _, err := rec.WaitSteps(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := rec.Restart(); err != nil {
		t.Fatal(err)
	}
	s.calls(11, 20, func(i int) string { return `{}` })
	steps, err := rec.WaitSteps(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 20 {
		t.Fatalf("%d steps", len(steps))
	}
	regs := rec.Registrations()
	if len(regs) < 2 {
		t.Fatalf("the proxy did not register again after the restart: %d registrations", len(regs))
	}
	s.end()
}

// TestSIGKILLedProxyReportsDeliveredByNextRun: reports spooled by a proxy that was
// SIGKILLed arrive through the next run for the same server, under the old proxyId.
func TestSIGKILLedProxyReportsDeliveredByNextRun(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	rec.Down()
	state := t.TempDir()
	s := startProxy(t, recording(rec, state), "--server", "killed", "--", raw, "--reply")
	const n = 50
	s.calls(1, n, func(i int) string { return fmt.Sprintf(`{"_bir_call_id":"old-%d"}`, i) })
	// Reports reach the spool within ~100 ms of their call; wait for them there (a file
	// another process writes: only visible by looking).
	spool := filepath.Join(state, "bir-proxy", "spool")
	testutil.Eventually(t, fmt.Sprintf("%d reports in the spool", n), func() bool { return countSpooled(spool) >= n })
	if err := s.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.Wait() // killed: no status of its own to check
	if err := rec.Up(); err != nil {
		t.Fatal(err)
	}
	next := startProxy(t, recording(rec, state), "--server", "killed", "--", raw, "--reply")
	steps, err := rec.WaitSteps(testutil.Context(t), n)
	if err != nil {
		t.Fatal(err)
	}
	old := steps[0].ProxyID
	for _, st := range steps {
		if st.ProxyID != old || !strings.HasPrefix(st.Get("callId").String(), "old-") {
			t.Fatalf("unexpected step %s", st.Body)
		}
	}
	next.end()
}

func countSpooled(dir string) int {
	n := 0
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		n += bytes.Count(data, []byte(`"seq"`))
	}
	return n
}

func TestWrongTokenIsSaidOnceAndSpooled(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	rec.WrongToken(true)
	s := startProxy(t, recording(rec, t.TempDir()), "--server", "tok", "--", raw, "--reply")
	s.calls(1, 20, func(i int) string { return `{}` })
	ctx := testutil.Context(t)
	if err := s.Stderr.WaitFor(ctx, "401"); err != nil {
		t.Fatal(err)
	}
	rec.WrongToken(false)
	if _, err := rec.WaitSteps(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(s.Stderr.String(), "401"); c != 1 {
		t.Errorf("the 401 was said %d times, want once:\n%s", c, s.Stderr.String())
	}
	s.end()
}

// TestMalformedCallsForwardedAndReported: calls the proxy can only partly understand
// reach the server unchanged and are each reported.
func TestMalformedCallsForwardedAndReported(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	record := filepath.Join(t.TempDir(), "received")
	s := startProxy(t, recording(rec, t.TempDir()), "--server", "bad", "--", raw, "--reply", "--record", record)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":"not an object"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{"x":1}}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"no-id","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call"}`,
	}
	for _, l := range lines {
		s.Send(l)
	}
	for range 3 { // the one without an id gets no answer
		s.recv()
	}
	steps, err := rec.WaitSteps(testutil.Context(t), len(lines))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != len(lines) {
		t.Fatalf("%d reports for %d calls", len(steps), len(lines))
	}
	s.end()
	got, _ := os.ReadFile(record)
	if string(got) != strings.Join(lines, "\n")+"\n" {
		t.Fatalf("malformed calls changed on the way:\n%s", got)
	}
}

// TestHugeResultUnchangedAndReportCapped: a 100 MB tool result reaches the host
// unchanged while its report stays under the cap.
func TestHugeResultUnchangedAndReportCapped(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	const size = 100 << 20
	call := toolCall(1, `{"_bir_call_id":"huge"}`)

	direct := exec.CommandContext(testutil.Context(t), raw, "--reply", "--reply-size", fmt.Sprint(size))
	direct.Stdin = strings.NewReader(call + "\n")
	want, err := direct.Output()
	if err != nil {
		t.Fatal(err)
	}

	s := startProxy(t, recording(rec, t.TempDir()), "--server", "huge", "--", raw, "--reply", "--reply-size", fmt.Sprint(size))
	s.Send(call)
	got := s.recv()
	if len(got) < size || sha256.Sum256([]byte(got+"\n")) != sha256.Sum256(want) {
		t.Fatalf("the host got %d bytes, not the server's %d-byte answer", len(got), len(want)-1)
	}
	steps, err := rec.WaitSteps(testutil.Context(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(steps[0].Body); n > intercept.DefaultReportCap {
		t.Fatalf("report is %d bytes, over the cap", n)
	}
	if !steps[0].Get("resultClipped").Bool() || steps[0].Get("outcome").String() != "ok" {
		t.Fatalf("report: %.300s", steps[0].Body)
	}
	s.end()
}

// TestJournalByDefault: with no recorder configured, reports go to the journal.
func TestJournalByDefault(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	state := t.TempDir()
	// Run from an empty directory so no .bir/recorder.json above the checkout is found.
	s := startProxyIn(t, t.TempDir(), []string{"BIR_OFF=0", "XDG_STATE_HOME=" + state, "BIR_RECORDER_URL="}, "--server", "journal", "--", raw, "--reply")
	s.Send(toolCall(1, `{"_bir_call_id":"j-1","password":"hunter2"}`))
	s.recv()
	s.end()
	data, err := os.ReadFile(filepath.Join(state, "bir-proxy", "journal", "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"callId":"j-1"`) || strings.Contains(string(data), "hunter2") {
		t.Fatalf("journal: %s", data)
	}
}

// TestLogShowsWaitingReports: with a recorder configured but down, the calls'
// reports wait in the spool, and bir-proxy log shows them, marked waiting, naming
// the recorder; a server with no reports is said to have none.
func TestLogShowsWaitingReports(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	bin := testutil.Build(t, "./cmd/bir-proxy")
	rec := recordertest.Start(t)
	rec.Down()
	state := t.TempDir()
	env := recording(rec, state)
	s := startProxy(t, env, "--server", "down", "--", raw, "--reply")
	s.Send(toolCall(1, `{"_bir_call_id":"w-1","q":"first"}`), toolCall(2, `{"q":"second"}`))
	s.recv()
	s.recv()
	s.end()

	log := func(args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), testutil.Guard)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"log"}, args...)...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := log()
	if code != 0 || strings.Count(out, "  waiting  ") != 2 || !strings.Contains(out, `{"q":"first"}`) ||
		!strings.Contains(out, "2 reports are waiting in the spool") || !strings.Contains(out, "for the recorder at "+rec.URL()+" (from BIR_RECORDER_URL), which is not reachable") {
		t.Fatalf("log: %d\n%s\n%s", code, out, errOut)
	}
	id := strings.Fields(strings.Split(out, "\n")[1])[0]
	if code, out, _ := log("--show", id); code != 0 || !strings.Contains(out, "waiting in the spool") || !strings.Contains(out, "\"q\": \"first\"") {
		t.Errorf("--show %s: %d\n%s", id, code, out)
	}
	if code, out, errOut := log("--server", "nosuch"); code != 1 || out != "" || !strings.Contains(errOut, `no reports for server "nosuch"; servers with reports: down (2)`) {
		t.Errorf("--server nosuch: %d %q %q", code, out, errOut)
	}
}

// TestLogStatsOfAJournal: a scripted session against rawserver in journal mode (no
// recorder), with results of known sizes, some long enough to stream to the host; then
// `bir-proxy log --stats --json` gives per server and tool the calls, errors and the
// result sizes as the server sent them (not the clipped results the reports keep).
func TestLogStatsOfAJournal(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	bin := testutil.Build(t, "./cmd/bir-proxy")
	state := t.TempDir()
	env := []string{"BIR_OFF=0", "XDG_STATE_HOME=" + state, "BIR_RECORDER_URL="}
	call := func(id int, tool string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
	}
	// 300,000 bytes of text: past the stream threshold, so the answer is reduced as it
	// streams to the host and the report keeps a clip of it.
	const bigText, smallText = 300_000, 100
	textResult := func(n int) int64 {
		return int64(len(`{"content":[{"type":"text","text":"`) + n + len(`"}],"isError":false}`))
	}
	failResult := int64(len(`{"content":[{"type":"text","text":"fail tool failed as asked"}],"isError":true}`))
	rpcError := int64(len(`{"code":-32000,"message":"rpc_error tool failed as asked"}`))

	big := startProxyIn(t, t.TempDir(), env, "--server", "big", "--", raw, "--reply", "--reply-size", fmt.Sprint(bigText))
	for i, tool := range []string{"echo", "fail", "echo", "rpc_error", "echo"} {
		big.Send(call(i+1, tool))
		if got := big.recv(); !strings.Contains(got, fmt.Sprintf(`"id":%d`, i+1)) {
			t.Fatalf("answer %d: %.200s", i+1, got)
		}
	}
	big.end()
	small := startProxyIn(t, t.TempDir(), env, "--server", "small", "--", raw, "--reply", "--reply-size", fmt.Sprint(smallText))
	small.Send(call(1, "echo"), call(2, "echo"))
	small.recv()
	small.recv()
	small.end()

	ctx, cancel := context.WithTimeout(t.Context(), testutil.Guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "log", "--stats", "--json")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("log --stats --json: %v\n%s", err, stderr.String())
	}
	var doc struct {
		Tools []struct {
			Server, Tool                                           string
			Calls, Errors, ResultBytesP50, ResultBytesMax, Trimmed int64
			P50Ms, P95Ms                                           float64
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout.String())
	}
	type figures struct{ calls, errors, p50, max int64 }
	want := map[string]figures{
		"big/echo":      {3, 0, textResult(bigText), textResult(bigText)},
		"big/fail":      {1, 1, failResult, failResult},
		"big/rpc_error": {1, 1, rpcError, rpcError},
		"small/echo":    {2, 0, textResult(smallText), textResult(smallText)},
	}
	if len(doc.Tools) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(doc.Tools), len(want), stdout.String())
	}
	for i, r := range doc.Tools {
		w := want[r.Server+"/"+r.Tool]
		got := figures{r.Calls, r.Errors, r.ResultBytesP50, r.ResultBytesMax}
		if got != w || r.Trimmed != 0 || r.P50Ms <= 0 || r.P95Ms < r.P50Ms {
			t.Errorf("%s/%s: %+v p50 %vms p95 %vms trimmed %d, want %+v", r.Server, r.Tool, got, r.P50Ms, r.P95Ms, r.Trimmed, w)
		}
		if i == 0 && r.Server+"/"+r.Tool != "big/echo" {
			t.Errorf("first row %s/%s, want the costliest, big/echo", r.Server, r.Tool)
		}
	}
	// The reports themselves kept a clip of the long results.
	data, err := os.ReadFile(filepath.Join(state, "bir-proxy", "journal", "big.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"resultClipped":true`) || len(data) > bigText {
		t.Errorf("the journal holds %d bytes for three results of %d", len(data), bigText)
	}
}
