package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

func TestCleanLine(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[1;31merror:\x1b[0m two\r": "error: two",
		"\tthree\tfour  ":               "three four",
		"bell\x07 and \xff":             "bell and ?",
	} {
		if got := cleanLine([]byte(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

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
