package telemetry

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

func TestStateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "otel")
	if sts, err := ReadStates(dir); err != nil || sts != nil {
		t.Fatal("a missing directory is no state", sts, err)
	}
	now := time.Now().Truncate(time.Second)
	if err := WriteState(filepath.Join(dir, "b"+StateSuffix), State{Server: "b", Written: now, Dropped: 3, LastError: strings.Repeat("x", 5000)}); err != nil {
		t.Fatal(err)
	}
	if err := WriteState(filepath.Join(dir, "a"+StateSuffix), State{Server: "a", Written: now, Exported: 7}); err != nil {
		t.Fatal(err)
	}
	// Not states: another name, a file too big, one that is not JSON, one with no time.
	for name, body := range map[string]string{
		"c.json":          `{"server":"c","written":"2026-01-01T00:00:00Z"}`,
		"d" + StateSuffix: `{"server":"d","written":"2026-01-01T00:00:00Z","lastError":"` + strings.Repeat("y", maxStateFile) + `"}`,
		"e" + StateSuffix: `not json`,
		"f" + StateSuffix: `{"server":"f"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sts, err := ReadStates(dir)
	if err != nil || len(sts) != 2 || sts[0].Server != "a" || sts[0].Exported != 7 || sts[1].Server != "b" || sts[1].Dropped != 3 {
		t.Fatalf("%+v %v", sts, err)
	}
	if len(sts[1].LastError) != maxStateError || !sts[0].Written.Equal(now) {
		t.Fatalf("%+v", sts)
	}
	fi, err := os.Stat(filepath.Join(dir, "a"+StateSuffix))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatal(fi, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".otel-*"))
	if len(left) != 0 {
		t.Fatal("temporary files left:", left)
	}
}

// The exporter writes its state once something is dropped, while it runs, and at
// Close; the writer's goroutine ends with Close (TestMain checks for leaks).
func TestExporterState(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "s"+StateSuffix)
	x := New(Options{Config: Config{TracesURL: srv.URL + "/v1/traces", Protocol: ProtoProtobuf, Timeout: 5 * time.Second},
		Server: "s", BatchSize: 2, BatchDelay: time.Hour, StatePath: path})
	x.Submit(span(1))
	x.Submit(span(2))
	testutil.Eventually(t, "the state file of a running exporter", func() bool {
		st, ok := readState(path)
		return ok && st.Running && st.Dropped == 2 && strings.Contains(st.LastError, "HTTP 403")
	})
	x.Submit(span(3))
	closeWithin(t, x, time.Second)
	st, ok := readState(path)
	if !ok || st.Running || st.Dropped != 3 || st.Server != "s" || st.PID != os.Getpid() {
		t.Fatalf("at Close: %+v %v", st, ok)
	}
}
