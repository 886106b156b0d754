//go:build unix

package upstream

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestProcessSaysHowItEnded: the words and the stderr lines a revival's error answers
// and log line are made of.
func TestProcessSaysHowItEnded(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	var stderr bytes.Buffer
	p, err := Start(Command{Path: raw, Args: []string{"--exit-now", "--exit-code", "3", "--stderr", "one\ntwo\n\nfatal: boom\n"}, Name: "raw", Stderr: &syncWriter{w: &stderr}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.ExitReason(); got != "exited with status 3" {
		t.Fatalf("ExitReason %q", got)
	}
	if got := strings.Join(p.StderrTail(2), "|"); got != "two|fatal: boom" {
		t.Fatalf("StderrTail %q", got)
	}

	k, err := Start(Command{Path: raw, Args: []string{"--echo"}, Name: "raw", Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := syscall.Kill(k.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := k.ExitReason(); got != "was killed by signal 9 (killed)" {
		t.Fatalf("ExitReason %q", got)
	}
	if got := k.StderrTail(3); len(got) != 0 {
		t.Fatalf("StderrTail of a quiet server: %q", got)
	}
	if stderr.Len() == 0 || !strings.Contains(stderr.String(), "one\ntwo\n\nfatal: boom\n") {
		t.Fatalf("stderr not passed on unchanged: %q", stderr.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestTailBuffer(t *testing.T) {
	var tb tailBuffer
	for i := 0; i < 1000; i++ {
		tb.write([]byte("line " + strings.Repeat("x", i%7) + "\n"))
	}
	tb.write([]byte("last, unfinished"))
	if got := tb.lines(2); len(got) != 2 || got[1] != "last, unfinished" || !strings.HasPrefix(got[0], "line ") {
		t.Fatalf("lines %q", got)
	}
	if len(tb.buf) > tailSize {
		t.Fatalf("tail holds %d bytes", len(tb.buf))
	}
	tb.write(bytes.Repeat([]byte("y"), 3*tailSize))
	if len(tb.buf) != tailSize {
		t.Fatalf("tail holds %d bytes", len(tb.buf))
	}
}
