//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// marked lists the live processes whose environment holds mark.
func marked(mark []byte) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(b, mark) {
			out = append(out, pid)
		}
	}
	return out
}

// The proxy SIGKILLed at every moment of the server's start (before the supervisor's
// parent-death signal is set, between it and the server's exec, after): nothing of
// the server's survives, and the supervisor ends too.
func TestSIGKILLedProxyAtEveryMomentOfTheStart(t *testing.T) {
	for i := 0; i < 12; i++ {
		mark := "ATTACK4_MARK=" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
		pidfile := filepath.Join(t.TempDir(), "pid")
		cmd, _, _, done := rawProxy(t, nil, []string{"BIR_OFF=1", mark}, []string{"--server", "kill9"}, "--echo", "--pidfile", pidfile, "--grandchild", "--detach")
		time.Sleep(time.Duration(i) * 700 * time.Microsecond) // the kill swept across the start: the delay is the subject, the proxy a real process
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		var left []int
		for {
			// The proxy's own environ is gone with it; a supervisor's (the proxy's
			// memory) and the server's tree's hold the mark.
			if left = marked([]byte(mark)); len(left) == 0 || ctx.Err() != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		for _, pid := range left {
			b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("killed after %d×0.7 ms: process %d (%q) outlived the proxy", i, pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
}
