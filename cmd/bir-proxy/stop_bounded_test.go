package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestStopIsBoundedWhenTheHostStopsReading: a server floods the host with
// notifications and the host reads none of them, so the proxy's write to the host
// blocks. The host then ends the session (closes stdin, and with sig also sends
// SIGTERM): the proxy must still exit within --stop-grace + the SIGTERM→SIGKILL step
// + 1 s, not wait forever on a write nobody will read.
func TestStopIsBoundedWhenTheHostStopsReading(t *testing.T) {
	eachStop(t, func(t *testing.T, sig bool) {
		raw := testutil.Build(t, "./testdata/rawserver")
		flood := filepath.Join(t.TempDir(), "flood")
		line := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("x", 1000) + `"}}` + "\n"
		if err := os.WriteFile(flood, []byte(strings.Repeat(line, 4096)), 0o600); err != nil {
			t.Fatal(err)
		}
		const grace = 500 * time.Millisecond
		pidfile := filepath.Join(t.TempDir(), "pid")
		s := startProxy(t, nil, "--stop-grace", grace.String(), "--", raw, "--pidfile", pidfile, "--emit", flood, "--reply")
		// The proxy's write to the host sticks once the pipe to the host is full: the
		// server's flood, written at its start, is far more than a pipe holds. The
		// server running means the proxy catches signals (it does before the start).
		testutil.Eventually(t, "the server to start", func() bool {
			_, err := os.Stat(pidfile)
			return err == nil
		})
		// The bound the proxy promises; the proxy before this fix never exited.
		endSession(t, s, sig, grace+3*time.Second+time.Second)
		if !strings.Contains(s.Stderr.String(), "not reading") {
			t.Errorf("stderr does not say the host stopped reading:\n%s", s.Stderr.String())
		}
	})
}

// eachStop runs f, in parallel, for the two ways a host ends a session: closing the
// proxy's stdin (sig false), and that followed by SIGTERM.
func eachStop(t *testing.T, f func(t *testing.T, sig bool)) {
	for _, sig := range []bool{false, true} {
		name := "eof"
		if sig {
			name = "eof+sigterm"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, sig)
		})
	}
}

// endSession ends s the way eachStop said and requires the proxy to exit within
// bound, with a margin for a loaded machine.
func endSession(t *testing.T, s *testHost, sig bool, bound time.Duration) {
	t.Helper()
	began := time.Now()
	s.Stdin.Close()
	if sig {
		if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-s.Done():
	case <-time.After(bound + 5*time.Second):
		t.Fatalf("the proxy was still running %v after the host ended the session (bound %v)", time.Since(began).Round(time.Millisecond), bound)
	}
	t.Logf("exited %v after the host ended the session", time.Since(began).Round(time.Millisecond))
}
