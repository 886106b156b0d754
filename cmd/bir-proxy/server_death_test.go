package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// dyingOnCallScript is a stdio server in sh that answers initialize (id 0), reads
// notifications/initialized, and on the next message (a call) closes its stdin, says
// so on stderr, and exits with status 1 a moment later, without answering: a write in
// that moment fails with EPIPE, as one does when it meets a server just as it dies.
// With marker set only the first start does this; later ones are rawserver --reply.
func dyingOnCallScript(raw, marker string) string {
	s := `read l; printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"dying","version":"1"}}}'; read l; read l
exec 0<&-; echo 'stdin closed, dying' >&2; sleep 0.5; exit 1`
	if marker == "" {
		return s
	}
	return `if [ -e '` + marker + `' ]; then exec '` + raw + `' --reply; fi; : > '` + marker + `'; ` + s
}

// TestCallRacingAServerDeathGetsThePromisedError: a call written just as a stdio
// server died was answered "write |1: broken pipe", not what docs/revive.md promises
// for a request that raced the death: it now waits for the revived server, which
// answers it.
func TestCallRacingAServerDeathGetsThePromisedError(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	marker := filepath.Join(t.TempDir(), "started")
	s := startProxy(t, nil, "--server", "dying", "--", "sh", "-c", dyingOnCallScript(raw, marker))
	s.Send(hostInit)
	if a, _ := s.expect("0"); isError(a) {
		t.Fatalf("initialize: %s", a)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if err := s.Stderr.WaitFor(testutil.Context(t), "stdin closed, dying"); err != nil {
		t.Fatal(err)
	}
	s.Send(`{"jsonrpc":"2.0","id":"raced","method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	// The write met the dead server's closed stdin: the server never got the call,
	// so it is held and goes to the revived server (docs/revive.md), which answers.
	// The call in flight when it died is answered first (the relay settles the loss),
	// the raced one once the revived server has it.
	a, before := s.expect(`"raced"`)
	if isError(a) || !strings.Contains(a, `"result"`) {
		t.Fatalf("the call that raced the death got %s, want the revived server's answer", a)
	}
	first := strings.Join(before, "\n")
	if !strings.Contains(first, `"id":"first"`) || !strings.Contains(first, "server dying exited with status 1") {
		t.Fatalf("the call in flight got %q", before)
	}
	if a := s.call(11, "echo", `{"after":"revival"}`); isError(a) {
		t.Fatalf("the call after the revival: %s", a)
	}
	s.end()
}

// TestCallRacingAServerDeathNoRevive: the same with --no-revive: the call that raced
// the death is told how the server ended, not "broken pipe".
func TestCallRacingAServerDeathNoRevive(t *testing.T) {
	t.Parallel()
	s := startProxy(t, nil, "--no-revive", "--server", "dying", "--", "sh", "-c", dyingOnCallScript("", ""))
	s.Send(hostInit)
	if a, _ := s.expect("0"); isError(a) {
		t.Fatalf("initialize: %s", a)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if err := s.Stderr.WaitFor(testutil.Context(t), "stdin closed, dying"); err != nil {
		t.Fatal(err)
	}
	s.Send(`{"jsonrpc":"2.0","id":"raced","method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	a, _ := s.expect(`"raced"`)
	if strings.Contains(a, "broken pipe") || !strings.Contains(a, "could not deliver the request to the server: server dying exited with status 1") {
		t.Fatalf("the call that raced the death got %s", a)
	}
	if code := s.ExitCode(); code != 1 {
		t.Fatalf("exit status %d, want the server's 1", code)
	}
}
