package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// deepServerScript is a stdio server in sh: it answers the host's initialize (id 0),
// reads notifications/initialized and one request, then prints a 1 MiB line of
// nested brackets (newline-ended: validated in full, as every line up to 1 MiB is),
// then 10^7 "[" with no newline (its unfinished last line, validated in full whatever
// its size), and exits with status 1. With marker set, only the first start does
// this; later ones are rawserver --reply, for a revival that works.
func deepServerScript(raw, marker string) string {
	s := `read l; printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"deep","version":"1"}}}'; read l; read l
head -c 1048575 /dev/zero | tr '\0' '['; printf ']\n'
head -c 10000000 /dev/zero | tr '\0' '['
exit 1`
	if marker == "" {
		return s
	}
	return `if [ -e '` + marker + `' ]; then exec '` + raw + `' --reply; fi; : > '` + marker + `'; ` + s
}

// TestDeepNestingFromAStdioServerDoesNotCrashTheProxy: a server's unfinished last
// line of 10^7 "[" was validated with gjson.ValidBytes, which recurses per level:
// "fatal error: stack overflow", the proxy gone and the host's session with it. Now
// the line is dropped with a warning, the request the server owed gets the revival's
// error, the revived server answers the next one, and the proxy ends cleanly on EOF.
func TestDeepNestingFromAStdioServerDoesNotCrashTheProxy(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	marker := filepath.Join(t.TempDir(), "started")
	s := startProxy(t, nil, "--server", "deep", "--", "sh", "-c", deepServerScript(raw, marker))
	s.Send(hostInit)
	if a, _ := s.expect("0"); isError(a) {
		t.Fatalf("initialize: %s", a)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"owed","method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	a, _ := s.expect(`"owed"`)
	if !isError(a) || !strings.Contains(a, "server deep exited with status 1") {
		t.Fatalf("the request the server owed got %s, want the revival's error", a)
	}
	if a := s.call(11, "echo", `{"after":"revival"}`); isError(a) {
		t.Fatalf("the request after the revival: %s", a)
	}
	stderr := s.Stderr.String()
	if strings.Contains(stderr, "stack overflow") || strings.Contains(stderr, "goroutine ") {
		t.Fatalf("the proxy crashed: %.2000s", stderr)
	}
	if !strings.Contains(stderr, "discarded the unfinished line") {
		t.Errorf("no warning about the dropped line: %.2000s", stderr)
	}
	s.end()
	if _, err := os.Stat(marker); err != nil {
		t.Fatal(err)
	}
}

// TestDeepNestingFromAStdioServerNoRevive: the same server with --no-revive: the
// proxy exits with the server's status, not Go's 2 of a fatal error.
func TestDeepNestingFromAStdioServerNoRevive(t *testing.T) {
	t.Parallel()
	s := startProxy(t, nil, "--no-revive", "--server", "deep", "--", "sh", "-c", deepServerScript("", ""))
	s.Send(hostInit)
	if a, _ := s.expect("0"); isError(a) {
		t.Fatalf("initialize: %s", a)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"owed","method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if code := s.ExitCode(); code != 1 {
		t.Fatalf("exit status %d, want the server's 1; stderr: %.2000s", code, s.Stderr.String())
	}
	if stderr := s.Stderr.String(); strings.Contains(stderr, "stack overflow") {
		t.Fatalf("the proxy crashed: %.2000s", stderr)
	}
}

// TestDeepNestingFromARemoteServerDoesNotCrashTheProxy: a Streamable HTTP server
// whose answer stream carries, before the answer, an event of 2^20 nested "[" with one
// "]" (1 MiB: validated in full by IsMessage, the check that recursed per level). The
// proxy lives, the event goes to stderr, not to the host, and the host gets its answer.
func TestDeepNestingFromARemoteServerDoesNotCrashTheProxy(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case strings.Contains(string(body), `"initialize"`):
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"deep","version":"1"}}}`)
		case strings.Contains(string(body), `"tools/call"`):
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: "+strings.Repeat("[", 1<<20-1)+"]\n\n")
			_, _ = io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[]}}\n\n")
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(srv.Close)
	s := startProxy(t, nil, "--server", "deep", "--url", srv.URL+"/mcp", "--transport", "http")
	s.Send(hostInit)
	if a, _ := s.expect("0"); isError(a) {
		t.Fatalf("initialize: %s", a)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{}}}`)
	a, before := s.expect("2")
	if isError(a) {
		t.Fatalf("the call got %s", a)
	}
	for _, m := range before {
		if strings.HasPrefix(m, "[[[[") && len(m) < 1<<20 {
			t.Errorf("the host got the unclosed 1 MiB nesting (%d bytes)", len(m))
		}
	}
	if strings.Contains(s.Stderr.String(), "stack overflow") {
		t.Fatal("the proxy crashed")
	}
	s.end()
}
