package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// mockListen starts `bir-proxy mock --listen 127.0.0.1:0` on a cassette of header
// (and lines after it), and returns it and its URL.
func mockListen(t *testing.T, bp string, lines ...string) (*testutil.Proc, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.jsonl")
	os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	p := testutil.Start(t, exec.Command(bp, "mock", "--listen", "127.0.0.1:0", path))
	var addr string
	if err := p.Stderr.WaitUntil(testutil.Context(t), func(s string) bool {
		_, rest, ok := strings.Cut(s, "listening on ")
		addr, _, _ = strings.Cut(rest, "\n")
		return ok && strings.HasSuffix(addr, "/mcp")
	}); err != nil {
		t.Fatalf("mock --listen: %v: %s", err, p.Stderr.String())
	}
	t.Cleanup(func() {
		p.Cmd.Process.Signal(syscall.SIGTERM)
		p.ExitCode()
	})
	return p, addr
}

// TestMockHTTPBatchMemoryBound: a batch's answers are written as they are made, not
// held until the last: 200 tools/list in a 10 KB body, each answered with the
// recorded 1 MiB list, held the answers and their join (over 400 MiB) in the mock.
func TestMockHTTPBatchMemoryBound(t *testing.T) {
	_, _ = isolate(t)
	bp := testutil.Build(t, "./cmd/bir-proxy")
	tools := `[{"name":"big","description":"` + strings.Repeat("d", 1<<20) + `","inputSchema":{"type":"object"}}]`
	p, addr := mockListen(t, bp, `{"bir-cassette":1,"server":"s","recordedAt":"2026-01-01T00:00:00Z","era":"unknown","tools":`+tools+`}`)
	n := 200
	reqs := make([]string, n)
	for i := range reqs {
		reqs[i] = `{"jsonrpc":"2.0","id":` + strings.Repeat("1", 1+i%9) + `,"method":"tools/list"}`
	}
	req, _ := http.NewRequestWithContext(testutil.Context(t), http.MethodPost, addr, strings.NewReader("["+strings.Join(reqs, ",")+"]"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if err != nil || resp.StatusCode != 200 || got < int64(n)<<20 {
		t.Fatalf("status %d, %d bytes, %v", resp.StatusCode, got, err)
	}
	peak := procStatusKB(t, p.Cmd.Process.Pid, "VmHWM") << 10
	if limit := int64(100 << 20); peak > limit {
		t.Errorf("peak RSS %d MiB answering a batch of %d MiB, bound %d MiB", peak>>20, got>>20, limit>>20)
	}
	t.Logf("peak RSS %d MiB for %d MiB of answers", peak>>20, got>>20)
}
