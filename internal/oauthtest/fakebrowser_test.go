package oauthtest

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// runBrowser runs the built fakebrowser on u and returns its exit code and stderr.
func runBrowser(t *testing.T, bin, logPath string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(testutil.Context(t), bin, args...)
	cmd.Env = append(os.Environ(), "FAKEBROWSER_LOG="+logPath)
	cmd.Env = append(cmd.Env, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	}
	// Errorf, not Fatalf: this runs on the goroutines of TestFakeBrowsersAtOnce too.
	t.Errorf("running fakebrowser: %v", err)
	return -1, ""
}

func TestFakeBrowser(t *testing.T) {
	bin := testutil.Build(t, "./internal/oauthtest/fakebrowser")
	s := Start(t, Options{DCR: true})
	h := newHand(t, s)
	h.register(nil)
	logPath := filepath.Join(t.TempDir(), "visits")

	authURL := h.authorizeURL("", nil)
	code, stderr := runBrowser(t, bin, logPath, []string{"FAKEBROWSER_DELAY=10ms"}, authURL)
	if code != 0 {
		t.Fatalf("fakebrowser exit %d: %s", code, stderr)
	}
	got := h.cb.last(t)
	if got.Get("state") != h.state || got.Get("code") == "" {
		t.Fatalf("callback got %v", got)
	}
	if status, body := h.exchange(got.Get("code")); status != http.StatusOK {
		t.Fatalf("exchanging the code the browser delivered: %d %v", status, body)
	}

	// A callback that fails makes the browser fail, and says why without the query.
	bad := startCallback(t, http.StatusInternalServerError)
	code, stderr = runBrowser(t, bin, logPath, nil, bad.URL+"?code=secretcode&state=s")
	if code != 1 || bad.calls() != 1 {
		t.Fatalf("failing callback: exit %d, calls %d: %s", code, bad.calls(), stderr)
	}
	if strings.Contains(stderr, "secretcode") || !strings.Contains(stderr, "500") {
		t.Errorf("stderr %q: want the status, never the query", stderr)
	}

	// Nothing listening: exit 1, promptly.
	code, _ = runBrowser(t, bin, logPath, nil, "http://127.0.0.1:1/callback?code=x")
	if code != 1 {
		t.Errorf("unreachable callback: exit %d", code)
	}
	if code, _ := runBrowser(t, bin, logPath, nil); code != 2 {
		t.Errorf("no URL: exit %d", code)
	}

	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	au, _ := url.Parse(s.AuthorizationEndpoint)
	bu, _ := url.Parse(bad.URL)
	want := []string{au.Host + au.Path, bu.Host + bu.Path, "127.0.0.1:1/callback"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("visit log\n%s\nwant\n%s", data, strings.Join(want, "\n"))
	}
	if strings.ContainsAny(string(data), "?=") {
		t.Errorf("visit log carries a query: %s", data)
	}
}

// TestFakeBrowsersAtOnce: five browsers logging to one file, each line whole.
func TestFakeBrowsersAtOnce(t *testing.T) {
	bin := testutil.Build(t, "./internal/oauthtest/fakebrowser")
	cb := startCallback(t, http.StatusOK)
	logPath := filepath.Join(t.TempDir(), "visits")
	var wg sync.WaitGroup
	codes := make([]int, 5)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = runBrowser(t, bin, logPath, nil, cb.URL)
		}()
	}
	wg.Wait()
	data, _ := os.ReadFile(logPath)
	u, _ := url.Parse(cb.URL)
	if want := strings.Repeat(u.Host+u.Path+"\n", 5); string(data) != want || cb.calls() != 5 {
		t.Errorf("log %q, want %q; calls %d; exits %v", data, want, cb.calls(), codes)
	}
}
