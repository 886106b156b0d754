package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// runLogCmd runs bir-proxy log with args, killed after limit (a hang is the failure
// these tests look for), and returns its exit status, stdout and stderr.
func runLogCmd(t *testing.T, bin string, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"log"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "BIR_RECORDER_URL=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("log %v did not end within %v (a hang); stderr: %q", args, limit, errb.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

const oneReport = `{"proxyId":"0123456789abcdef","server":"s","seq":1,"tool":"t","args":{},"receivedAt":"2026-12-01T00:00:00Z","durationMs":1,"outcome":"ok"}` + "\n"

// TestLogTailOfALongLine: `log -n 5` reads the journal backwards; a journal whose
// last 100 MB are one line (not ended, or ended) was gathered chunk by chunk, each
// copied again with the next: minutes of copying. Now a line over journal.MaxLine is
// skipped as it is met, and the report before it is still found.
func TestLogTailOfALongLine(t *testing.T) {
	t.Parallel()
	bin := testutil.Build(t, "./cmd/bir-proxy")
	dir := t.TempDir()
	long := bytes.Repeat([]byte("a"), 100<<20)
	for _, tc := range []struct{ name, tail string }{{"unended", ""}, {"ended", "\n"}} {
		path := filepath.Join(dir, tc.name+".jsonl")
		if err := os.WriteFile(path, append(append([]byte(oneReport), long...), tc.tail...), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runLogCmd(t, bin, 60*time.Second, "--journal", path, "-n", "5", "--json")
		if code != 0 || out != oneReport {
			t.Errorf("%s: log -n 5 = %d, %q, stderr %q; want the one report", tc.name, code, out, errs)
		}
	}
}

// TestLogRefusesAJournalNotAFile: a journal path that is a FIFO blocked log in
// open(2) for a writer that never came (SIGTERM did not end it), and one that is a
// link to /dev/zero was read for ever. Both are refused at once.
func TestLogRefusesAJournalNotAFile(t *testing.T) {
	t.Parallel()
	bin := testutil.Build(t, "./cmd/bir-proxy")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal("mkfifo:", err) // a temporary folder on a Unix takes a FIFO: a skip here would assert nothing
	}
	zero := filepath.Join(dir, "zero.jsonl")
	if err := os.Symlink(os.DevNull, zero); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		os.Remove(zero)
		if err := os.Symlink("/dev/zero", zero); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{fifo, zero} {
		for _, args := range [][]string{{}, {"-n", "3"}, {"--stats"}} {
			code, _, errs := runLogCmd(t, bin, 20*time.Second, append([]string{"--journal", path}, args...)...)
			if code != 1 || !strings.Contains(errs, "not a regular file") {
				t.Errorf("log --journal %s %v = %d, stderr %q; want 1 and \"not a regular file\"", filepath.Base(path), args, code, errs)
			}
		}
	}
}
