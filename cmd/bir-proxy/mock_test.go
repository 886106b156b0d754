package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// mockScript is a host's session: the handshake, the tools, calls (one repeated, one
// repeated with its keys in another order and a number spelled otherwise).
var mockScript = []string{
	`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test-host","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"a":1,"b":"x  y"}}}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"b":"x  y","a":1.0}}}`,
	`{"jsonrpc":"2.0","id":"four","method":"tools/call","params":{"name":"fail","arguments":{}}}`,
	`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"rpc_error"}}`,
	`{"jsonrpc":"2.0","id":6,"method":"ping"}`,
}

// mockSession sends script to p and returns each answer by its raw id.
func mockSession(t *testing.T, p *testutil.Proc, script []string) map[string]string {
	t.Helper()
	p.Send(script...)
	got := map[string]string{}
	for _, l := range script {
		if strings.Contains(l, `"id"`) {
			a := p.ReadLine()
			f, ok := jsonlex.TopFields([]byte(a))
			if !ok {
				t.Fatalf("an answer that does not read: %q", a)
			}
			got[string(f.ID)] = a
		}
	}
	return got
}

// answerBytes is what an answer says, its id aside: the raw result or error.
func answerBytes(a string) string {
	f, _ := jsonlex.TopFields([]byte(a))
	if f.Result != nil {
		return "result " + string(f.Result)
	}
	return "error " + string(f.Error)
}

// TestMockAnswersAsRecorded: a session recorded through the proxy is answered by
// bir-proxy mock with the recorded bytes (results and errors as the server sent
// them, whatever the id); an unmatched call gets an error naming the nearest
// recorded call; with --fallback the live server answers it and --cassette records it.
func TestMockAnswersAsRecorded(t *testing.T) {
	_, _ = isolate(t)
	bp := testutil.Build(t, "./cmd/bir-proxy")
	rs := testutil.Build(t, "./testdata/rawserver")
	dir := t.TempDir()
	path := filepath.Join(dir, "c.jsonl")

	rec := testutil.Start(t, exec.Command(bp, "--cassette", path, "--", rs, "--reply"))
	recorded := mockSession(t, rec, mockScript)
	rec.Stdin.Close()
	if code := rec.ExitCode(); code != 0 {
		t.Fatalf("the recording proxy exited %d: %s", code, rec.Stderr.String())
	}
	if n := cassetteCalls(t, path); n != 4 {
		t.Fatalf("the cassette holds %d calls, want 4", n)
	}

	m := testutil.Start(t, exec.Command(bp, "mock", path))
	mocked := mockSession(t, m, mockScript)
	for id, a := range recorded {
		if answerBytes(mocked[id]) != answerBytes(a) {
			t.Errorf("id %s:\n mock %s\n  was %s", id, mocked[id], a)
		}
	}
	// Another id, the same bytes: the id is the request's, raw; past the recorded
	// repeats, the last answer again.
	again := mockSession(t, m, []string{`{"jsonrpc":"2.0","id":"x\u0031","method":"tools/call","params":{"name":"echo","arguments":{"a":1,"b":"x  y"}}}`})
	if a := again[`"x\u0031"`]; answerBytes(a) != answerBytes(recorded["3"]) || !strings.Contains(a, `"id":"x\u0031"`) {
		t.Errorf("with another id: %s", a)
	}
	unmatched := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"a":2,"b":"x  y"}}}`
	un := mockSession(t, m, []string{unmatched})["9"]
	if !strings.Contains(un, `"code":-32602`) || !strings.Contains(un, `"nearest":[{"tool":"echo","seq":1,"arguments":{"a":1,"b":"x  y"}}]`) {
		t.Errorf("the unmatched call's answer: %s", un)
	}
	m.Stdin.Close()
	if code := m.ExitCode(); code != 0 {
		t.Fatalf("mock exited %d: %s", code, m.Stderr.String())
	}

	// --fallback: the live server answers what the cassette does not hold; --cassette
	// records it (a cassette that reads strictly), and only it.
	fresh := filepath.Join(dir, "new.jsonl")
	fb := testutil.Start(t, exec.Command(bp, "mock", "--fallback", "--cassette", fresh, path, "--", rs, "--reply"))
	got := mockSession(t, fb, append(mockScript[:3:3], unmatched, mockScript[3]))
	var live struct {
		Result struct{ Content []struct{ Text string } }
	}
	if err := json.Unmarshal([]byte(got["9"]), &live); err != nil || len(live.Result.Content) != 1 || live.Result.Content[0].Text != `{"a":2,"b":"x  y"}` {
		t.Errorf("the live answer: %s (%v)", got["9"], err)
	}
	if answerBytes(got["2"]) != answerBytes(recorded["2"]) {
		t.Errorf("with --fallback, a recorded call: %s", got["2"])
	}
	fb.Stdin.Close()
	if code := fb.ExitCode(); code != 0 {
		t.Fatalf("mock --fallback exited %d: %s", code, fb.Stderr.String())
	}
	if n := cassetteCalls(t, fresh); n != 1 {
		t.Fatalf("%s holds %d calls, want the live one", fresh, n)
	}
	b, _ := os.ReadFile(fresh)
	if !strings.Contains(string(b), `"arguments":{"a":2,"b":"x  y"}`) || !strings.Contains(string(b), `"era":"session"`) {
		t.Errorf("the new cassette:\n%s", b)
	}
	// And the mock answers from both.
	both := testutil.Start(t, exec.Command(bp, "mock", path, fresh))
	if a := mockSession(t, both, []string{unmatched})["9"]; answerBytes(a) != answerBytes(got["9"]) {
		t.Errorf("from the new cassette: %s", a)
	}
	both.Stdin.Close()
	both.ExitCode()

	// --listen: the same answers over Streamable HTTP, until interrupted.
	hp := testutil.Start(t, exec.Command(bp, "mock", "--listen", "127.0.0.1:0", path))
	ctx := testutil.Context(t)
	var addr string
	if err := hp.Stderr.WaitUntil(ctx, func(s string) bool {
		_, rest, ok := strings.Cut(s, "listening on ")
		addr, _, _ = strings.Cut(rest, "\n")
		return ok && strings.HasSuffix(addr, "/mcp")
	}); err != nil {
		t.Fatalf("mock --listen: %v: %s", err, hp.Stderr.String())
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, addr, strings.NewReader(mockScript[3]))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if answerBytes(string(body)) != answerBytes(recorded["2"]) {
		t.Errorf("over HTTP: %s", body)
	}
	hp.Cmd.Process.Signal(syscall.SIGTERM)
	if code := hp.ExitCode(); code != 0 {
		t.Errorf("mock --listen exited %d on SIGTERM: %s", code, hp.Stderr.String())
	}
}

// TestMockUsage: what the command refuses.
func TestMockUsage(t *testing.T) {
	_, _ = isolate(t)
	bp := testutil.Build(t, "./cmd/bir-proxy")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"jsonrpc\":\"2.0\"}\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no cassette"},
		{[]string{bad}, "not a bir-proxy cassette"},
		{[]string{"--latency", "fast", bad}, "--latency"},
		{[]string{"--fallback", bad}, "--fallback needs"},
		{[]string{"--cassette", "x.jsonl", bad}, "goes with --fallback"},
		{[]string{"--fallback", "--cassette", bad, bad, "--", "true"}, "being replayed"},
		{[]string{"--listen", "0.0.0.0:8931", bad}, "loopback"},
	} {
		p := testutil.Start(t, exec.Command(bp, append([]string{"mock"}, tc.args...)...))
		p.Stdin.Close()
		if code := p.ExitCode(); code != 2 || !strings.Contains(p.Stderr.String(), tc.want) {
			t.Errorf("mock %q: exit %d, %s; want 2 and %q", tc.args, code, p.Stderr.String(), tc.want)
		}
	}
}

// TestMockStopsOnSIGTERM: a host stops its server with SIGTERM, stdin still open; the
// mock, blocked reading stdin, went on running.
func TestMockStopsOnSIGTERM(t *testing.T) {
	_, _ = isolate(t)
	bp := testutil.Build(t, "./cmd/bir-proxy")
	path := filepath.Join(t.TempDir(), "c.jsonl")
	os.WriteFile(path, []byte(`{"bir-cassette":1,"server":"s","recordedAt":"2026-01-01T00:00:00Z","era":"unknown"}`+"\n"), 0o600)
	p := testutil.Start(t, exec.Command(bp, "mock", path))
	if got := strings.TrimSpace(mockSession(t, p, []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`})["1"]); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("ping: %s", got)
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	if code := p.ExitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM: %s", code, p.Stderr.String())
	}
}
