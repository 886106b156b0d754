package testutil

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// HTTPFixture starts a fixture program that serves HTTP on 127.0.0.1 and prints its
// URL as its first stdout line (testdata/rawhttp, testdata/mcpserver --http/--sse),
// and returns that URL. The fixture stops when its stdin closes, at the test's end;
// one that does not within Guard is killed.
func HTTPFixture(tb testing.TB, bin string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(Guard):
			cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	select {
	case u := <-lines:
		if u == "" {
			tb.Fatalf("%s did not say its URL", bin)
		}
		return u
	case <-time.After(Guard):
		tb.Fatalf("%s did not say its URL within %s", bin, Guard)
		return ""
	}
}
