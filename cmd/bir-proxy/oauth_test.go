package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/oauthtest"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/oauth"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// oauthWorld is one user's machine for the OAuth tests: a config directory (the
// token store), a fake browser that logs its visits, a callback port of its own.
type oauthWorld struct {
	t       *testing.T
	srv     *oauthtest.Server
	config  string
	visits  string
	port    int
	browser string
	outputs []*testutil.SyncBuffer // every stderr captured, grepped for secrets
	mu      sync.Mutex
	texts   []string
	extra   []string // more environment for every process
}

func newOAuthWorld(t *testing.T, opt oauthtest.Options) *oauthWorld {
	t.Helper()
	w := &oauthWorld{t: t, srv: oauthtest.Start(t, opt), config: t.TempDir(), port: freePort(t),
		browser: testutil.Build(t, "./internal/oauthtest/fakebrowser")}
	w.visits = filepath.Join(t.TempDir(), "visits.log")
	t.Cleanup(w.checkClean)
	return w
}

// freePort is a loopback port nothing listens on now (each test has its own
// callback port: parallel tests must not share sign-ins).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (w *oauthWorld) env(browser string) []string {
	if browser == "" {
		browser = w.browser
	}
	return append([]string{"XDG_CONFIG_HOME=" + w.config, "BROWSER=" + browser, "FAKEBROWSER_LOG=" + w.visits, "FAKEBROWSER_TIMEOUT=20s"}, w.extra...)
}

// proxy starts bir-proxy --url against the fixture.
func (w *oauthWorld) proxy(browser string, extra ...string) *testHost {
	w.t.Helper()
	args := append([]string{"--server", "fx", "--url", w.srv.MCPURL, "--transport", "http", "--oauth-port", strconv.Itoa(w.port)}, extra...)
	s := startProxy(w.t, w.env(browser), args...)
	w.mu.Lock()
	w.outputs = append(w.outputs, s.Stderr)
	w.mu.Unlock()
	return s
}

// cli runs a bir-proxy subcommand and returns its exit status and output.
func (w *oauthWorld) cli(browser string, args ...string) (int, string) {
	w.t.Helper()
	bin := testutil.Build(w.t, "./cmd/bir-proxy")
	ctx, cancel := context.WithTimeout(context.Background(), remoteWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), w.env(browser)...)
	out, err := cmd.CombinedOutput()
	w.mu.Lock()
	w.texts = append(w.texts, string(out))
	w.mu.Unlock()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("bir-proxy %v: %v", args, err)
	}
	return code, string(out)
}

func (w *oauthWorld) login(extra ...string) {
	w.t.Helper()
	args := append([]string{"login", "--url", w.srv.MCPURL, "--oauth-port", strconv.Itoa(w.port)}, extra...)
	if code, out := w.cli("", args...); code != 0 {
		w.t.Fatalf("login: exit %d: %s\nfixture errors: %v", code, out, w.srv.Errors())
	}
}

func (w *oauthWorld) browserVisits() int {
	b, err := os.ReadFile(w.visits)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// checkClean: the fixture saw no protocol violation, every resource was the MCP
// URL, and no token, code or secret it issued is in any output or journal.
func (w *oauthWorld) checkClean() {
	t := w.t
	if errs := w.srv.Errors(); len(errs) > 0 {
		t.Errorf("the fixture saw protocol violations:\n  %s", strings.Join(errs, "\n  "))
	}
	want, _ := oauth.CanonicalURI(w.srv.MCPURL)
	for _, r := range w.srv.LastResource() {
		if r != want {
			t.Errorf("resource %q, want %q", r, want)
		}
	}
	w.mu.Lock()
	texts := append([]string(nil), w.texts...)
	for _, b := range w.outputs {
		texts = append(texts, b.String())
	}
	w.mu.Unlock()
	for _, secret := range w.srv.Secrets() {
		for i, text := range texts {
			if strings.Contains(text, secret) {
				t.Errorf("a secret the fixture issued (%.6s…) is in output %d:\n%s", secret, i, text)
			}
		}
	}
}

const oauthInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

// handshake initializes s and checks the answer is the fixture's.
func handshake(t *testing.T, s *testHost) {
	t.Helper()
	s.Send(oauthInit)
	got := s.recv()
	if !gjson.Get(got, "result.serverInfo").Exists() {
		t.Fatalf("initialize: %s\nstderr: %s", got, s.Stderr.String())
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func echo(t *testing.T, s *testHost, id int, tool string) string {
	t.Helper()
	s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":"hi %d"}}}`, id, tool, id))
	return s.recv()
}

func wantResult(t *testing.T, s *testHost, got string) {
	t.Helper()
	if !gjson.Get(got, "result").Exists() || gjson.Get(got, "result.isError").Bool() {
		t.Fatalf("want a result, got %s\nstderr: %s", got, s.Stderr.String())
	}
}

// TestOAuthLoginThenProxy: `bir-proxy login` signs in once (discovery from the
// 401's header, DCR, PKCE, resource), and a proxy started afterwards uses the stored
// token with no further visit; auth status lists the grant without its secrets;
// logout deletes it.
func TestOAuthLoginThenProxy(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true, ChallengeScope: "mcp:read"})
	w.login()
	// Recording on, to a journal: the journal is grepped for secrets too.
	journal := filepath.Join(t.TempDir(), "journal.jsonl")
	w.extra = []string{"BIR_OFF=0"}
	s := w.proxy("", "--journal", journal)
	handshake(t, s)
	wantResult(t, s, echo(t, s, 1, "echo"))
	s.end()
	b, err := os.ReadFile(journal)
	if err != nil || !strings.Contains(string(b), `"echo"`) {
		t.Fatalf("the journal: %v\n%s", err, b)
	}
	w.mu.Lock()
	w.texts = append(w.texts, string(b))
	w.mu.Unlock()
	c := w.srv.Counts()
	if c.Registrations != 1 || c.Authorizes != 1 || c.CodeExchanges != 1 || c.Refreshes != 0 {
		t.Errorf("counts %+v: want one registration, one visit, one code exchange, no refresh", c)
	}
	if v := w.browserVisits(); v != 1 {
		t.Errorf("%d browser visits, want 1", v)
	}
	code, out := w.cli("", "auth", "status")
	if code != 0 || !strings.Contains(out, w.srv.MCPURL) || !strings.Contains(out, "token valid for") || !strings.Contains(out, "dynamic-registration") {
		t.Errorf("auth status: exit %d:\n%s", code, out)
	}
	if code, out := w.cli("", "logout", "--url", w.srv.MCPURL); code != 0 || !strings.Contains(out, "signed out") {
		t.Errorf("logout: exit %d: %s", code, out)
	}
	if _, out := w.cli("", "auth", "status"); strings.Contains(out, w.srv.MCPURL) {
		t.Errorf("after logout, auth status still lists the server:\n%s", out)
	}
	// The store's files are the user's alone.
	st, err := os.Stat(filepath.Join(w.config, "bir-proxy", "oauth"))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("token directory: %v, mode %v; want 0700", err, st.Mode().Perm())
	}
}

// TestOAuthProxySignsInItself: a proxy with no token meets the 401, finds the
// metadata at the well-known path (no header), signs in through the browser, and
// answers the host's initialize once it has the token.
func TestOAuthProxySignsInItself(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opt  oauthtest.Options
	}{
		{"well-known path form", oauthtest.Options{MetadataAtPath: true, DCR: true}},
		{"well-known root form", oauthtest.Options{DCR: true}},
		{"issuer with a path", oauthtest.Options{MetadataInHeader: true, DCR: true, ASPathIssuer: true}},
		{"scope from the challenge", oauthtest.Options{MetadataInHeader: true, DCR: true, ChallengeScope: "mcp:write"}},
		{"OIDC metadata with the path inserted", oauthtest.Options{MetadataInHeader: true, DCR: true, ASPathIssuer: true, ASMetadata: oauthtest.WellKnownOIDCInsert}},
		{"RFC 8414 metadata with the path inserted", oauthtest.Options{DCR: true, ASPathIssuer: true, ASMetadata: oauthtest.WellKnownOAuth}},
		{"a deeper path, path form", oauthtest.Options{MetadataAtPath: true, DCR: true, MCPPath: "/v1/tenant/mcp"}},
		{"no iss in the answer", oauthtest.Options{MetadataInHeader: true, DCR: true, NoIss: true}},
		{"stateless server", oauthtest.Options{MetadataInHeader: true, DCR: true, Stateless: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newOAuthWorld(t, c.opt)
			s := w.proxy("")
			handshake(t, s)
			wantResult(t, s, echo(t, s, 1, "echo"))
			s.end()
			if n := w.srv.Counts(); n.Authorizes != 1 || n.CodeExchanges != 1 {
				t.Errorf("counts %+v", n)
			}
			if !strings.Contains(s.Stderr.String(), "needs an OAuth sign-in") {
				t.Errorf("the proxy did not say it was signing in: %s", s.Stderr.String())
			}
		})
	}
}

// TestOAuthClientIdentities: a pre-registered client (public, and with a secret),
// and a Client ID Metadata Document, each sign in without a registration.
func TestOAuthClientIdentities(t *testing.T) {
	t.Parallel()
	t.Run("pre-registered public", func(t *testing.T) {
		t.Parallel()
		w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, PreRegistered: map[string]string{"my-app": ""}})
		w.login("--client-id", "my-app")
		s := w.proxy("", "--client-id", "my-app")
		handshake(t, s)
		wantResult(t, s, echo(t, s, 1, "echo"))
		s.end()
		if n := w.srv.Counts(); n.Registrations != 0 || n.CodeExchanges != 1 {
			t.Errorf("counts %+v", n)
		}
	})
	t.Run("pre-registered with a secret", func(t *testing.T) {
		t.Parallel()
		w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, PreRegistered: map[string]string{"my-app": "s3cret-value-1"}})
		w.extra = []string{"APP_SECRET=s3cret-value-1"}
		w.login("--client-id", "my-app", "--client-secret", "${APP_SECRET}")
		s := w.proxy("", "--client-id", "my-app", "--client-secret", "${APP_SECRET}")
		handshake(t, s)
		wantResult(t, s, echo(t, s, 1, "echo"))
		s.end()
		if n := w.srv.Counts(); n.Registrations != 0 || n.CodeExchanges != 1 {
			t.Errorf("counts %+v", n)
		}
		// The secret is in the store (it is needed to refresh) and nowhere else.
		_, out := w.cli("", "auth", "status")
		if strings.Contains(out, "s3cret-value-1") || strings.Contains(s.Stderr.String(), "s3cret-value-1") {
			t.Errorf("the client secret is shown:\n%s\n%s", out, s.Stderr.String())
		}
	})
	t.Run("client ID metadata document", func(t *testing.T) {
		t.Parallel()
		w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, CIMD: true, DCR: true})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		docURL := "http://" + ln.Addr().String() + "/client.json" // known before the server serves
		doc := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(rw, `{"client_id":%q,"client_name":"bir-proxy test","redirect_uris":["http://127.0.0.1:%d/callback"],"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none"}`, docURL, w.port)
		}))
		doc.Listener.Close()
		doc.Listener = ln
		doc.Start()
		t.Cleanup(doc.Close)
		w.login("--client-metadata-url", docURL)
		s := w.proxy("", "--client-metadata-url", docURL)
		handshake(t, s)
		wantResult(t, s, echo(t, s, 1, "echo"))
		s.end()
		if n := w.srv.Counts(); n.Registrations != 0 || n.CIMDFetches == 0 || n.CodeExchanges != 1 {
			t.Errorf("counts %+v: want no registration, the document fetched, one exchange", n)
		}
	})
}

// TestOAuthFiveProxiesOneSignIn: five proxies of one server started together with no
// token: one browser visit, one registration, one code exchange, and all five work.
func TestOAuthFiveProxiesOneSignIn(t *testing.T) {
	t.Parallel()
	// The token endpoint is slow so that the others are surely waiting meanwhile.
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true, TokenDelay: 300 * time.Millisecond})
	const n = 5
	ss := make([]*testHost, n)
	for i := range ss {
		ss[i] = w.proxy("")
	}
	for _, s := range ss {
		s.Send(oauthInit)
	}
	for _, s := range ss {
		if got := s.recv(); !gjson.Get(got, "result.serverInfo").Exists() {
			t.Fatalf("initialize: %s\nstderr: %s", got, s.Stderr.String())
		}
		s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	for i, s := range ss {
		wantResult(t, s, echo(t, s, i+1, "echo"))
	}
	for _, s := range ss {
		s.end()
	}
	c := w.srv.Counts()
	if c.Registrations != 1 || c.Authorizes != 1 || c.CodeExchanges != 1 {
		t.Errorf("counts %+v: want one registration, one visit, one code exchange", c)
	}
	if v := w.browserVisits(); v != 1 {
		t.Errorf("%d browser visits, want 1", v)
	}
}

// TestOAuthFiveProxiesOneRefresh: five proxies hold a token that the server then
// expires; each call meets a 401, and the grant is refreshed exactly once (the
// refresh token rotates, so a second refresh with the old one would be a violation).
func TestOAuthFiveProxiesOneRefresh(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true, RotateRefresh: true, ReuseRevokesGrant: true, TokenDelay: 100 * time.Millisecond})
	w.login()
	const n = 5
	ss := make([]*testHost, n)
	for i := range ss {
		ss[i] = w.proxy("false") // no browser: a sign-in here would be a failure
		handshake(t, ss[i])
	}
	w.srv.ExpireAccessTokens()
	for i, s := range ss {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, i+1))
	}
	for _, s := range ss {
		wantResult(t, s, s.recv())
	}
	// And again: the new token works for every one of them.
	for i, s := range ss {
		wantResult(t, s, echo(t, s, 10+i, "echo"))
	}
	for _, s := range ss {
		s.end()
	}
	if c := w.srv.Counts(); c.Refreshes != 1 || c.Authorizes != 1 {
		t.Errorf("counts %+v: want exactly one refresh and no new sign-in", c)
	}
}

// TestOAuthExpiryRefreshesBeforeUse: a token past its lifetime is refreshed before
// the request goes (no 401 first), and a rotated refresh token is kept for the next.
func TestOAuthExpiryRefreshesBeforeUse(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true, RotateRefresh: true, AccessTTL: 2 * time.Second})
	w.login()
	s := w.proxy("false")
	handshake(t, s)
	for round := 1; round <= 2; round++ {
		// The token's lifetime has to pass: the one wait on the clock in these tests.
		time.Sleep(2*time.Second + 100*time.Millisecond)
		before := w.srv.Counts()
		wantResult(t, s, echo(t, s, round, "echo"))
		after := w.srv.Counts()
		if after.Refreshes != before.Refreshes+1 || after.MCPUnauthorized != before.MCPUnauthorized {
			t.Errorf("round %d: counts before %+v after %+v: want one refresh and no 401", round, before, after)
		}
	}
	s.end()
}

// TestOAuthRevokedAsksForLogin: a revoked grant cannot be refreshed; with no browser
// the proxy answers the call, within --oauth-wait, with an error naming the server and
// `bir-proxy login --url`, and prints the sign-in URL; a login from a terminal then
// finishes that sign-in, and the next call works.
func TestOAuthRevokedAsksForLogin(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true, RotateRefresh: true})
	w.login()
	s := w.proxy("false", "--oauth-wait", "1s")
	handshake(t, s)
	w.srv.Revoke()
	got := echo(t, s, 1, "echo")
	msg := gjson.Get(got, "error.message").String()
	if gjson.Get(got, "id").Int() != 1 || !strings.Contains(msg, "server fx") || !strings.Contains(msg, "bir-proxy login --url "+w.srv.MCPURL) {
		t.Fatalf("want an error naming the server and the login command, got %s", got)
	}
	if err := s.Stderr.WaitFor(testutil.Context(t), w.srv.AuthorizationEndpoint+"?"); err != nil {
		t.Fatalf("the sign-in URL is not on stderr: %v\n%s", err, s.Stderr.String())
	}
	// The proxy still holds the callback port for its sign-in: login opens that one.
	w.login()
	wantResult(t, s, echo(t, s, 2, "echo"))
	s.end()
	if c := w.srv.Counts(); c.Registrations != 1 {
		t.Errorf("counts %+v: the client registration should have been kept", c)
	}
}

// TestOAuthStepUp: a tool that needs a scope the token lacks gets a 403
// insufficient_scope; the proxy signs in again for the union of scopes and the call
// is sent again and answered.
func TestOAuthStepUp(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true, ChallengeScope: "mcp:read", StepUpTool: "admin", StepUpScope: "mcp:admin"})
	w.login()
	s := w.proxy("")
	handshake(t, s)
	wantResult(t, s, echo(t, s, 1, "admin"))
	wantResult(t, s, echo(t, s, 2, "echo"))
	s.end()
	if c := w.srv.Counts(); c.MCPForbidden != 1 || c.Authorizes != 2 {
		t.Errorf("counts %+v: want one 403 and a second sign-in", c)
	}
}

// TestOAuthHeaderWins: --header Authorization is used as given: a good one works with
// no sign-in, and a bad one is refused without one.
func TestOAuthHeaderWins(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true, StaticTokens: []string{"static-token-1"}})
	s := w.proxy("", "--header", "Authorization: Bearer static-token-1")
	handshake(t, s)
	wantResult(t, s, echo(t, s, 1, "echo"))
	s.end()
	s = w.proxy("", "--header", "Authorization: Bearer not-a-token")
	s.Send(oauthInit)
	hostError(t, s, "0", "401")
	s.end()
	if c := w.srv.Counts(); c.Authorizes != 0 || c.Registrations != 0 {
		t.Errorf("counts %+v: no sign-in wanted", c)
	}
}

// TestOAuthWrappedRemoteEntry: a remote entry of a server that needs OAuth is
// wrapped with nothing secret in the file, and the wrapped command uses the token
// `bir-proxy login` stored (the store is per URL: its port plays no part).
func TestOAuthWrappedRemoteEntry(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true})
	proxy := testutil.Build(t, "./cmd/bir-proxy")
	path := filepath.Join(t.TempDir(), ".mcp.json")
	doc := `{"mcpServers": {"fx": {"type": "http", "url": "` + w.srv.MCPURL + `"}}}` + "\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := w.cli("", "wrap", "--config", path, "--proxy-path", proxy); code != 0 {
		t.Fatalf("wrap: %s", out)
	}
	w.login()
	wrapped := readFile(t, path)
	w.mu.Lock()
	w.texts = append(w.texts, string(wrapped))
	w.mu.Unlock()
	var cfg struct {
		MCPServers map[string]struct {
			Args []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(wrapped, &cfg); err != nil {
		t.Fatal(err)
	}
	s := startProxy(t, w.env("false"), cfg.MCPServers["fx"].Args...)
	w.mu.Lock()
	w.outputs = append(w.outputs, s.Stderr)
	w.mu.Unlock()
	handshake(t, s)
	wantResult(t, s, echo(t, s, 1, "echo"))
	s.end()
	if code, out := w.cli("", "unwrap", "--config", path); code != 0 || string(readFile(t, path)) != doc {
		t.Fatalf("unwrap: exit %d %s\n%s", code, out, readFile(t, path))
	}
}

// TestOAuthNothingSecretReachesTheRecorder: a proxy that signs in itself, recording to
// a recorder: neither the registration nor the report holds a token, code or secret.
func TestOAuthNothingSecretReachesTheRecorder(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true, ChallengeScope: "mcp:read"})
	rec := recordertest.Start(t)
	w.extra = recording(rec, t.TempDir())
	s := w.proxy("")
	handshake(t, s)
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","_bir_call_id":"c-1"}}}`)
	wantResult(t, s, s.recv())
	if _, err := rec.WaitSteps(testutil.Context(t), 1); err != nil {
		t.Fatal(err)
	}
	s.end()
	w.mu.Lock()
	for _, r := range rec.Requests() {
		w.texts = append(w.texts, string(r.Body))
	}
	w.mu.Unlock()
	if c := w.srv.Counts(); c.Authorizes != 1 {
		t.Errorf("counts %+v", c)
	}
}

// TestOAuthNoBrowserNeverHangsTheHost: no token and no browser: the host's initialize
// is answered within --oauth-wait with the login advice, the URL to visit is on
// stderr, and once a login from a terminal finishes that sign-in the host's next
// initialize works.
func TestOAuthNoBrowserNeverHangsTheHost(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{DCR: true})
	s := w.proxy("false", "--oauth-wait", "500ms")
	s.Send(oauthInit)
	msg := hostError(t, s, "0", "server fx", "needs an OAuth sign-in", "bir-proxy login --url "+w.srv.MCPURL)
	if !strings.Contains(msg, "500ms") {
		t.Errorf("the error does not say how long it waited: %s", msg)
	}
	if err := s.Stderr.WaitFor(testutil.Context(t), w.srv.AuthorizationEndpoint+"?"); err != nil {
		t.Fatalf("no sign-in URL on stderr: %s", s.Stderr.String())
	}
	w.login()
	handshake(t, s)
	wantResult(t, s, echo(t, s, 1, "echo"))
	s.end()
	if c := w.srv.Counts(); c.Authorizes != 1 || c.Registrations != 1 || c.CodeExchanges != 1 {
		t.Errorf("counts %+v: the login should have finished the proxy's own sign-in", c)
	}
}

// TestOAuthScopeChoice: with no challenge scope the resource's scopes_supported are
// asked for; --oauth-scope replaces them.
func TestOAuthScopeChoice(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true, ScopesSupported: []string{"mcp:read", "mcp:write"}})
	w.login()
	if _, out := w.cli("", "auth", "status"); !strings.Contains(out, "scopes: mcp:read mcp:write") {
		t.Errorf("want the scopes_supported asked for:\n%s", out)
	}
	w.login("--oauth-scope", "mcp:read")
	if _, out := w.cli("", "auth", "status"); !strings.Contains(out, "scopes: mcp:read\n") {
		t.Errorf("want only --oauth-scope's:\n%s", out)
	}
}

// TestOAuthQuerySecretStaysHome: a secret in --url's query is not part of the
// resource: it reaches neither the authorization server nor the sign-in URL the
// proxy prints, and the sign-in still works (the resource is the server's).
func TestOAuthQuerySecretStaysHome(t *testing.T) {
	t.Parallel()
	const secret = "QuerySecret4e7a91"
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true})
	s := startProxy(w.t, w.env(""), "--server", "fx", "--url", w.srv.MCPURL+"?api_key="+secret,
		"--transport", "http", "--oauth-port", strconv.Itoa(w.port), "--log-level", "debug")
	w.mu.Lock()
	w.outputs = append(w.outputs, s.Stderr)
	w.mu.Unlock()
	handshake(t, s)
	wantResult(t, s, echo(t, s, 1, "echo"))
	s.end()
	if strings.Contains(s.Stderr.String(), secret) {
		t.Errorf("the query's secret is on stderr:\n%s", s.Stderr.String())
	}
	for _, r := range w.srv.LastResource() {
		if strings.Contains(r, secret) {
			t.Errorf("the authorization server was sent resource %q", r)
		}
	}
	if n := w.srv.Counts(); n.CodeExchanges != 1 {
		t.Errorf("counts %+v", n)
	}
}
