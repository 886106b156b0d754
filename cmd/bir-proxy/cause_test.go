package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestEndBeforeAnsweringAnswersEachRequestOnce races the host's requests against the
// death of a server that answers nothing (--no-revive): every request gets exactly one
// answer, an error naming the cause, whether it was written before the death, during
// it or after, and the session then ends with the server's status.
func TestEndBeforeAnsweringAnswersEachRequestOnce(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	const n = 20
	for round := 1; round <= 8; round++ {
		s := startProxy(t, nil, "--server", "dies", "--no-revive", raw, "--exit-after", strconv.Itoa(round), "--exit-code", "4", "--stderr", "bye\n")
		lines := make([]string, n)
		for i := range lines {
			lines[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
		}
		s.Send(lines...)
		answered := map[string]int{}
		for range n {
			msg, err := s.out.Read()
			if err != nil {
				t.Fatalf("round %d: after %d answers: %v", round, len(answered), err)
			}
			id, _ := jsonID(msg)
			answered[id]++
			if !strings.Contains(string(msg), "exited with status 4") {
				t.Fatalf("round %d: answer without the cause: %s", round, msg)
			}
		}
		if len(answered) != n {
			t.Fatalf("round %d: answers %v, want one for each of %d requests", round, answered, n)
		}
		if code := s.ExitCode(); code != 4 {
			t.Fatalf("round %d: exit %d, want the server's 4", round, code)
		}
		if extra, err := s.out.Read(); err == nil {
			t.Fatalf("round %d: a second answer: %s", round, extra)
		}
	}
}

// TestCrashSaysTheErrorLine: a Node server that cannot find its module ends its
// stderr with "requireStack: []", "}", "Node.js v20.20.2"; the host's error names
// the line that says what went wrong, with revival and without, in one format.
func TestCrashSaysTheErrorLine(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	node := "node:internal/modules/cjs/loader:1228\n  throw err;\n  ^\n\nError: Cannot find module '/srv/index.js'\n" +
		"    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)\n    at node:internal/main/run_main_module:28:49 {\n" +
		"  code: 'MODULE_NOT_FOUND',\n  requireStack: []\n}\n\nNode.js v20.20.2\n"
	for _, revive := range []bool{false, true} {
		args := []string{"--server", "node"}
		if !revive {
			args = append(args, "--no-revive")
		}
		s := startProxy(t, nil, append(args, raw, "--exit-now", "--exit-code", "1", "--stderr", node)...)
		s.Send(initializeReq)
		got := hostError(t, s, "1", "exited with status 1", "its stderr: ", "Error: Cannot find module '/srv/index.js'", "Node.js v20.20.2")
		if strings.Contains(got, "last stderr lines") {
			t.Errorf("revive %v: an old wording: %s", revive, got)
		}
		s.Stdin.Close()
		s.ExitCode()
	}
}
