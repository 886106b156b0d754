package testutil

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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

// Recorded is one request the rawhttp fixture wrote to its --record file.
type Recorded struct {
	Method string            `json:"method"`
	Path   string            `json:"path"`
	Header map[string]string `json:"header"`
	Body   string            `json:"body"`
}

// RecordedRequests reads the rawhttp fixture's --record file.
func RecordedRequests(tb testing.TB, record string) []Recorded {
	tb.Helper()
	data, err := os.ReadFile(record)
	if err != nil {
		tb.Fatal(err)
	}
	var out []Recorded
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r Recorded
		if err := json.Unmarshal(line, &r); err != nil {
			tb.Fatalf("record line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// HandlerTransport runs an http.Handler in process: no network, so it works inside a
// synctest bubble, where time is the subject.
type HandlerTransport struct{ H http.Handler }

func (ht HandlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	ht.H.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}
