package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// testHost is a test host: the built proxy as a real child process, talked to over
// real pipes.
type testHost struct {
	*testutil.Proc
	t   *testing.T
	out *framing.Reader
}

// startProxy starts the built proxy with args, env added to the test's environment
// (with BIR_OFF=1 unless env sets BIR_OFF, so relay tests record nothing).
func startProxy(t *testing.T, env []string, args ...string) *testHost {
	t.Helper()
	return startProxyIn(t, "", env, args...)
}

// startProxyIn is startProxy with the proxy's working directory set to dir.
func startProxyIn(t *testing.T, dir string, env []string, args ...string) *testHost {
	t.Helper()
	bin := testutil.Build(t, "./cmd/bir-proxy")
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	if !hasKey(env, "BIR_OFF") {
		cmd.Env = append(cmd.Env, "BIR_OFF=1")
	}
	cmd.Env = append(cmd.Env, env...)
	p := testutil.Start(t, cmd)
	return &testHost{Proc: p, t: t, out: framing.NewReader(p.Stdout)}
}

func hasKey(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}

func (s *testHost) recv() string {
	s.t.Helper()
	msg, err := s.out.Read()
	if err != nil {
		s.t.Fatalf("reading from the proxy: %v (stderr: %s)", err, s.Stderr.String())
	}
	return string(msg)
}

// end closes the host's side, as a host ending the session does, and requires the
// proxy to exit with status 0 (the server's, which exits 0 on EOF).
func (s *testHost) end() {
	s.t.Helper()
	s.Stdin.Close()
	if code := s.ExitCode(); code != 0 {
		s.t.Fatalf("exit status %d after the host closed stdin, want 0", code)
	}
}

// sendLater writes line from another goroutine, for a message too large for the
// pipes to hold while nobody reads the answer; the returned channel says how it went.
func (s *testHost) sendLater(line string) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := io.WriteString(s.Stdin, line+"\n")
		errc <- err
	}()
	return errc
}

// fidelityLines are messages whose bytes a re-encoding relay would change.
func fidelityLines() []string {
	return []string{
		`{"jsonrpc":"2.0","id":"abc","method":"ping"}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":-1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1.0,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1e3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"method":"tools/list","params":{"x-unknown":{"deep":[1,{"z":true}]}},"jsonrpc":"2.0","id":7,"extra":"kept"}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\u00e9\u4e2d\ud83d\ude00 é中😀 \"q\" \\ \/"}}}`,
		`  { "jsonrpc" : "2.0" , "id" : 9 ,	"method" : "ping" }  `,
		`[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}]`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9007199254740993,"reason":"x"}}`,
		`{"jsonrpc":"2.0","id":"srv-1","result":{"model":"m","role":"assistant","content":{"type":"text","text":"sampled"}}}`,
		`{"jsonrpc":"2.0","id":11,"method":"x","params":{"n":123456789012345678901234567890,"f":1.50,"e":-0,"big":1E+400}}`,
	}
}

func TestFidelityEcho(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	record := filepath.Join(t.TempDir(), "received")
	s := startProxy(t, nil, "--server", "raw", "--", raw, "--echo", "--record", record)

	lines := fidelityLines()
	for _, l := range lines {
		s.Send(l)
		if got := s.recv(); got != l {
			t.Fatalf("round trip changed a message:\n sent %s\n  got %s", l, got)
		}
	}
	// A malformed host line still reaches the server (it answers the parse error);
	// the echo of it is not a message, so it goes to stderr, never to the host.
	garbage := "not json {"
	s.Send(garbage)
	lines = append(lines, garbage)
	if err := s.Stderr.WaitFor(testutil.Context(t), "[raw] "+garbage+"\n"); err != nil {
		t.Fatal(err)
	}
	s.end()
	got, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(lines, "\n") + "\n"; string(got) != want {
		t.Fatalf("the server received different bytes:\n got %q\nwant %q", got, want)
	}
	if _, err := s.out.Read(); err != io.EOF {
		t.Fatalf("the host got a line that is not a message: %v", err)
	}
}

// TestFidelityLarge sends a 50 MB message each way.
func TestFidelityLarge(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	s := startProxy(t, nil, "--", raw, "--echo")
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` +
		strings.Repeat("0123456789", 5<<20) + `"}}}`
	sent := s.sendLater(big)
	if got := s.recv(); got != big {
		t.Fatalf("50 MB message changed: got %d bytes, want %d", len(got), len(big))
	}
	if err := testutil.Recv(t, sent, "the 50 MB write"); err != nil {
		t.Fatalf("writing to the proxy: %v", err)
	}
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if got := s.recv(); got != `{"jsonrpc":"2.0","id":2,"method":"ping"}` {
		t.Fatalf("after the large message: %s", got)
	}
}

// TestFidelityServerSide covers what only the server originates: notifications,
// server→client requests, responses out of order, and stdout lines that are not
// messages.
func TestFidelityServerSide(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	dir := t.TempDir()
	fromServer := []string{
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"k":9007199254740993}}}`,
		`{"id":"srv-1","jsonrpc":"2.0","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"b":1,"a":2}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"nope","data":null}}`,
		`[{"jsonrpc":"2.0","id":4,"result":{}},{"jsonrpc":"2.0","id":5,"result":{}}]`,
	}
	var script strings.Builder
	script.WriteString("Server starting... (a banner hosts choke on)\n")
	for i, l := range fromServer {
		script.WriteString(l + "\n")
		if i == 2 {
			script.WriteString("[INFO] not a message either\n\n")
		}
	}
	emit := filepath.Join(dir, "emit")
	if err := os.WriteFile(emit, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(dir, "received")
	s := startProxy(t, nil, "--server", "scripted", "--", raw, "--emit", emit, "--record", record)
	for _, want := range fromServer {
		if got := s.recv(); got != want {
			t.Fatalf("server message changed or out of order:\n want %s\n  got %s", want, got)
		}
	}
	// The host answers the server's sampling request; the answer must reach the server.
	answer := `{"jsonrpc":"2.0","id":"srv-1","result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}}`
	s.Send(answer)
	s.end()
	got, _ := os.ReadFile(record)
	if string(got) != answer+"\n" {
		t.Fatalf("server received %q, want the host's answer", got)
	}
	for _, want := range []string{"[scripted] Server starting... (a banner hosts choke on)\n", "[scripted] [INFO] not a message either\n"} {
		if !strings.Contains(s.Stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, s.Stderr.String())
		}
	}
	if _, err := s.out.Read(); err != io.EOF {
		t.Fatalf("host got more than the server's messages: %v", err)
	}
}

func TestMissingOrBadCommand(t *testing.T) {
	t.Parallel()
	bin := testutil.Build(t, "./cmd/bir-proxy")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", []string{"--server", "x"}, 2, "no server command"},
		{"unknown flag", []string{"--nope", "--", "true"}, 2, "unknown flag --nope"},
		{"not found", []string{"--", "/no/such/server"}, 127, `cannot start the MCP server "server" (/no/such/server)`},
		// A bare first word is what a person types: neither a command nor a program is
		// a usage error (docs/wrap.md); after -- it is the server's command.
		{"not on PATH", []string{"no-such-server-anywhere"}, 2, "nor a program on PATH"},
		{"not on PATH after --", []string{"--", "no-such-server-anywhere"}, 127, "is it installed, and on the PATH"},
	} {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(testutil.Context(t), bin, tc.args...)
		cmd.Env = append(os.Environ(), "BIR_OFF=1", "XDG_STATE_HOME="+t.TempDir())
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
			t.Errorf("%s: err %v, want exit %d", tc.name, err, tc.code)
		}
		if stdout.Len() != 0 {
			t.Errorf("%s: wrote %q to stdout", tc.name, stdout.String())
		}
		if lines := strings.Count(strings.TrimSpace(stderr.String()), "\n") + 1; !strings.Contains(stderr.String(), tc.msg) || lines != 1 {
			t.Errorf("%s: stderr %q, want one line with %q", tc.name, stderr.String(), tc.msg)
		}
	}
}

// hostError reads one answer from the proxy and checks that it is a JSON-RPC
// error for id whose message says all of says.
func hostError(t *testing.T, s *testHost, id string, says ...string) string {
	t.Helper()
	got := s.recv()
	r := gjson.Parse(got)
	if r.Get("id").Raw != id || r.Get("error.code").Int() != -32000 {
		t.Fatalf("want an error answer to %s, got %s", id, got)
	}
	for _, want := range says {
		if !strings.Contains(r.Get("error.message").String(), want) {
			t.Errorf("the error lacks %q: %s", want, got)
		}
	}
	return r.Get("error.message").String()
}

const initializeReq = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

// TestMissingCommandAnswersTheHost: a server command that does not exist gets the
// host an error it shows, naming the server and the exec error, for each request
// it sends (a stateless-era host may send a tools/call first, which is recorded as
// such); the proxy exits 127 as a shell would.
func TestMissingCommandAnswersTheHost(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := startProxyIn(t, t.TempDir(), []string{"BIR_OFF=0", "XDG_STATE_HOME=" + state, "BIR_RECORDER_URL="},
		"--server", "ghost", "/no/such/mcp-server", "--stdio")
	s.Send(initializeReq, `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"echo","arguments":{"_bir_call_id":"k-1"}}}`)
	hostError(t, s, "1", `cannot start the MCP server "ghost" (/no/such/mcp-server --stdio)`, "no such file or directory")
	msg := hostError(t, s, `"c1"`, `"ghost"`)
	s.Stdin.Close()
	if code := s.ExitCode(); code != 127 {
		t.Fatalf("exit %d, want 127", code)
	}
	journal := readLine(t, filepath.Join(state, "bir-proxy", "journal", "ghost.jsonl"), 0)
	r := gjson.Parse(journal)
	if r.Get("outcome").String() != "rpc_error" || r.Get("error.message").String() != msg || r.Get("callId").String() != "k-1" {
		t.Errorf("the call was not recorded with the cause: %s", journal)
	}
}

// TestExitAtStartAnswersTheHost: with --no-revive, a server that exits before
// answering anything gets the host an error with its exit status and last stderr
// lines, whether the host's request was written before the server died or after;
// the proxy passes on the server's status. With revival (the default) the host's
// request gets an error with the cause too, from revive, which gives up on a server
// that never comes up.
func TestExitAtStartAnswersTheHost(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	t.Run("request after the exit", func(t *testing.T) {
		t.Parallel()
		s := startProxy(t, nil, "--server", "dies", "--no-revive", raw, "--exit-now", "--exit-code", "3",
			"--stderr", "starting\n\x1b[31mfatal:\x1b[0m GITHUB_TOKEN is not set\nbye")
		// The server is gone before the host writes.
		if err := s.Stderr.WaitFor(testutil.Context(t), "went away before answering"); err != nil {
			t.Fatal(err)
		}
		s.Send(initializeReq)
		hostError(t, s, "1", `the MCP server "dies"`, "exited with status 3", "starting | fatal: GITHUB_TOKEN is not set | bye")
		if code := s.ExitCode(); code != 3 {
			t.Fatalf("exit %d, want the server's 3", code)
		}
	})
	t.Run("request pending at the exit", func(t *testing.T) {
		t.Parallel()
		s := startProxy(t, nil, "--server", "dies", "--no-revive", raw, "--exit-after", "1", "--exit-code", "4", "--stderr", "unsupported protocol\n")
		s.Send(initializeReq)
		hostError(t, s, "1", "exited with status 4", "unsupported protocol")
		s.Stdin.Close()
		if code := s.ExitCode(); code != 4 {
			t.Fatalf("exit %d, want the server's 4", code)
		}
	})
	t.Run("revival gives up", func(t *testing.T) {
		t.Parallel()
		s := startProxy(t, nil, "--server", "dies", raw, "--exit-now", "--exit-code", "3", "--stderr", "fatal: GITHUB_TOKEN is not set\n")
		s.Send(initializeReq)
		hostError(t, s, "1", "dies", "exited with status 3", "GITHUB_TOKEN is not set")
		s.Stdin.Close()
		if code := s.ExitCode(); code != 3 {
			t.Fatalf("exit %d, want the last server's 3", code)
		}
	})
}

func TestChildExitsAtOnce(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	s := startProxy(t, nil, "--no-revive", "--", raw, "--exit-now", "--exit-code", "3", "--stderr", "usage: rawserver [flags]\n")
	if code := s.ExitCode(); code != 3 {
		t.Fatalf("exit status %d, want the server's 3", code)
	}
	if !strings.Contains(s.Stderr.String(), "usage: rawserver [flags]") {
		t.Fatalf("server's stderr not shown: %q", s.Stderr.String())
	}
}

func TestChildExitsMidSession(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	s := startProxy(t, nil, "--no-revive", "--", raw, "--echo", "--exit-after", "2", "--exit-code", "5")
	s.Send(`{"id":1}`, `{"id":2}`)
	// Every line the server wrote before it died reaches the host.
	if a, b := s.recv(), s.recv(); a != `{"id":1}` || b != `{"id":2}` {
		t.Fatalf("got %s %s", a, b)
	}
	if code := s.ExitCode(); code != 5 {
		t.Fatalf("exit status %d, want 5", code)
	}
}

// startWithServerPid starts the proxy in front of an echoing rawserver with extra
// flags, and returns once the server has answered once, with the server's pid and the
// pidfile it wrote.
func startWithServerPid(t *testing.T, extra ...string) (s *testHost, pid int, pidfile string) {
	t.Helper()
	raw := testutil.Build(t, "./testdata/rawserver")
	pidfile = filepath.Join(t.TempDir(), "pid")
	s = startProxy(t, nil, append([]string{"--", raw, "--echo", "--pidfile", pidfile}, extra...)...)
	s.Send(`{"id":1}`)
	s.recv()
	return s, testutil.ReadPidfile(t, pidfile), pidfile
}

func TestStdinEOFStopsChild(t *testing.T) {
	t.Parallel()
	s, pid, _ := startWithServerPid(t, "--exit-code", "4")
	s.Stdin.Close()
	if code := s.ExitCode(); code != 4 {
		t.Fatalf("exit status %d, want the server's 4", code)
	}
	if testutil.Alive(pid) {
		t.Fatalf("server %d still running after the proxy exited", pid)
	}
}

func TestSigtermStopsChildAndGroup(t *testing.T) {
	t.Parallel()
	s, pid, pidfile := startWithServerPid(t, "--grandchild")
	grand := testutil.ReadPidfile(t, pidfile+".grandchild")
	if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The stop closes the server's stdin and sends SIGTERM together: the server may
	// exit on the EOF (0) or die of the signal (143); either is its status to pass on.
	if code := s.ExitCode(); code != 0 && code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit status %d, want the server's: 0 or %d", code, 128+int(syscall.SIGTERM))
	}
	ctx := testutil.Context(t)
	for _, p := range []int{pid, grand} {
		if err := testutil.WaitExit(ctx, p); err != nil {
			t.Fatalf("process %d outlived the proxy: %v", p, err)
		}
	}
}

func TestChildIgnoringSigtermIsKilled(t *testing.T) {
	t.Parallel()
	s, pid, _ := startWithServerPid(t, "--ignore-sigterm", "--ignore-eof")
	if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.ExitCode(); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit status %d, want %d (the server, SIGKILLed)", code, 128+int(syscall.SIGKILL))
	}
	if testutil.Alive(pid) {
		t.Fatalf("server %d still running", pid)
	}
}

func TestProxySIGKILLLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	// --ignore-sigterm: only the kernel's parent-death SIGKILL can end it.
	s, pid, _ := startWithServerPid(t, "--ignore-sigterm")
	if err := s.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	s.Wait() // killed: no status of its own to check
	if err := testutil.WaitExit(testutil.Context(t), pid); err != nil {
		t.Fatalf("server outlived a SIGKILLed proxy: %v", err)
	}
}

func TestNoBIRVariablesReachTheServer(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	s := startProxy(t, []string{"BIR_RECORDER_TOKEN=secret-token", "BIR_RECORDER_URL=http://127.0.0.1:1", "NOT_BIR=kept"}, "--", raw, "--reply", "--env")
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"env","arguments":{}}}`)
	got := s.recv()
	if strings.Contains(got, "BIR_") || strings.Contains(got, "secret-token") {
		t.Fatalf("server saw a BIR_ variable: %s", got)
	}
	if !strings.Contains(got, "NOT_BIR=kept") {
		t.Fatalf("server lost an ordinary variable: %s", got)
	}
}

// TestMCPGoClientSameResults runs a real host library (mcp-go's client, in the demo
// host) against the mcp-go fixture server, directly and through the proxy, in both
// protocol eras: tools/list, calls, progress, sampling and elicitation must give the
// same transcript.
func TestMCPGoClientSameResults(t *testing.T) {
	t.Parallel()
	host := testutil.Build(t, "./testdata/demohost")
	server := testutil.Build(t, "./testdata/mcpserver")
	proxy := testutil.Build(t, "./cmd/bir-proxy")
	for _, era := range []string{"session", "stateless"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			run := func(args ...string) string {
				cmd := exec.CommandContext(testutil.Context(t), host, append([]string{"--era", era, "--"}, args...)...)
				cmd.Env = append(os.Environ(), "BIR_OFF=1")
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%v: %v\n%s", args, err, stderr.String())
				}
				return string(out)
			}
			direct := run(server)
			proxied := run(proxy, "--server", "demo", "--", server)
			if direct != proxied {
				t.Fatalf("transcripts differ\n--- direct\n%s\n--- through bir-proxy\n%s", direct, proxied)
			}
			for _, step := range []string{"tools/list", "notifications/progress 3/3", "sampling/createMessage", "elicitation/create", "demo passed"} {
				if !strings.Contains(proxied, step) {
					t.Errorf("transcript lacks %q:\n%s", step, proxied)
				}
			}
		})
	}
}

// TestSigtermCutsAGentleStopShort: the host closed stdin (the gentle stop waits for the
// server to exit on its own) and then sends SIGTERM: the proxy stops the server at once
// rather than waiting out the stdin grace, here an hour.
func TestSigtermCutsAGentleStopShort(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	s := startProxy(t, nil, "--stop-grace", "1h", "--", raw, "--echo", "--ignore-eof")
	s.Send(`{"id":1}`)
	s.recv()
	s.Stdin.Close()
	if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-testutil.Context(t).Done():
		t.Fatal("the proxy waited out the stdin grace instead of acting on SIGTERM")
	}
	if code := s.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want the server killed by SIGTERM", code)
	}
}
