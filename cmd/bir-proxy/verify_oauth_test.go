package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/oauthtest"
)

// TestVerifyRemoteWithOAuth: a cassette recorded through bir-proxy --url in front of
// an OAuth-protected server is verified at the same URL with the grant login stored:
// no second sign-in, the call answers the same, and no token is in the cassette.
func TestVerifyRemoteWithOAuth(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true})
	w.login()
	cas := filepath.Join(t.TempDir(), "remote.jsonl")
	w.extra = []string{"BIR_OFF=0"}
	s := w.proxy("", "--journal", filepath.Join(t.TempDir(), "j.jsonl"), "--cassette", cas)
	handshake(t, s)
	wantResult(t, s, echo(t, s, 1, "echo"))
	s.end()
	b, err := os.ReadFile(cas)
	if err != nil || !strings.Contains(string(b), `"url":`) || !strings.Contains(string(b), `"tool":"echo"`) {
		t.Fatalf("cassette: %v\n%s", err, b)
	}
	w.mu.Lock()
	w.texts = append(w.texts, string(b)) // checkClean greps it for the fixture's secrets
	w.mu.Unlock()

	code, out := w.cli("", "verify", cas, "--url", w.srv.MCPURL, "--transport", "http",
		"--oauth-port", strconv.Itoa(w.port), "--allow-writes", "--json")
	if code != 0 || !strings.Contains(out, `"tool":"echo","status":"same"`) {
		t.Fatalf("verify: exit %d\n%s\nfixture errors: %v", code, out, w.srv.Errors())
	}
	if c := w.srv.Counts(); c.Authorizes != 1 || c.CodeExchanges != 1 {
		t.Errorf("counts %+v: want the one sign-in of login, the stored grant used after", c)
	}
	if v := w.browserVisits(); v != 1 {
		t.Errorf("%d browser visits, want 1", v)
	}
}

// TestVerifyRemoteUnreachable: nothing listens at the URL: exit 3, saying so.
func TestVerifyRemoteUnreachable(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	url := "http://127.0.0.1:" + strconv.Itoa(freePort(t)) + "/mcp"
	code, _, errs := w.verify(path, "--url", url, "--no-oauth", "--connect-timeout", "1s", "--timeout", "3s")
	if code != 3 || !strings.Contains(errs, "handshake") {
		t.Errorf("exit %d: %s", code, errs)
	}
}
