package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// reviveFixture is a rawserver that records what it receives and where its pid is.
type reviveFixture struct {
	raw, dir, record, pidfile, starts string
}

func newReviveFixture(t *testing.T) *reviveFixture {
	dir := t.TempDir()
	return &reviveFixture{
		raw:     testutil.Build(t, "./testdata/rawserver"),
		dir:     dir,
		record:  filepath.Join(dir, "received"),
		pidfile: filepath.Join(dir, "pid"),
		starts:  filepath.Join(dir, "starts"),
	}
}

// args runs the fixture under the proxy: proxy flags, then the server's own.
func (f *reviveFixture) args(proxy []string, server ...string) []string {
	a := append([]string{"--server", "raw"}, proxy...)
	a = append(a, "--", f.raw, "--record", f.record, "--pidfile", f.pidfile, "--starts", f.starts)
	return append(a, server...)
}

// startPids are the pids of every start of the server, in order.
func (f *reviveFixture) startPids(t *testing.T) []int {
	t.Helper()
	data, err := os.ReadFile(f.starts)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, l := range strings.Fields(string(data)) {
		p, err := strconv.Atoi(l)
		if err != nil {
			t.Fatalf("starts file: %q", data)
		}
		pids = append(pids, p)
	}
	return pids
}

// generations splits what the servers received into one list of lines per start: a
// revived server's first line is the replayed initialize.
func (f *reviveFixture) generations(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile(f.record)
	if err != nil {
		t.Fatal(err)
	}
	var gens [][]string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if l == "" {
			continue
		}
		if strings.Contains(l, `"method":"initialize"`) || gens == nil {
			gens = append(gens, nil)
		}
		gens[len(gens)-1] = append(gens[len(gens)-1], strings.TrimSuffix(l, "\n"))
	}
	return gens
}

// kill9 SIGKILLs the server that is running now and waits until it is gone.
func (f *reviveFixture) kill9(t *testing.T) int {
	t.Helper()
	pid := testutil.ReadPidfile(t, f.pidfile)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := testutil.WaitExit(testutil.Context(t), pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitRecorded waits until the server has received a line containing sub.
func (f *reviveFixture) waitRecorded(t *testing.T, sub string) {
	t.Helper()
	testutil.Eventually(t, "the server to receive "+sub, func() bool {
		b, _ := os.ReadFile(f.record)
		return strings.Contains(string(b), sub)
	})
}

// expect reads from the proxy until the answer to id. Every line
// the host gets must be whole JSON and never an answer to the proxy's own requests.
// It returns the answer and the messages that came before it.
func (s *testHost) expect(id string) (answer string, before []string) {
	s.t.Helper()
	for { // each read is bounded by testutil.Guard
		msg, err := s.out.Read()
		if err != nil {
			s.t.Fatalf("waiting for the answer to %s: %v (seen %q; stderr: %s)", id, err, before, s.Stderr.String())
		}
		checkHostLine(s.t, msg)
		if got, ok := jsonID(msg); ok && got == id {
			return string(msg), before
		}
		before = append(before, string(msg))
	}
}

func checkHostLine(t *testing.T, msg []byte) {
	t.Helper()
	if !json.Valid(msg) {
		t.Fatalf("the host got a line that is not JSON: %d bytes, %.100s", len(msg), msg)
	}
	if id, _ := jsonID(msg); strings.HasPrefix(id, `"bir:`) {
		t.Fatalf("the host got an answer to one of the proxy's own requests: %s", msg)
	}
}

// call sends a tools/call and returns the answer.
func (s *testHost) call(id int, tool, args string) string {
	s.t.Helper()
	s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
	a, _ := s.expect(strconv.Itoa(id))
	return a
}

func isError(answer string) bool { return strings.Contains(answer, `"error":{`) }

// hostSetup is what the test host sets up, and what a revived server must be given.
var hostInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"revive-test","version":"9"}}}`

func (s *testHost) setUp() {
	s.t.Helper()
	s.Send(hostInit)
	s.expect("0")
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"file:///a"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"file:///b"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"resources/unsubscribe","params":{"uri":"file:///a"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	s.expect("6")
}

// checkReplayed: the revived server got the host's initialize with its params as the
// host wrote them, notifications/initialized, the last log level and the live
// subscription, with ids of the proxy's own, before anything else.
func checkReplayed(t *testing.T, gen []string) {
	t.Helper()
	if len(gen) < 4 {
		t.Fatalf("the revived server received %q", gen)
	}
	wantInit := strings.Replace(hostInit, `"id":0`, `"id":"bir:`, 1)
	if !strings.HasPrefix(gen[0], wantInit[:strings.Index(wantInit, `"bir:`)+5]) || !strings.HasSuffix(gen[0], hostInit[strings.Index(hostInit, `,"method"`):]) {
		t.Errorf("replayed initialize %s\n   host sent %s", gen[0], hostInit)
	}
	if gen[1] != `{"jsonrpc":"2.0","method":"notifications/initialized"}` {
		t.Errorf("second line %s, want notifications/initialized", gen[1])
	}
	if !strings.Contains(gen[2], `"method":"logging/setLevel","params":{"level":"debug"}`) || !strings.Contains(gen[2], `"id":"bir:`) {
		t.Errorf("third line %s, want the last setLevel with an own id", gen[2])
	}
	if !strings.Contains(gen[3], `"method":"resources/subscribe","params":{"uri":"file:///b"}`) {
		t.Errorf("fourth line %s, want the live subscription", gen[3])
	}
	for _, l := range gen {
		if strings.Contains(l, "file:///a") {
			t.Errorf("an unsubscribed uri was restored: %s", l)
		}
	}
}

// checkKeyRemoved: a revived server never receives the correlation key.
func checkKeyRemoved(t *testing.T, gen []string) {
	t.Helper()
	found := false
	for _, l := range gen {
		if strings.Contains(l, "_bir_call_id") {
			t.Errorf("the revived server received the correlation key: %s", l)
		}
		found = found || strings.Contains(l, `"after":"revival"`)
	}
	if !found {
		t.Errorf("the call after the revival did not reach the new server: %q", gen)
	}
}

func TestReviveKilledWhileIdle(t *testing.T) {
	t.Parallel()
	f := newReviveFixture(t)
	s := startProxy(t, nil, f.args(nil, "--reply")...)
	s.setUp()
	old := f.kill9(t)
	if err := s.Stderr.WaitFor(testutil.Context(t), "revived the server"); err != nil {
		t.Fatal(err)
	}
	if a := s.call(10, "echo", `{"after":"revival","_bir_call_id":"c-1"}`); isError(a) {
		t.Fatalf("the host's next request failed: %s", a)
	}
	gens := f.generations(t)
	if len(gens) != 2 {
		t.Fatalf("%d generations of the server, want 2: %q", len(gens), gens)
	}
	checkReplayed(t, gens[1])
	checkKeyRemoved(t, gens[1])
	if pids := f.startPids(t); len(pids) != 2 || pids[0] != old {
		t.Fatalf("starts %v", pids)
	}
	if !strings.Contains(s.Stderr.String(), `ended="was killed by signal 9 (killed)" attempt=1`) {
		t.Errorf("the revival line does not say how the server ended and the attempt:\n%s", s.Stderr.String())
	}
	s.Stdin.Close()
	if code := s.ExitCode(); code != 0 {
		t.Fatalf("exit %d, want the revived server's 0 (it exits on EOF)", code)
	}
}

func TestReviveKilledDuringCall(t *testing.T) {
	t.Parallel()
	f := newReviveFixture(t)
	s := startProxy(t, nil, f.args(nil, "--reply")...)
	s.setUp()
	// Two requests in flight: a tools/call and a plain request the server never
	// answers (the hang tool stands for any slow request): both get an error with
	// their own id at once.
	s.Send(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"hang","arguments":{}}}`)
	f.waitRecorded(t, `"hang"`)
	f.kill9(t)
	a, _ := s.expect(`"call-1"`)
	if !isError(a) || !strings.Contains(a, "server raw was killed by signal 9") || !strings.Contains(a, "-32000") {
		t.Fatalf("the call in flight got %s, want an error saying the server was killed", a)
	}
	// Sent the moment the error arrived: it waits for the new server.
	if a := s.call(11, "echo", `{"after":"revival","_bir_call_id":"c-2"}`); isError(a) {
		t.Fatalf("the host's next request failed: %s", a)
	}
	gens := f.generations(t)
	checkReplayed(t, gens[len(gens)-1])
	checkKeyRemoved(t, gens[len(gens)-1])
}

// TestReviveKilledMidLargeMessage: killed while writing a 2.5 MB answer whose cut
// falls after a "}": the host gets the error for that call, never the fragment.
// Streaming is off: a streamed line reaches the host as it comes, and its cut is
// TestPartialLineNeverReachesTheHost's "stream-default" case.
func TestReviveKilledMidLargeMessage(t *testing.T) {
	t.Parallel()
	f := newReviveFixture(t)
	s := startProxy(t, []string{"BIR_STREAM_THRESHOLD=0"}, f.args(nil, "--reply")...)
	s.setUp()
	s.Send(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"partial_hang","arguments":{}}}`)
	if err := s.Stderr.WaitFor(testutil.Context(t), "rawserver: partial answer written"); err != nil {
		t.Fatal(err)
	}
	f.kill9(t)
	if a, _ := s.expect("12"); !isError(a) {
		t.Fatalf("the call cut off got %.200s, want an error", a)
	}
	if a := s.call(13, "echo", `{"after":"revival"}`); isError(a) {
		t.Fatalf("the host's next request failed: %s", a)
	}
}

func TestReviveToolsListChanged(t *testing.T) {
	t.Parallel()
	for _, changed := range []bool{true, false} {
		t.Run(fmt.Sprintf("changed=%v", changed), func(t *testing.T) {
			t.Parallel()
			f := newReviveFixture(t)
			tools := filepath.Join(f.dir, "tools")
			if err := os.WriteFile(tools, []byte("echo\nsearch\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s := startProxy(t, nil, f.args(nil, "--reply", "--tools-file", tools)...)
			s.setUp() // the fixture declares tools.listChanged; the host lists them
			if changed {
				if err := os.WriteFile(tools, []byte("echo\nsearch\nfetch\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"hang","arguments":{}}}`)
			f.waitRecorded(t, `"hang"`)
			f.kill9(t)
			s.expect(`"c"`)
			// The revival lists the tools before the waiting request reaches the
			// server, which answers in order: a notification comes before this answer
			// or not at all.
			s.Send(`{"jsonrpc":"2.0","id":20,"method":"ping"}`)
			_, before := s.expect("20")
			notified := strings.Contains(strings.Join(before, "\n"), `"method":"notifications/tools/list_changed"`)
			if notified != changed {
				t.Fatalf("tools changed %v, host notified %v (got %q)", changed, notified, before)
			}
		})
	}
}

// TestReviveCrashLoop: a server that dies on every start, before answering anything.
// After a few starts the proxy gives up: it stays alive, every request gets at once an
// error naming the server, saying it is down and why, and no more starts are made
// until the cool-down (10 s, longer than the test) has passed.
func TestReviveCrashLoop(t *testing.T) {
	t.Parallel()
	f := newReviveFixture(t)
	s := startProxy(t, nil, f.args(nil, "--exit-now", "--exit-code", "1", "--stderr", "fatal: cannot open the database\n")...)
	// Until the proxy gives up, a request that reached one of the starts gets an
	// error saying how that one ended; then every request gets the "down" answer.
	var a string
	id := 0
	for ; id < 10 && !strings.Contains(a, "is down"); id++ {
		s.Send(strings.Replace(hostInit, `"id":0`, `"id":`+strconv.Itoa(id), 1))
		a, _ = s.expect(strconv.Itoa(id))
		for _, want := range []string{"server raw", "exited with status 1", "fatal: cannot open the database"} {
			if !strings.Contains(a, want) {
				t.Errorf("answer %s lacks %q", a, want)
			}
		}
	}
	for _, want := range []string{"server raw is down", "4 starts in a row", "tries to start it again"} {
		if !strings.Contains(a, want) {
			t.Errorf("answer %s lacks %q", a, want)
		}
	}
	// Every further request is answered at once, and nothing is started.
	began := time.Now()
	for i := id; i < id+50; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i))
		if a, _ := s.expect(strconv.Itoa(i)); !strings.Contains(a, "server raw is down") {
			t.Fatalf("request %d got %s", i, a)
		}
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("50 answers while down took %v", d)
	}
	if pids := f.startPids(t); len(pids) != 4 {
		t.Fatalf("%d starts, want 4 (then the cool-down)", len(pids))
	}
	// No busy loop: a proxy that spun would have burnt its whole wall time.
	if cpu := procCPU(t, s.Cmd.Process.Pid); cpu > 2*time.Second {
		t.Errorf("the proxy used %v of CPU", cpu)
	}
	if n := strings.Count(s.Stderr.String(), "giving up for a while"); n != 1 {
		t.Errorf("%d give-up lines, want 1:\n%s", n, s.Stderr.String())
	}
	s.Stdin.Close()
	if code := s.ExitCode(); code != 1 {
		t.Fatalf("exit %d, want the last server's 1", code)
	}
	for _, p := range f.startPids(t) {
		if testutil.Alive(p) {
			t.Errorf("server %d still running", p)
		}
	}
}

// procCPU is the user+system CPU time a process has used so far (Linux /proc).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	ut, _ := strconv.Atoi(fields[11])
	st, _ := strconv.Atoi(fields[12])
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// TestReviveNotWhenTheHostLeaves: a server that exits because the host closed stdin,
// or because the proxy was told to stop, is not started again; the proxy exits with
// its status.
func TestReviveNotWhenTheHostLeaves(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stdin", "sigterm", "sigint"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			f := newReviveFixture(t)
			s := startProxy(t, nil, f.args(nil, "--reply", "--exit-code", "7")...)
			s.setUp()
			switch how {
			case "stdin":
				s.Stdin.Close()
			case "sigterm":
				_ = s.Cmd.Process.Signal(syscall.SIGTERM)
			case "sigint":
				_ = s.Cmd.Process.Signal(syscall.SIGINT)
			}
			code := s.ExitCode()
			if how == "stdin" && code != 7 {
				t.Fatalf("exit %d, want the server's 7", code)
			}
			if pids := f.startPids(t); len(pids) != 1 {
				t.Fatalf("%d starts, want 1", len(pids))
			}
			if strings.Contains(s.Stderr.String(), "revived") {
				t.Fatalf("revived after the host left:\n%s", s.Stderr.String())
			}
		})
	}
}

func TestNoReviveExitsWithTheServersStatus(t *testing.T) {
	t.Parallel()
	f := newReviveFixture(t)
	s := startProxy(t, nil, f.args([]string{"--no-revive"}, "--reply", "--crash-every", "1", "--exit-code", "9")...)
	s.setUp()
	s.Send(`{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if code := s.ExitCode(); code != 9 {
		t.Fatalf("exit %d, want the server's 9", code)
	}
	if pids := f.startPids(t); len(pids) != 1 {
		t.Fatalf("%d starts, want 1", len(pids))
	}
}

// TestReviveSoak: a server that crashes on every 50th call, 5,000 calls. Every call is
// answered (a result, or an error for the call that crashed it); no server outlives its
// crash; the proxy's fds, threads and goroutines do not grow between the first and the
// last thousand calls. It also measures crash → next answer (docs/PERFORMANCE.md).
func TestReviveSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	t.Parallel()
	f := newReviveFixture(t)
	s := startProxy(t, nil, f.args([]string{"--log-level", "debug"}, "--reply", "--crash-every", "50", "--exit-code", "1")...)
	s.setUp()
	pid := s.Cmd.Process.Pid
	const calls = 5000
	var errs int
	var recover []time.Duration // error for the crashing call → answer of the next one
	var early, late procUsage
	var crashAt time.Time
	for i := 1; i <= calls; i++ {
		a := s.call(100+i, "echo", `{"n":`+strconv.Itoa(i)+`}`)
		switch {
		case isError(a):
			errs++
			crashAt = time.Now()
		case !crashAt.IsZero():
			recover = append(recover, time.Since(crashAt))
			crashAt = time.Time{}
		}
		// Measured mid-way through a server's life (not at a crash, where one
		// server's pipes are closing while the next one's open).
		switch i {
		case 1025:
			early = procUsageOf(t, pid)
		case calls - 25:
			late = procUsageOf(t, pid)
		}
	}
	// 6 calls of set-up then 5,000: each server dies on its 50th tools/call.
	if want := calls / 50; errs < want-1 || errs > want+1 {
		t.Errorf("%d errors, want about %d (one per crash)", errs, want)
	}
	if late.fds > early.fds+2 || late.threads > early.threads+2 {
		t.Errorf("the proxy grew: after 1,000 calls %+v, after 5,000 %+v", early, late)
	}
	gs := goroutineCounts(s.Stderr.String())
	if len(gs) < 40 {
		t.Fatalf("%d revival lines with goroutine counts", len(gs))
	}
	if first, last := maxOf(gs[:20]), maxOf(gs[len(gs)-20:]); last > first+3 {
		t.Errorf("goroutines grew from %d to %d across revivals", first, last)
	}
	// Every server but the running one is gone.
	pids := f.startPids(t)
	for _, p := range pids[:len(pids)-1] {
		if err := testutil.WaitExit(testutil.Context(t), p); err != nil {
			t.Errorf("server %d outlived its crash: %v", p, err)
		}
	}
	s.Stdin.Close()
	s.ExitCode()
	if testutil.Alive(pids[len(pids)-1]) {
		t.Errorf("the last server outlived the proxy")
	}
	p50, pmax := percentile(recover, 50), percentile(recover, 100)
	start, startMax := serverStartTime(t, f.raw)
	t.Logf("crash → next answer over %d revivals: p50 %v, max %v; the fixture's own start: p50 %v, max %v; proxy after 1,000 calls %+v, after 5,000 %+v, goroutines %d → %d",
		len(recover), p50, pmax, start, startMax, early, late, maxOf(gs[:20]), maxOf(gs[len(gs)-20:]))
	if testing.Verbose() { // where each revival's time went: its debug lines
		t.Logf("proxy stderr:\n%s", s.Stderr.String())
	}
	if pmax > 2*time.Second+start {
		t.Errorf("a revival took %v to answer the next request", pmax)
	}
}

type procUsage struct{ fds, threads int }

func procUsageOf(t *testing.T, pid int) procUsage {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	var threads int
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return procUsage{fds: len(fds), threads: threads}
}

// goroutineCounts are the proxy's goroutine counts its debug log gives after each
// revival.
func goroutineCounts(stderr string) []int {
	var out []int
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.Contains(l, "msg=\"after the revival\"") {
			continue
		}
		if _, v, ok := strings.Cut(l, "goroutines="); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			out = append(out, n)
		}
	}
	return out
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	for i := range s { // insertion sort: a hundred values
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[min(len(s)-1, (len(s)-1)*p/100)]
}

// serverStartTime is the fixture's own start, measured alone: exec → its answer to
// initialize (the median and the max of 20).
func serverStartTime(t *testing.T, raw string) (p50, pmax time.Duration) {
	t.Helper()
	var ds []time.Duration
	for range 20 {
		began := time.Now()
		p := testutil.Start(t, exec.Command(raw, "--reply"))
		s := &testHost{Proc: p, t: t, out: framing.NewReader(p.Stdout)}
		s.Send(hostInit)
		s.expect("0")
		ds = append(ds, time.Since(began))
		s.Stdin.Close()
		s.ExitCode()
	}
	return percentile(ds, 50), percentile(ds, 100)
}

// TestReviveRegistersAgainAndReportsTheLostCall: with a recorder, the call in flight
// when the server died is reported upstream_lost, and the proxy registers again after
// the revival with what the new server said (here, its changed tool list).
func TestReviveRegistersAgainAndReportsTheLostCall(t *testing.T) {
	t.Parallel()
	f := newReviveFixture(t)
	rec := recordertest.Start(t)
	tools := filepath.Join(f.dir, "tools")
	if err := os.WriteFile(tools, []byte("echo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startProxy(t, recording(rec, t.TempDir()), f.args(nil, "--reply", "--tools-file", tools)...)
	s.setUp()
	if err := os.WriteFile(tools, []byte("echo\nfresh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Send(`{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"hang","arguments":{"_bir_call_id":"lost-1"}}}`)
	f.waitRecorded(t, `"hang"`)
	f.kill9(t)
	s.expect("40")
	if a := s.call(41, "echo", `{"_bir_call_id":"after-1"}`); isError(a) {
		t.Fatalf("the next call failed: %s", a)
	}
	ctx := testutil.Context(t)
	snap, err := rec.Wait(ctx, func(v recordertest.Snapshot) bool {
		lost, after, reg := false, false, false
		for _, st := range v.Steps {
			lost = lost || (st.Get("callId").String() == "lost-1" && st.Get("outcome").String() == "upstream_lost")
			after = after || (st.Get("callId").String() == "after-1" && st.Get("outcome").String() == "ok")
		}
		for _, r := range v.Registrations {
			reg = reg || strings.Contains(r.Get("tools").Raw, `"fresh"`)
		}
		return lost && after && reg
	})
	if err != nil {
		t.Fatalf("%v\nsteps: %d, registrations: %d", err, len(snap.Steps), len(snap.Registrations))
	}
	s.Stdin.Close()
	s.ExitCode()
}
