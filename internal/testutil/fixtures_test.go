package testutil_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tidwall/gjson"
	"golang.org/x/sys/unix"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

func start(t *testing.T, exe string, args ...string) *testutil.Proc {
	t.Helper()
	return testutil.Start(t, exec.Command(exe, args...))
}

// finish closes stdin, reads the rest of stdout and waits for the exit.
func finish(t *testing.T, f *testutil.Proc) (rest []byte, status int) {
	t.Helper()
	if err := f.Stdin.Close(); err != nil {
		t.Fatal(err)
	}
	rest = f.ReadRest()
	return rest, exitStatus(t, f.Wait())
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr) && exitErr.Exited():
		return exitErr.ExitCode()
	default:
		t.Fatalf("fixture did not exit normally: %v", err)
		return -1
	}
}

func firstDiff(a, b []byte) string {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			lo, hi := max(0, i-20), min(n, i+20)
			return fmt.Sprintf("first difference at byte %d: got %q, want %q", i, a[lo:min(len(a), hi)], b[lo:min(len(b), hi)])
		}
	}
	return fmt.Sprintf("lengths differ: got %d bytes, want %d", len(a), len(b))
}

// trickyLines are lines a re-encoding relay would alter. The last has no
// terminator, as when a peer closes mid-line.
func trickyLines() []string {
	blob := strings.Repeat("0123456789abcdef", 20<<20/16) // 20 MiB
	return []string{
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"echo","arguments":{"z":1,"a":2}}}` + "\n",
		`{"method":"x","id":"\u00e9\ud83d\ude00","params":{"s":"caf\u00e9 \"q\" \\ \/ é"}}` + "\n",
		`{ "b" : 1 ,  "a" : [ 1.0, -0, 1e400, 12345678901234567890 ], "unknown": {"k": null} }` + "\r\n",
		"\n",
		"not json at all\n",
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"blob":"` + blob + `"}}}` + "\n",
		`{"jsonrpc":"2.0","id":"last","method":"ping"}`,
	}
}

func TestRawserverEchoAndRecordAreByteExact(t *testing.T) {
	exe := testutil.Build(t, "./testdata/rawserver")
	record := filepath.Join(t.TempDir(), "record.jsonl")
	f := start(t, exe, "--echo", "--record", record)

	lines := trickyLines()
	input := strings.Join(lines, "")
	// Written from another goroutine: the 20 MiB line comes back while it
	// is still being sent, and pipes hold far less.
	go func() {
		_, _ = io.WriteString(f.Stdin, input)
		_ = f.Stdin.Close()
	}()
	got := f.ReadRest()
	if status := exitStatus(t, f.Wait()); status != 0 {
		t.Fatalf("exit status %d, want 0; stderr %q", status, f.Stderr.String())
	}
	if want := []byte(input + "\n"); !bytes.Equal(got, want) {
		t.Errorf("--echo changed the bytes: %s", firstDiff(got, want))
	}
	recorded, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(recorded, []byte(input)) {
		t.Errorf("--record changed the bytes: %s", firstDiff(recorded, []byte(input)))
	}
}

func TestRawserverRecordIsReadableWhileRunning(t *testing.T) {
	exe := testutil.Build(t, "./testdata/rawserver")
	record := filepath.Join(t.TempDir(), "record.jsonl")
	f := start(t, exe, "--echo", "--record", record)
	line := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	f.Send(line)
	f.ReadLine() // the echo comes after the line was recorded
	recorded, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if string(recorded) != line+"\n" {
		t.Fatalf("record while running = %q, want %q", recorded, line)
	}
}

func TestRawserverReplyKeepsRawIDs(t *testing.T) {
	exe := testutil.Build(t, "./testdata/rawserver")
	toolsFile := filepath.Join(t.TempDir(), "tools")
	if err := os.WriteFile(toolsFile, []byte("alpha\n\nbeta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := start(t, exe, "--reply", "--tools-file", toolsFile)

	type exchange struct {
		request string
		check   func(t *testing.T, resp string)
	}
	text := func(resp string) string { return gjson.Get(resp, "result.content.0.text").String() }
	args := `{"b" : [1, 2.50],"a":"\u00e9", "n": 12345678901234567890123}`
	exchanges := []exchange{
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`,
			func(t *testing.T, resp string) {
				if v := gjson.Get(resp, "result.protocolVersion").String(); v != "2025-03-26" {
					t.Errorf("initialize answered protocolVersion %q, want the client's", v)
				}
			}},
		{`{"method":"tools/list","id":"str\u00e9\"","jsonrpc":"2.0"}`,
			func(t *testing.T, resp string) {
				if names := gjson.Get(resp, "result.tools.#.name").Raw; names != `["alpha","beta"]` {
					t.Errorf("tools/list names = %s, want those in --tools-file", names)
				}
			}},
		{`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo","arguments":` + args + `}}`,
			func(t *testing.T, resp string) {
				if got := text(resp); got != args {
					t.Errorf("tools/call text = %q, want the raw arguments %q", got, args)
				}
			}},
		{`{"jsonrpc":"2.0","id":1.0e+2,"method":"tools/call","params":{"name":"fail"}}`,
			func(t *testing.T, resp string) {
				if !gjson.Get(resp, "result.isError").Bool() {
					t.Errorf("fail tool answered %s, want isError: true", resp)
				}
			}},
		{`{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"rpc_error"}}`,
			func(t *testing.T, resp string) {
				if code := gjson.Get(resp, "error.code").Int(); code != -32000 {
					t.Errorf("rpc_error tool answered %s, want a JSON-RPC error", resp)
				}
			}},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"need_input","arguments":{}}}`,
			func(t *testing.T, resp string) {
				if rt := gjson.Get(resp, "result.resultType").String(); rt != "input_required" {
					t.Errorf("need_input first answer %s, want resultType input_required", resp)
				}
			}},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"need_input","arguments":{},"inputResponses":{"confirm":{"action":"accept"}},"requestState":"rawserver-state-1"}}`,
			func(t *testing.T, resp string) {
				if rt := gjson.Get(resp, "result.resultType").String(); rt != "complete" {
					t.Errorf("need_input retry answered %s, want resultType complete", resp)
				}
			}},
		{`{"jsonrpc":"2.0","id":"d","method":"server/discover"}`,
			func(t *testing.T, resp string) {
				if code := gjson.Get(resp, "error.code").Int(); code != -32601 {
					t.Errorf("server/discover answered %s, want -32601", resp)
				}
			}},
	}
	for _, ex := range exchanges {
		f.Send(ex.request)
		resp := f.ReadLine()
		wantID := gjson.Get(ex.request, "id").Raw
		if gotID := gjson.Get(resp, "id").Raw; gotID != wantID {
			t.Errorf("request id %s answered with id %s", wantID, gotID)
		}
		ex.check(t, resp)
	}

	// Nothing answers a notification, a response, a blank line or a hung
	// call; a line that is not JSON gets a parse error.
	f.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" +
		" \r\n" +
		`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"hang"}}` + "\n" +
		"garbage\n" +
		`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if resp := f.ReadLine(); gjson.Get(resp, "error.code").Int() != -32700 || gjson.Get(resp, "id").Raw != "null" {
		t.Errorf("expected a parse error for the non-JSON line first, got %s", resp)
	}
	if resp := f.ReadLine(); gjson.Get(resp, "id").Raw != `"p"` {
		t.Errorf("expected the ping's answer next, got %s", resp)
	}

	// A batch is answered with an array holding only its requests' answers.
	f.Send(`[{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]`)
	batch := f.ReadLine()
	if ids := gjson.Get(batch, "#.id").Raw; ids != `[12345678901234567890,"b"]` {
		t.Errorf("batch answered ids %s, want [12345678901234567890,\"b\"]", ids)
	}

	if rest, status := finish(t, f); status != 0 || len(rest) != 0 {
		t.Errorf("after stdin EOF: status %d, extra output %q", status, rest)
	}
}

func TestRawserverReplySize(t *testing.T) {
	exe := testutil.Build(t, "./testdata/rawserver")
	const size = 3 << 20
	f := start(t, exe, "--reply", "--reply-size", fmt.Sprint(size))
	f.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	got := gjson.Get(f.ReadLine(), "result.content.0.text").String()
	if len(got) != size || strings.Trim(got, "x") != "" {
		t.Fatalf("--reply-size %d gave a %d-byte text", size, len(got))
	}
}

func TestRawserverEnvTool(t *testing.T) {
	exe := testutil.Build(t, "./testdata/rawserver")
	t.Setenv("BIR_FIXTURE_PROBE", "visible")
	f := start(t, exe, "--reply", "--env")
	f.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"env","arguments":{}}}`)
	var env []string
	if err := json.Unmarshal([]byte(gjson.Get(f.ReadLine(), "result.content.0.text").String()), &env); err != nil {
		t.Fatalf("env tool text is not a JSON array of strings: %v", err)
	}
	found := false
	for _, kv := range env {
		found = found || kv == "BIR_FIXTURE_PROBE=visible"
	}
	if !found {
		t.Fatalf("env tool did not report BIR_FIXTURE_PROBE; got %d entries", len(env))
	}
}

func TestRawserverEmit(t *testing.T) {
	exe := testutil.Build(t, "./testdata/rawserver")
	script := "server banner, not JSON\r\n" +
		`{"jsonrpc":"2.0","id":"srv-1","method":"roots/list"}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"é"}}` + "\n"
	emit := filepath.Join(t.TempDir(), "emit")
	if err := os.WriteFile(emit, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	f := start(t, exe, "--emit", emit, "--echo")
	f.Send("{}")
	rest, status := finish(t, f)
	if want := script + "{}\n"; string(rest) != want || status != 0 {
		t.Fatalf("stdout %q (status %d), want %q", rest, status, want)
	}
}

func TestRawserverExitAfter(t *testing.T) {
	exe := testutil.Build(t, "./testdata/rawserver")
	record := filepath.Join(t.TempDir(), "record")
	f := start(t, exe, "--echo", "--record", record, "--exit-after", "2", "--exit-code", "3")
	// All three lines are in the pipe before it reads: it must stop at two.
	f.Send("a", "b", "c")
	out := f.ReadRest()
	if status := exitStatus(t, f.Wait()); status != 3 {
		t.Errorf("exit status %d, want 3", status)
	}
	if string(out) != "a\nb\n" {
		t.Errorf("stdout %q, want the first two lines", out)
	}
	if recorded, _ := os.ReadFile(record); string(recorded) != "a\nb\n" {
		t.Errorf("recorded %q, want the first two lines", recorded)
	}
}

func TestRawserverExitNow(t *testing.T) {
	exe := testutil.Build(t, "./testdata/rawserver")
	f := start(t, exe, "--exit-now", "--exit-code", "2", "--stderr", "bad flag: --frob\n")
	out := f.ReadRest()
	if status := exitStatus(t, f.Wait()); status != 2 {
		t.Errorf("exit status %d, want 2", status)
	}
	if got := f.Stderr.String(); got != "bad flag: --frob\n" {
		t.Errorf("stderr %q, want the --stderr text exactly", got)
	}
	if len(out) != 0 {
		t.Errorf("stdout %q, want nothing", out)
	}
}

func TestRawserverSigterm(t *testing.T) {
	exe := testutil.Build(t, "./testdata/rawserver")

	t.Run("default dies", func(t *testing.T) {
		f := start(t, exe, "--echo")
		f.Send("x")
		f.ReadLine()
		if err := f.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err := f.Wait()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			t.Fatalf("after SIGTERM: %v, want death by signal", err)
		}
		if ws := exitErr.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Fatalf("after SIGTERM: %v, want death by SIGTERM", err)
		}
	})

	t.Run("--ignore-sigterm survives", func(t *testing.T) {
		f := start(t, exe, "--echo", "--ignore-sigterm")
		f.Send("x")
		f.ReadLine() // SIGTERM is ignored before the first line is read
		if err := f.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		f.Send("y")
		if got := f.ReadLine(); got != "y\n" {
			t.Fatalf("echo after SIGTERM = %q", got)
		}
		if _, status := finish(t, f); status != 0 {
			t.Fatalf("exit status %d after stdin EOF, want 0", status)
		}
	})
}

func TestRawserverGrandchildSharesGroupAndOutlivesParent(t *testing.T) {
	exe := testutil.Build(t, "./testdata/rawserver")
	pidfile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(exe, "--echo", "--grandchild", "--pidfile", pidfile)
	// Its own group, as a proxy would start it, so the group can be killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A file, not a buffer: with a buffer Wait would wait for the grandchild, which
	// holds the same stderr.
	cmd.Stderr = os.Stderr
	f := testutil.Start(t, cmd)
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = unix.Kill(-pgid, unix.SIGKILL) })

	f.Send("x")
	f.ReadLine() // both pidfiles exist once it reads
	parent := testutil.ReadPidfile(t, pidfile)
	grandchild := testutil.ReadPidfile(t, pidfile+".grandchild")
	if parent != cmd.Process.Pid {
		t.Errorf("pidfile says %d, process is %d", parent, cmd.Process.Pid)
	}
	if g, err := unix.Getpgid(grandchild); err != nil || g != pgid {
		t.Fatalf("grandchild %d in group %d (%v), want %d", grandchild, g, err, pgid)
	}

	f.Stdin.Close()
	if err := f.Wait(); err != nil {
		t.Fatalf("parent after stdin EOF: %v", err)
	}
	// It blocks until a signal: still there after its parent is gone. This is
	// what a proxy leaks if it signals only its direct child.
	if !testutil.Alive(grandchild) {
		t.Fatal("grandchild died with its parent; it must wait for a signal")
	}
	if err := unix.Kill(-pgid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := testutil.WaitExit(testutil.Context(t), grandchild); err != nil {
		t.Fatal(err)
	}
}

func TestWaitExitSeesAProcessEnd(t *testing.T) {
	exe := testutil.Build(t, "./testdata/rawserver")
	f := start(t, exe, "--echo")
	f.Send("x")
	f.ReadLine()
	waited := make(chan error, 1)
	go func() { waited <- testutil.WaitExit(testutil.Context(t), f.Cmd.Process.Pid) }()
	f.Stdin.Close()
	if err := testutil.Recv(t, waited, "WaitExit"); err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(); err != nil {
		t.Fatal(err)
	}
	if testutil.Alive(f.Cmd.Process.Pid) {
		t.Fatal("Alive reports a reaped process")
	}
	if err := testutil.WaitExit(testutil.Context(t), f.Cmd.Process.Pid); err != nil {
		t.Fatalf("WaitExit on a gone pid: %v", err)
	}
}

func TestMcpserverIgnoresCorrelationKeyAndHonoursCancel(t *testing.T) {
	exe := testutil.Build(t, "./testdata/mcpserver")
	f := start(t, exe)
	f.Send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if resp := f.ReadLine(); gjson.Get(resp, "result.serverInfo.name").String() != "mcpserver" {
		t.Fatalf("initialize answered %s", resp)
	}
	f.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	f.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","_bir_call_id":"c-1"}}}`)
	if resp := f.ReadLine(); gjson.Get(resp, "result.content.0.text").String() != "hi" || gjson.Get(resp, "result.isError").Bool() {
		t.Fatalf("echo with a correlation key answered %s", resp)
	}

	f.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{"ms":600000},"_meta":{"progressToken":"s"}}}`)
	if n := f.ReadLine(); gjson.Get(n, "method").String() != "notifications/progress" {
		t.Fatalf("slow sent %s first, want its in-flight progress notification", n)
	}
	f.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"test"}}`)
	if resp := f.ReadLine(); gjson.Get(resp, "result.content.0.text").String() != "slow: cancelled" {
		t.Fatalf("slow after cancel answered %s", resp)
	}
	if _, status := finish(t, f); status != 0 {
		t.Fatalf("exit status %d after stdin EOF, want 0", status)
	}
}

func TestDemohostAgainstMcpserver(t *testing.T) {
	demohost := testutil.Build(t, "./testdata/demohost")
	mcpserver := testutil.Build(t, "./testdata/mcpserver")
	for _, era := range []struct{ flag, shows string }{
		{"auto", "protocol 2026-07-28 (stateless era)"},
		{"session", "protocol 2025-11-25 (session era)"},
		{"stateless", "protocol 2026-07-28 (stateless era)"},
	} {
		t.Run(era.flag, func(t *testing.T) {
			cmd := exec.CommandContext(testutil.Context(t), demohost, "--era", era.flag, "--", mcpserver)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("demohost: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			transcript := stdout.String()
			for _, want := range []string{
				"→ initialize\n← ok: mcpserver 0.1.0, " + era.shows + "\n",
				"→ tools/list\n← ok: 9 tools: add, big, echo, elicit, fail, log, progress, sample, slow\n",
				"→ tools/call echo {\"text\":\"hi\"}  (_bir_call_id=demo-1)\n← ok: hi\n",
				"→ tools/call add {\"a\":2,\"b\":3}  (_bir_call_id=demo-2)\n← ok: 5\n",
				"← notifications/progress 1/3: step 1/3\n← notifications/progress 2/3: step 2/3\n← notifications/progress 3/3: step 3/3\n← ok: done after 3 progress notifications\n",
				"  ← sampling/createMessage \"Name a colour.\"",
				"← ok: Blue, like the sky over the proxy.\n",
				"  ← elicitation/create \"What is your name?\"",
				"← ok: action=accept content={\"name\":\"Ada\"}\n",
				"→ tools/call fail {\"message\":\"this tool always fails\"}  (_bir_call_id=demo-6)\n← tool error, as expected: this tool always fails\n",
				"→ close\n← server exited cleanly\ndemo passed: 9 steps\n",
			} {
				if !strings.Contains(transcript, want) {
					t.Errorf("transcript lacks %q\ntranscript:\n%s", want, transcript)
				}
			}
		})
	}
}

func TestDemohostFailsClearly(t *testing.T) {
	demohost := testutil.Build(t, "./testdata/demohost")
	rawserver := testutil.Build(t, "./testdata/rawserver")
	// rawserver lists only "echo", so the demo must stop at tools/list.
	cmd := exec.CommandContext(testutil.Context(t), demohost, "--era", "session", "--", rawserver, "--reply")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("demohost against a server without the demo's tools: %v, want exit status 1", err)
	}
	if want := `demohost: FAILED at tools/list: server has no "add" tool (it has echo)`; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}
	if strings.Contains(stdout.String(), "demo passed") {
		t.Errorf("stdout claims success:\n%s", stdout.String())
	}
}
