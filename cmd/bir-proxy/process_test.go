package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// rawProxy starts the built proxy in front of rawserver with stderr going to the
// given file (a pipe end the test controls), and returns the host's ends.
func rawProxy(t *testing.T, stderr *os.File, env []string, proxyArgs []string, serverArgs ...string) (cmd *exec.Cmd, in *os.File, out *framing.Reader, done chan error) {
	t.Helper()
	cmd, in, outR, done := rawProxyPipes(t, stderr, env, proxyArgs, serverArgs...)
	return cmd, in, framing.NewReader(outR), done
}

// rawProxyPipes is rawProxy with the proxy's stdout as it is, for a host that reads
// it its own way.
func rawProxyPipes(t *testing.T, stderr *os.File, env []string, proxyArgs []string, serverArgs ...string) (cmd *exec.Cmd, in, out *os.File, done chan error) {
	t.Helper()
	bin := testutil.Build(t, "./cmd/bir-proxy")
	raw := testutil.Build(t, "./testdata/rawserver")
	args := append(append(append([]string{}, proxyArgs...), "--", raw), serverArgs...)
	cmd = exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "XDG_STATE_HOME="+t.TempDir()), env...)
	if stderr != nil { // a nil *os.File in an io.Writer is not nil
		cmd.Stderr = stderr
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	done = make(chan error, 1)
	go func() { done <- cmd.Wait(); close(done) }() // a second receive returns at once
	t.Cleanup(func() {
		inW.Close()
		_ = cmd.Process.Kill()
		<-done
		outR.Close()
	})
	return cmd, inW, outR, done
}

// readWithin reads one message from the proxy, failing the test after a generous
// deadline instead of hanging it.
func readWithin(t *testing.T, r *framing.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		m, err := r.Read()
		if err != nil {
			got <- "read error: " + err.Error()
			return
		}
		got <- string(m)
	}()
	select {
	case m := <-got:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no answer from the proxy")
		return ""
	}
}

// TestSIGPIPEAtStartDoesNotKillTheProxy: a host whose stderr has no reader, and a
// proxy that logs a warning at start (a recorder it may not use), must still relay.
func TestSIGPIPEAtStartDoesNotKillTheProxy(t *testing.T) {
	for i := range 10 {
		errR, errW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		errR.Close() // nobody will ever read the proxy's stderr
		_, in, out, _ := rawProxy(t, errW, []string{"BIR_OFF=0", "BIR_RECORDER_URL=", "BIR_RECORDER_TOKEN="},
			[]string{"--server", "pipe", "--recorder", "http://192.0.2.1:9/", "--log-level", "debug"}, "--reply")
		errW.Close()
		if _, err := in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if got := readWithin(t, out); !strings.Contains(got, `"id":1`) {
			t.Fatalf("run %d: the proxy died of SIGPIPE instead of answering: %s", i, got)
		}
	}
}

// TestBIROffSpellings: the usual spellings of true turn recording off; anything
// unrecognised is refused with one clear line and exit status 2.
func TestBIROffSpellings(t *testing.T) {
	for _, v := range []string{"yes", "on", "TRUE", "1"} {
		journal := filepath.Join(t.TempDir(), "j.jsonl")
		_, in, out, done := rawProxy(t, nil, []string{"BIR_OFF=" + v}, []string{"--server", "off", "--journal", journal}, "--reply")
		in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}` + "\n")
		readWithin(t, out)
		in.Close()
		<-done
		if _, err := os.Stat(journal); !os.IsNotExist(err) {
			t.Fatalf("BIR_OFF=%s: a journal was written (err %v)", v, err)
		}
	}
	errR, errW, _ := os.Pipe()
	cmd, _, _, done := rawProxy(t, errW, []string{"BIR_OFF=maybe"}, []string{"--server", "off"}, "--reply")
	errW.Close()
	err := <-done
	msg, _ := readAll(errR)
	if cmd.ProcessState.ExitCode() != 2 {
		t.Fatalf("BIR_OFF=maybe: exit %v, want 2 (err %v)", cmd.ProcessState.ExitCode(), err)
	}
	if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, `BIR_OFF="maybe"`) {
		t.Fatalf("BIR_OFF=maybe: stderr %q, want one line naming the value", msg)
	}
}

func readAll(f *os.File) (string, error) {
	defer f.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String(), nil
		}
	}
}

// TestLogLinesNameTheServerOnce: every line of the proxy's log says server= once.
func TestLogLinesNameTheServerOnce(t *testing.T) {
	errR, errW, _ := os.Pipe()
	journal := filepath.Join(t.TempDir(), "j.jsonl")
	_, in, out, done := rawProxy(t, errW, []string{"BIR_OFF=0", "BIR_RECORDER_URL="}, []string{"--server", "once", "--journal", journal, "--log-level", "debug"}, "--reply", "--ignore-eof")
	errW.Close()
	in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}` + "\n")
	readWithin(t, out)
	in.Close() // the server ignores EOF: the stop sequence logs as it goes
	<-done
	log, _ := readAll(errR)
	lines := 0
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "level=") {
			continue
		}
		lines++
		if n := strings.Count(l, "server="); n != 1 {
			t.Errorf("%d server= in %q", n, l)
		}
	}
	if lines == 0 {
		t.Fatalf("no log lines to check in %q", log)
	}
}

// TestUnreadStderrDoesNotBlockTheRelay: a host that never reads the proxy's stderr,
// and a server that prints thousands of non-message lines to stdout (each becomes a
// diagnostic line): calls are still answered, and the proxy still exits.
func TestUnreadStderrDoesNotBlockTheRelay(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "junk")
	var b strings.Builder
	for i := range 20000 {
		b.WriteString("server log line, not a message, number ")
		b.WriteString(strings.Repeat("x", i%50))
		b.WriteString("\n")
	}
	if err := os.WriteFile(junk, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	errR, errW, _ := os.Pipe()
	defer errR.Close() // open but never read: the pipe fills at 64 KiB
	_, in, out, done := rawProxy(t, errW, nil, []string{"--server", "noisy"}, "--reply", "--emit", junk)
	errW.Close()
	for i := range 5 {
		in.WriteString(`{"jsonrpc":"2.0","id":` + string(rune('1'+i)) + `,"method":"ping"}` + "\n")
		if got := readWithin(t, out); !strings.Contains(got, `"id":`+string(rune('1'+i))) {
			t.Fatalf("call %d got %s", i, got)
		}
	}
	in.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy did not exit: blocked on a stderr nobody reads")
	}
}

// TestDetachedGrandchildDoesNotHangTheSession: a process that left the server's
// process group (setsid, a detached spawn) and keeps the server's stdout open must not
// keep a session whose server exited alive: the host sees the end instead of waiting
// forever, and stdin EOF still ends the proxy.
func TestDetachedGrandchildDoesNotHangTheSession(t *testing.T) {
	for _, how := range []string{"server exits", "host closes stdin"} {
		t.Run(how, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pid")
			serverArgs := []string{"--reply", "--pidfile", pidfile, "--grandchild", "--detach"}
			proxyArgs := []string{"--server", "detach"}
			if how == "server exits" {
				serverArgs = append(serverArgs, "--exit-after", "1")
				// The end of the session is what is under test, not a revival.
				proxyArgs = append(proxyArgs, "--no-revive")
			}
			_, in, out, done := rawProxy(t, nil, nil, proxyArgs, serverArgs...)
			in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
			if got := readWithin(t, out); !strings.Contains(got, `"id":1`) {
				t.Fatalf("got %s", got)
			}
			grand := testutil.ReadPidfile(t, pidfile+".grandchild")
			t.Cleanup(func() { _ = syscall.Kill(grand, syscall.SIGKILL) })
			if how == "host closes stdin" {
				in.Close()
			}
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: the proxy is still running while a detached grandchild holds the server's stdout", how)
			}
		})
	}
}

// TestOverCapMessagesAreAnswered: a message over --max-message is dropped, but no one
// is left waiting for it: the host gets an error for its own over-cap request and for
// a server answer over the cap (both reported), and the server gets an error for its
// own over-cap request.
//
// The server's first line is a notification under the cap but longer than the error
// answer the proxy makes up for an over-cap one: that answer was handed on with the
// notification's lex, so the relay read its members at the notification's offsets
// (past its end) and bookkeeping took it for a notification.
//
// Streaming is off here: this is the contract for lines read whole. A streamed line
// over the cap is TestEndlessAnswerIsAnsweredAtTheCap's "stream" case.
func TestOverCapMessagesAreAnswered(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "j.jsonl")
	record := filepath.Join(dir, "received")
	emit := filepath.Join(dir, "emit")
	note := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("n", 3000) + `"}}`
	bigRequest := `{"jsonrpc":"2.0","method":"sampling/createMessage","params":{"pad":"` + strings.Repeat("s", 8000) + `"},"id":"srv-big"}`
	if err := os.WriteFile(emit, []byte(note+"\n"+bigRequest+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, in, out, done := rawProxy(t, nil, []string{"BIR_OFF=0", "BIR_RECORDER_URL=", "BIR_STREAM_THRESHOLD=0"},
		[]string{"--server", "cap", "--max-message", "4096", "--journal", journal},
		"--reply", "--reply-size", "6000", "--record", record, "--emit", emit)
	if got := readWithin(t, out); got != note {
		t.Fatalf("the server's notification: host got %.200s", got)
	}

	big := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"pad":"` + strings.Repeat("p", 10000) + `"}}}`
	in.WriteString(big + "\n")
	if got := readWithin(t, out); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":5,"error":{"code":-32600,`) {
		t.Fatalf("over-cap request: host got %.200s", got)
	}
	in.WriteString(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{}}}` + "\n")
	if got := readWithin(t, out); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":6,"error":{"code":-32603,`) {
		t.Fatalf("over-cap answer: host got %.200s", got)
	}
	in.WriteString(`{"jsonrpc":"2.0","id":7,"method":"ping"}` + "\n")
	if got := readWithin(t, out); !strings.Contains(got, `"id":7`) {
		t.Fatalf("after: host got %.200s", got)
	}
	in.Close()
	<-done
	got, _ := os.ReadFile(record)
	if !strings.Contains(string(got), `{"jsonrpc":"2.0","id":"srv-big","error":{"code":-32600,`) {
		t.Fatalf("the server was not answered for its over-cap request; it received:\n%.2000s", got)
	}
	if strings.Contains(string(got), strings.Repeat("p", 100)) {
		t.Fatal("the over-cap request reached the server")
	}
	reports, _ := os.ReadFile(journal)
	var outcomes []string
	for _, l := range strings.Split(strings.TrimSpace(string(reports)), "\n") {
		if i := strings.Index(l, `"outcome":"`); i >= 0 {
			outcomes = append(outcomes, l[i+11:i+11+strings.IndexByte(l[i+11:], '"')])
		}
	}
	if len(outcomes) != 2 || outcomes[0] != "rpc_error" || outcomes[1] != "rpc_error" {
		t.Fatalf("reports' outcomes %q, want two rpc_error; journal:\n%s", outcomes, reports)
	}
}

// TestSIGKILLedProxyLeavesNoDescendant: SPEC §6 promises the upstream never outlives
// the proxy, even a SIGKILLed one. The parent-death signal reaches only the direct
// child, so the real server behind a launcher — in the server's group, or detached
// from it — used to survive; the supervisor ends them all.
func TestSIGKILLedProxyLeavesNoDescendant(t *testing.T) {
	sigkillLeavesNoDescendant(t, nil, "")
}

// sigkillLeavesNoDescendant SIGKILLs a proxy (with env added) whose server started a
// grandchild, detached from its group or not, and checks that both end.
func sigkillLeavesNoDescendant(t *testing.T, env []string, label string) {
	t.Helper()
	for _, detach := range []bool{false, true} {
		pidfile := filepath.Join(t.TempDir(), "pid")
		args := []string{"--echo", "--pidfile", pidfile, "--grandchild"}
		if detach {
			args = append(args, "--detach")
		}
		cmd, in, out, done := rawProxy(t, nil, env, []string{"--server", "kill9"}, args...)
		in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
		readWithin(t, out)
		server := testutil.ReadPidfile(t, pidfile)
		grand := testutil.ReadPidfile(t, pidfile+".grandchild")
		t.Cleanup(func() { _ = syscall.Kill(grand, syscall.SIGKILL); _ = syscall.Kill(server, syscall.SIGKILL) })
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-done
		ctx := testutil.Context(t)
		for _, pid := range []int{server, grand} {
			if err := testutil.WaitExit(ctx, pid); err != nil {
				t.Fatalf("%sdetach=%v: process %d outlived the SIGKILLed proxy: %v", label, detach, pid, err)
			}
		}
	}
}

// TestArgumentShapesCostMemoryInProportion: the proxy's bookkeeping for a call
// (strip, redaction, fingerprint, report) costs memory in proportion to the
// message whatever its shape. 6 MB of arguments nested a million objects deep
// took the proxy to 151 MB of RSS, 21 MB under BIR_OFF=1; the fingerprint's
// index allocated 360 bytes a level.
func TestArgumentShapesCostMemoryInProportion(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the proxy's peak RSS from /proc")
	}
	const size = 6 << 20
	var wide, many strings.Builder
	wide.WriteString(`{"w":{`)
	for i := 0; wide.Len() < size; i++ {
		fmt.Fprintf(&wide, `"k%d":%d,`, i*7919%1000003, i)
	}
	wide.WriteString(`"z":0}}`)
	many.WriteString(`{"items":[`)
	for many.Len() < size {
		many.WriteString(`{"b":1,"a":{"d":[2],"c":3}},`)
	}
	many.WriteString(`{}]}`)
	shapes := []struct{ name, args string }{
		{"nested objects", `{"x":` + strings.Repeat(`{"a":`, size/6) + "1" + strings.Repeat("}", size/6) + "}"},
		{"objects in arrays in objects", `{"x":` + strings.Repeat(`{"a":[`, size/8) + "1" + strings.Repeat("]}", size/8) + "}"},
		{"wide object", wide.String()},
		{"many small objects", many.String()},
	}
	for _, s := range shapes {
		off := callPeakRSS(t, "1", s.args)
		on := callPeakRSS(t, "0", s.args)
		ratio := float64(on) / float64(off)
		t.Logf("%s (%d bytes): peak RSS %d MB recording, %d MB under BIR_OFF=1: %.1f times", s.name, len(s.args), on>>20, off>>20, ratio)
		// 2.0 for nested objects, whose index in the fingerprint takes 20
		// bytes a 6-byte level; 6.0 before, at 360 bytes a level.
		if ratio > 3.5 {
			t.Errorf("%s: recording a call of %d bytes took the proxy to %d MB, %.1f times the %d MB it takes under BIR_OFF=1", s.name, len(s.args), on>>20, ratio, off>>20)
		}
	}
}

// callPeakRSS sends one tools/call with the given arguments through a fresh
// proxy and returns the proxy's peak RSS once the call is answered and, when
// recording, reported.
func callPeakRSS(t *testing.T, birOff, args string) int64 {
	return callPeakRSSAt(t, birOff, "0", "echo", args)
}

// callPeakRSSAt is callPeakRSS with BIR_STREAM_THRESHOLD=streamAt, of the tool
// named (echo answers with the arguments, fail with a line).
func callPeakRSSAt(t *testing.T, birOff, streamAt, tool, args string) int64 {
	t.Helper()
	journal := filepath.Join(t.TempDir(), "j.jsonl")
	// Read whole (BIR_STREAM_THRESHOLD=0): the subject is the bookkeeping of a
	// message held whole, against the same message through the pure pipe; a
	// streamed call's is TestStreamedCallCostsNoMemoryInProportion's.
	cmd, in, out, done := rawProxy(t, nil, []string{"BIR_OFF=" + birOff, "BIR_RECORDER_URL=", "BIR_STREAM_THRESHOLD=" + streamAt},
		[]string{"--server", "mem", "--journal", journal}, "--reply")
	go in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + "}}\n")
	if got := readWithin(t, out); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"result"`) {
		t.Fatalf("BIR_OFF=%s: host got %.200s", birOff, got)
	}
	return peakAfterReport(t, cmd, in, done, birOff == "0", journal)
}

// peakAfterReport is the proxy's peak RSS once the call's report is in the journal
// (when recording); the proxy is then stopped.
func peakAfterReport(t *testing.T, cmd *exec.Cmd, in *os.File, done chan error, recording bool, journal string) int64 {
	t.Helper()
	if recording {
		testutil.Eventually(t, "the call's report in the journal", func() bool {
			data, _ := os.ReadFile(journal)
			return strings.Contains(string(data), `"outcome":"`)
		})
	}
	hwm := procStatusKB(t, cmd.Process.Pid, "VmHWM") << 10
	in.Close()
	<-done
	return hwm
}

// procStatusKB reads a kB field of /proc/PID/status.
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the proxy's status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status %s: %v", pid, field, err)
			}
			return kb
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// TestRemoteLogLinesNameTheServerOnce: a remote upstream's log lines (a server that
// refuses connections: retries, an undeliverable call) say server= once, as a
// child's do; the upstream's logger already carries the name.
func TestRemoteLogLinesNameTheServerOnce(t *testing.T) {
	t.Parallel()
	s := startProxy(t, nil, "--server", "far", "--url", "http://127.0.0.1:9/mcp", "--log-level", "debug")
	s.Send(remoteInit)
	if a := s.recv(); !strings.Contains(a, `"error"`) {
		t.Fatalf("want an error answer for an unreachable server, got %s", a)
	}
	s.end()
	lines := 0
	for _, l := range strings.Split(s.Stderr.String(), "\n") {
		if !strings.Contains(l, "level=") {
			continue
		}
		lines++
		if n := strings.Count(l, "server="); n != 1 {
			t.Errorf("%d server= in %q", n, l)
		}
	}
	if lines == 0 {
		t.Fatalf("no log lines to check in %q", s.Stderr.String())
	}
}

// TestEndlessAnswerIsAnsweredAtTheCap: a stdio server whose answer's line never ends
// (it writes on for ever) left the call unanswered: the line was dropped at the cap
// but read until its end. Its head named the id and a result, so the host now gets
// the over-cap error as the cap is passed; and a stop still ends the proxy.
//
// Streamed (the answer passed on as it arrives), the host has had the cap's worth of
// it when the cap is passed: that line is ended there with a newline (its parser
// rejects it, and the next message stays whole), and the same error answer follows.
func TestEndlessAnswerIsAnsweredAtTheCap(t *testing.T) {
	for _, stream := range []string{"0", "1"} {
		t.Run("stream="+stream, func(t *testing.T) { endlessAnswer(t, stream) })
	}
}

func endlessAnswer(t *testing.T, stream string) {
	_, in, out, done := rawProxy(t, nil, []string{"BIR_STREAM_THRESHOLD=" + stream}, []string{"--server", "endless", "--max-message", strconv.Itoa(1 << 20)}, "--reply")
	in.WriteString(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"endless","arguments":{}}}` + "\n")
	got := readWithin(t, out)
	if stream != "0" {
		if len(got) != 1<<20 || json.Valid([]byte(got)) {
			t.Fatalf("streamed: the host got a %d-byte line first, want the cap's worth of the cut answer", len(got))
		}
		got = readWithin(t, out)
	}
	if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,`) || !strings.Contains(got, "more than") {
		t.Fatalf("host got %.300s", got)
	}
	in.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy did not end after the host closed its stdin")
	}
}

// TestStreamedCallCostsNoMemoryInProportion: recording a long call streamed to the
// server (the default threshold) holds none of it: its arguments are reduced as they
// pass (relay/argsdigest.go), so 16 MB of them take the proxy no further above the
// pure pipe than the digest's queue may hold (8 MiB, when the digest lags the pipe),
// where held whole they took it to twice their size.
func TestStreamedCallCostsNoMemoryInProportion(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the proxy's peak RSS from /proc")
	}
	const size = 16 << 20
	args := `{"path":"/tmp/x","content":"` + strings.Repeat("0123456789abcdef", size/16) + `"}`
	// fail answers with a line: the answer is not the subject.
	off := callPeakRSSAt(t, "1", "", "fail", args)
	on := callPeakRSSAt(t, "0", "", "fail", args)
	whole := callPeakRSSAt(t, "0", "0", "fail", args)
	t.Logf("peak RSS for a %d-byte call: %d MB recording it streamed, %d MB recording it whole, %d MB under BIR_OFF=1", len(args), on>>20, whole>>20, off>>20)
	if on-off > 12<<20 {
		t.Errorf("recording a streamed call of %d bytes took the proxy to %d MB, %d MB over the pure pipe's %d MB", len(args), on>>20, (on-off)>>20, off>>20)
	}
	if whole-off < size {
		t.Errorf("the checker's control: recording the same call whole took only %d MB over the pure pipe", (whole-off)>>20)
	}
}
