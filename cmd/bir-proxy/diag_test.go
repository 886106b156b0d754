package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// blockedWriter is a stderr nobody reads: every write waits until release closes.
type blockedWriter struct{ release chan struct{} }

func (b blockedWriter) Write(p []byte) (int, error) { <-b.release; return len(p), nil }

// TestDiagLogFileWhileStderrBlocked: with stderr stuck (a host that never reads it),
// Write still returns at once and the lines still reach --log-file.
func TestDiagLogFileWhileStderrBlocked(t *testing.T) {
	stuck := blockedWriter{make(chan struct{})}
	d := newDiagWriter(stuck)
	defer func() {
		close(stuck.release)
		d.Close(10 * time.Second)
	}()
	path := filepath.Join(t.TempDir(), "log")
	d.addLogFile(path)
	if d.file == nil {
		t.Fatal("no log file")
	}
	done := make(chan struct{})
	go func() {
		for i := range 2 * diagQueue {
			fmt.Fprintf(d, "line %d\n", i)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Write waited on a stderr nobody reads")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), "line 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log file got nothing while stderr was stuck: %q", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
