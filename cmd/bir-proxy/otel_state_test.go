package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/telemetry"
)

// TestOTelDropsInStatus: against a collector that refuses every export (400), the
// built proxy leaves its counts in its state file while it runs (once something was
// dropped) and at exit, and the built `bir-proxy status` shows them, with the
// collector's answer and how old they are.
func TestOTelDropsInStatus(t *testing.T) {
	posts := make(chan struct{}, 64)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 16<<20)) //nolint:errcheck // a refusing collector
		http.Error(w, "refused", http.StatusBadRequest)
		select {
		case posts <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(collector.Close)
	state := t.TempDir()
	raw := testutil.Build(t, "./testdata/rawserver")
	const server = "refused one"
	s := startProxy(t, []string{"XDG_STATE_HOME=" + state, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + collector.URL + "/v1/traces"},
		"--server", server, "--", raw, "--reply")
	const calls = 600 // a full batch (512) goes at once; the rest at exit
	for i := 1; i <= calls; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, i))
		if ans := s.recv(); gjson.Get(ans, "id").Int() != int64(i) {
			t.Fatalf("call %d: %s", i, ans)
		}
	}
	testutil.Recv(t, posts, "the refused export of the first batch")
	path := filepath.Join(state, "bir-proxy", "otel", "refused%20one"+telemetry.StateSuffix)
	var st telemetry.State
	testutil.Eventually(t, "the running proxy's state file with the drops", func() bool {
		sts, err := telemetry.ReadStates(filepath.Dir(path))
		if err != nil || len(sts) != 1 {
			return false
		}
		st = sts[0]
		return st.Dropped >= 512
	})
	if st.Server != server || !st.Running || st.Exported != 0 || !strings.Contains(st.LastError, "HTTP 400") {
		t.Fatalf("while running: %+v", st)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the state file %s: %v %v, want mode 0600", path, fi, err)
	}
	out := statusOutput(t, state)
	if !strings.Contains(out, "OpenTelemetry: refused one: 0 spans exported, 512 dropped, 0 rejected by the collector; said while running (pid ") ||
		!strings.Contains(out, "HTTP 400") {
		t.Fatalf("status while the proxy runs:\n%s", out)
	}

	s.end()
	out = statusOutput(t, state)
	want := fmt.Sprintf("OpenTelemetry: refused one: 0 spans exported, %d dropped, 0 rejected by the collector; said at its exit, ", calls)
	if !strings.Contains(out, want) || !strings.Contains(out, "the collector refused them: HTTP 400") {
		t.Fatalf("status after the proxy's exit:\n%s\nwant %q", out, want)
	}
	t.Logf("status:\n%s", out)
}

// A healthy exporter writes no state while it runs (no timer, no file), only its
// counts at exit.
func TestOTelStateOnlyAtExitWhenHealthy(t *testing.T) {
	got := make(chan struct{}, 64)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 16<<20)) //nolint:errcheck // a collector taking everything
		select {
		case got <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(collector.Close)
	state := t.TempDir()
	raw := testutil.Build(t, "./testdata/rawserver")
	s := startProxy(t, []string{"XDG_STATE_HOME=" + state, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + collector.URL + "/v1/traces"},
		"--server", "fine", "--", raw, "--reply")
	for i := 1; i <= 520; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, i))
		s.recv()
	}
	testutil.Recv(t, got, "the export of the first batch")
	dir := filepath.Join(state, "bir-proxy", "otel")
	if sts, _ := telemetry.ReadStates(dir); len(sts) != 0 {
		t.Fatalf("a healthy exporter wrote its state while running: %+v", sts)
	}
	s.end()
	sts, err := telemetry.ReadStates(dir)
	if err != nil || len(sts) != 1 || sts[0].Running || sts[0].Exported != 520 || sts[0].Dropped != 0 {
		t.Fatalf("at exit: %+v %v", sts, err)
	}
}

// statusOutput runs the built `bir-proxy status --all` with state as XDG_STATE_HOME,
// in a directory with no configuration (--all: no file names the server, and status
// shows only the telemetry of the servers of the files it lists).
func statusOutput(t *testing.T, state string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(testutil.Context(t), testutil.Build(t, "./cmd/bir-proxy"), "status", "--all")
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+home, "USERPROFILE="+home, "XDG_STATE_HOME="+state, "CLAUDE_CONFIG_DIR=", "BIR_OFF=1")
	out, _ := cmd.CombinedOutput() // no configuration here: status says so, and exits 1
	return string(out)
}
