package oauthtest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// The tests drive the OAuth flow by hand with net/http, the way a correct client
// would, then break one rule at a time and check the fixture notices: a test of
// the checker.

// hand is a hand-written OAuth client for one fixture.
type hand struct {
	t  *testing.T
	s  *Server
	hc *http.Client // follows redirects, like a browser

	cb       *callback
	clientID string
	secret   string
	verifier string
	state    string
}

func newHand(t *testing.T, s *Server) *hand {
	t.Helper()
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	h := &hand{t: t, s: s, hc: &http.Client{Transport: tr}}
	h.cb = startCallback(t, http.StatusOK)
	return h
}

// callback is a loopback redirect URI that records what it is given.
type callback struct {
	URL string
	mu  sync.Mutex
	got []url.Values
}

func startCallback(t *testing.T, status int) *callback {
	t.Helper()
	cb := &callback{}
	cb.URL = startCallbackHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cb.mu.Lock()
		cb.got = append(cb.got, r.URL.Query())
		cb.mu.Unlock()
		w.WriteHeader(status)
		io.WriteString(w, "you may close this tab")
	})) + "/callback"
	return cb
}

// startCallbackHandler serves h on 127.0.0.1 until the test ends and returns its
// origin.
func startCallbackHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return "http://" + ln.Addr().String()
}

func (cb *callback) last(t *testing.T) url.Values {
	t.Helper()
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if len(cb.got) == 0 {
		t.Fatal("the callback was never called")
	}
	return cb.got[len(cb.got)-1]
}

func (cb *callback) calls() int {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return len(cb.got)
}

func randomString(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func challengeOf(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func (h *hand) do(req *http.Request) (*http.Response, []byte) {
	h.t.Helper()
	resp, err := h.hc.Do(req.WithContext(testutil.Context(h.t)))
	if err != nil {
		h.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading: %v", req.Method, req.URL.Path, err)
	}
	return resp, body
}

func (h *hand) get(u string) (*http.Response, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.do(req)
}

func (h *hand) getJSON(u string) map[string]any {
	h.t.Helper()
	resp, body := h.get(u)
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET %s: %d %s", u, resp.StatusCode, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		h.t.Fatalf("GET %s: %v: %s", u, err, body)
	}
	return m
}

// register does DCR as a public native client.
func (h *hand) register(extra map[string]any) {
	h.t.Helper()
	md := map[string]any{
		"client_name":                "hand",
		"redirect_uris":              []string{h.cb.URL},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
		"application_type":           "native",
	}
	for k, v := range extra {
		md[k] = v
	}
	b, _ := json.Marshal(md)
	req, _ := http.NewRequest(http.MethodPost, h.s.RegistrationEndpoint, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, body := h.do(req)
	if resp.StatusCode != http.StatusCreated {
		h.t.Fatalf("register: %d %s", resp.StatusCode, body)
	}
	var got struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.ClientID == "" {
		h.t.Fatalf("register: %v: %s", err, body)
	}
	h.clientID, h.secret = got.ClientID, got.ClientSecret
}

// authorizeURL builds a correct authorization request; edit changes it.
func (h *hand) authorizeURL(scope string, edit func(url.Values)) string {
	h.verifier = randomString(h.t)
	h.state = randomString(h.t)
	v := url.Values{
		"response_type":         {"code"},
		"client_id":             {h.clientID},
		"redirect_uri":          {h.cb.URL},
		"code_challenge":        {challengeOf(h.verifier)},
		"code_challenge_method": {"S256"},
		"state":                 {h.state},
		"resource":              {h.s.MCPURL},
	}
	if scope != "" {
		v.Set("scope", scope)
	}
	if edit != nil {
		edit(v)
	}
	return h.s.AuthorizationEndpoint + "?" + v.Encode()
}

// authorize visits the authorization URL like a browser and returns what the
// callback got.
func (h *hand) authorize(scope string, edit func(url.Values)) url.Values {
	h.t.Helper()
	before := h.cb.calls()
	resp, body := h.get(h.authorizeURL(scope, edit))
	if resp.StatusCode != http.StatusOK || h.cb.calls() != before+1 {
		h.t.Fatalf("authorize: ended at %s with %d %s (callback calls %d→%d)", resp.Request.URL.Path, resp.StatusCode, body, before, h.cb.calls())
	}
	return h.cb.last(h.t)
}

// token posts a token request; the client authenticates as registered.
func (h *hand) token(form url.Values) (int, map[string]any) {
	h.t.Helper()
	if h.secret == "" {
		form.Set("client_id", h.clientID)
	}
	req, _ := http.NewRequest(http.MethodPost, h.s.TokenEndpoint, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if h.secret != "" {
		req.SetBasicAuth(url.QueryEscape(h.clientID), url.QueryEscape(h.secret))
	}
	resp, body := h.do(req)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		h.t.Fatalf("token: %d, not JSON: %s", resp.StatusCode, body)
	}
	return resp.StatusCode, m
}

func (h *hand) exchange(code string) (int, map[string]any) {
	h.t.Helper()
	return h.token(url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {h.cb.URL},
		"code_verifier": {h.verifier},
		"resource":      {h.s.MCPURL},
	})
}

// login runs the whole flow and returns the token response.
func (h *hand) login(scope string) map[string]any {
	h.t.Helper()
	got := h.authorize(scope, nil)
	if got.Get("state") != h.state || got.Get("code") == "" || got.Get("error") != "" {
		h.t.Fatalf("callback got %v", got)
	}
	status, tok := h.exchange(got.Get("code"))
	if status != http.StatusOK {
		h.t.Fatalf("token: %d %v", status, tok)
	}
	return tok
}

func (h *hand) refresh(rt string, edit func(url.Values)) (int, map[string]any) {
	h.t.Helper()
	v := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "resource": {h.s.MCPURL}}
	if edit != nil {
		edit(v)
	}
	return h.token(v)
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hand","version":"0"}}}`

// mcpPost posts one JSON-RPC message to the MCP endpoint with token ("" = none).
func (h *hand) mcpPost(token, session, msg string) (*http.Response, []byte) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.s.MCPURL, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	return h.do(req)
}

// session initializes an MCP session with token and returns its id.
func (h *hand) session(token string) string {
	h.t.Helper()
	resp, body := h.mcpPost(token, "", initialize)
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	return resp.Header.Get("Mcp-Session-Id")
}

func (h *hand) call(token, session, tool, args string) (*http.Response, []byte) {
	h.t.Helper()
	return h.mcpPost(token, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`)
}

func noErrors(t *testing.T, s *Server) {
	t.Helper()
	if errs := s.Errors(); len(errs) > 0 {
		t.Errorf("fixture saw violations:\n%s", strings.Join(errs, "\n"))
	}
	for _, r := range s.LastResource() {
		if r != s.MCPURL {
			t.Errorf("resource %q seen, want %q", r, s.MCPURL)
		}
	}
}

func wantViolation(t *testing.T, s *Server, sub string) {
	t.Helper()
	for _, e := range s.Errors() {
		if strings.Contains(e, sub) {
			return
		}
	}
	t.Errorf("no violation mentioning %q; have %q", sub, s.Errors())
}

func TestFullFlowDCR(t *testing.T) {
	s := Start(t, Options{DCR: true, MetadataInHeader: true, ChallengeScope: "mcp:read"})
	h := newHand(t, s)

	resp, _ := h.mcpPost("", "", initialize)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", resp.StatusCode)
	}
	wantChallenge := `Bearer resource_metadata="` + s.ResourceMetadataURL + `", scope="mcp:read"`
	if got := resp.Header.Get("WWW-Authenticate"); got != wantChallenge {
		t.Fatalf("WWW-Authenticate:\n got %s\nwant %s", got, wantChallenge)
	}
	if !strings.HasSuffix(s.ResourceMetadataURL, "/.well-known/oauth-protected-resource") {
		t.Fatalf("metadata URL %s is not the root form", s.ResourceMetadataURL)
	}
	prm := h.getJSON(s.ResourceMetadataURL)
	if prm["resource"] != s.MCPURL {
		t.Fatalf("PRM resource %v, want %s", prm["resource"], s.MCPURL)
	}
	as := prm["authorization_servers"].([]any)[0].(string)
	if as != s.Issuer {
		t.Fatalf("PRM authorization server %s, want %s", as, s.Issuer)
	}
	md := h.getJSON(as + "/.well-known/oauth-authorization-server")
	if md["issuer"] != s.Issuer || md["registration_endpoint"] != s.RegistrationEndpoint ||
		md["token_endpoint"] != s.TokenEndpoint || md["authorization_endpoint"] != s.AuthorizationEndpoint {
		t.Fatalf("AS metadata %v", md)
	}
	if m, _ := md["code_challenge_methods_supported"].([]any); len(m) != 1 || m[0] != "S256" {
		t.Fatalf("code_challenge_methods_supported %v", md["code_challenge_methods_supported"])
	}

	h.register(nil)
	got := h.authorize("mcp:read", nil)
	if got.Get("iss") != s.Issuer {
		t.Errorf("iss %q, want %q", got.Get("iss"), s.Issuer)
	}
	status, tok := h.exchange(got.Get("code"))
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, tok)
	}
	if tok["token_type"] != "Bearer" || tok["refresh_token"] == nil || tok["scope"] != "mcp:read" {
		t.Fatalf("token response %v", tok)
	}
	at := tok["access_token"].(string)
	sid := h.session(at)
	resp, body := h.call(at, sid, "echo", `{"text":"hello","n":1}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `{\"text\":\"hello\",\"n\":1}`) {
		t.Fatalf("echo: %d %s", resp.StatusCode, body)
	}
	noErrors(t, s)
	c := s.Counts()
	if c.Registrations != 1 || c.Authorizes != 1 || c.CodeExchanges != 1 || c.MCPUnauthorized != 1 {
		t.Errorf("counts %+v", c)
	}
	if len(s.LastResource()) != 2 {
		t.Errorf("resources seen %q, want one on authorize, one on token", s.LastResource())
	}
}

func TestWrongVerifierRefused(t *testing.T) {
	s := Start(t, Options{DCR: true})
	h := newHand(t, s)
	h.register(nil)
	got := h.authorize("", nil)
	right := h.verifier
	h.verifier = randomString(t)
	status, body := h.exchange(got.Get("code"))
	if status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("wrong verifier: %d %v, want 400 invalid_grant", status, body)
	}
	wantViolation(t, s, "PKCE verification failed")
	// The failed attempt does not burn the code for the right verifier? It does
	// not matter to a client; what matters is that a second, correct one works
	// only if the code is still unused, which it is.
	h.verifier = right
	if status, body := h.exchange(got.Get("code")); status != http.StatusOK {
		t.Fatalf("right verifier after a wrong one: %d %v", status, body)
	}
	if c := s.Counts(); c.CodeExchanges != 2 || c.CodesRefused != 1 {
		t.Errorf("counts %+v", c)
	}
}

func TestMissingVerifierRefused(t *testing.T) {
	s := Start(t, Options{DCR: true})
	h := newHand(t, s)
	h.register(nil)
	got := h.authorize("", nil)
	status, body := h.token(url.Values{
		"grant_type": {"authorization_code"}, "code": {got.Get("code")},
		"redirect_uri": {h.cb.URL}, "resource": {s.MCPURL},
	})
	if status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("no verifier: %d %v", status, body)
	}
	wantViolation(t, s, "code_verifier missing")
}

func TestAuthorizeRefusals(t *testing.T) {
	cases := []struct {
		name      string
		edit      func(url.Values)
		wantError string
		violation string
	}{
		{"no resource", func(v url.Values) { v.Del("resource") }, "invalid_target", "0 resource parameters"},
		{"wrong resource", func(v url.Values) { v.Set("resource", "http://127.0.0.1:1/other") }, "invalid_target", "is not the MCP server's canonical URI"},
		{"trailing slash path", func(v url.Values) { v.Set("resource", v.Get("resource")+"/") }, "invalid_target", "canonical URI"},
		{"plain PKCE", func(v url.Values) { v.Set("code_challenge_method", "plain") }, "invalid_request", "want S256"},
		{"no PKCE method", func(v url.Values) { v.Del("code_challenge_method") }, "invalid_request", "want S256"},
		{"no challenge", func(v url.Values) { v.Del("code_challenge") }, "invalid_request", "code_challenge"},
		{"no state", func(v url.Values) { v.Del("state") }, "invalid_request", "no state"},
		{"token response type", func(v url.Values) { v.Set("response_type", "token") }, "unsupported_response_type", "response_type"},
		{"unknown scope", func(v url.Values) { v.Set("scope", "root") }, "invalid_scope", "unknown scopes"},
		{"two resources", func(v url.Values) { v.Add("resource", v.Get("resource")) }, "invalid_target", "2 resource parameters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Start(t, Options{DCR: true})
			h := newHand(t, s)
			h.register(nil)
			got := h.authorize("", tc.edit)
			if got.Get("error") != tc.wantError || got.Get("code") != "" {
				t.Fatalf("callback got %v, want error=%s", got, tc.wantError)
			}
			if got.Get("iss") != s.Issuer {
				t.Errorf("error response iss %q", got.Get("iss"))
			}
			wantViolation(t, s, tc.violation)
		})
	}
}

func TestAuthorizeUppercaseResourceAccepted(t *testing.T) {
	s := Start(t, Options{DCR: true})
	h := newHand(t, s)
	h.register(nil)
	upper := strings.Replace(s.MCPURL, "http://", "HTTP://", 1)
	got := h.authorize("", func(v url.Values) { v.Set("resource", upper) })
	if got.Get("code") == "" {
		t.Fatalf("uppercase scheme refused: %v (MCP: SHOULD accept)", got)
	}
	if len(s.Errors()) != 0 {
		t.Fatalf("violations %q", s.Errors())
	}
}

func TestRedirectURIMustMatchExactly(t *testing.T) {
	s := Start(t, Options{DCR: true})
	h := newHand(t, s)
	h.register(nil)
	other := startCallback(t, http.StatusOK)
	resp, body := h.get(h.authorizeURL("", func(v url.Values) { v.Set("redirect_uri", other.URL) }))
	if resp.StatusCode != http.StatusBadRequest || other.calls() != 0 || h.cb.calls() != 0 {
		t.Fatalf("unregistered redirect_uri: %d %s; callbacks %d/%d — must be a 400 page, never a redirect",
			resp.StatusCode, body, other.calls(), h.cb.calls())
	}
	wantViolation(t, s, "is not registered for client")

	resp, _ = h.get(h.authorizeURL("", func(v url.Values) { v.Set("client_id", "nobody") }))
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("unknown client: %d", resp.StatusCode)
	}
	wantViolation(t, s, `client_id "nobody": not registered`)
}

func TestTokenRefusals(t *testing.T) {
	s := Start(t, Options{DCR: true})
	h := newHand(t, s)
	h.register(nil)

	code := h.authorize("", nil).Get("code")
	status, body := h.token(url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"code_verifier": {h.verifier}, "redirect_uri": {h.cb.URL}})
	if status != http.StatusBadRequest || body["error"] != "invalid_target" {
		t.Fatalf("token without resource: %d %v", status, body)
	}
	wantViolation(t, s, "token (authorization_code): 0 resource parameters")

	status, body = h.token(url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"code_verifier": {h.verifier}, "redirect_uri": {h.cb.URL + "x"}, "resource": {s.MCPURL}})
	if status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("token with another redirect_uri: %d %v", status, body)
	}
	wantViolation(t, s, "differs from the authorization request's")

	// The code is still good; use it, then replay it.
	if status, body := h.exchange(code); status != http.StatusOK {
		t.Fatalf("exchange: %d %v", status, body)
	}
	if status, body := h.exchange(code); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("replayed code: %d %v", status, body)
	}
	wantViolation(t, s, "authorization code used twice")
}

func TestReplayedCodeRevokesItsTokens(t *testing.T) {
	s := Start(t, Options{DCR: true})
	h := newHand(t, s)
	h.register(nil)
	code := h.authorize("", nil).Get("code")
	_, tok := h.exchange(code)
	h.exchange(code)
	resp, _ := h.mcpPost(tok["access_token"].(string), "", initialize)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("token of a replayed code: %d, want 401 (OAuth 2.1 §4.1.3)", resp.StatusCode)
	}
}

func TestRefreshRotation(t *testing.T) {
	s := Start(t, Options{DCR: true, RotateRefresh: true})
	h := newHand(t, s)
	h.register(nil)
	tok := h.login("")
	rt1 := tok["refresh_token"].(string)

	status, tok2 := h.refresh(rt1, nil)
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, tok2)
	}
	rt2, _ := tok2["refresh_token"].(string)
	if rt2 == "" || rt2 == rt1 {
		t.Fatalf("rotation gave refresh token %q (old %q)", rt2, rt1)
	}
	noErrors(t, s)
	if resp, _ := h.mcpPost(tok2["access_token"].(string), "", initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("refreshed token: %d", resp.StatusCode)
	}

	// The loser of a refresh race presents the rotated one.
	status, body := h.refresh(rt1, nil)
	if status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("rotated refresh token: %d %v", status, body)
	}
	wantViolation(t, s, "used again after rotation")
	// Without ReuseRevokesGrant the new one still works.
	if status, body := h.refresh(rt2, nil); status != http.StatusOK {
		t.Fatalf("current refresh token after a reuse: %d %v", status, body)
	}
	c := s.Counts()
	if c.Refreshes != 3 || c.RefreshRefused != 1 {
		t.Errorf("counts %+v", c)
	}
}

func TestRefreshReuseRevokesGrant(t *testing.T) {
	s := Start(t, Options{DCR: true, RotateRefresh: true, ReuseRevokesGrant: true})
	h := newHand(t, s)
	h.register(nil)
	rt1 := h.login("")["refresh_token"].(string)
	_, tok2 := h.refresh(rt1, nil)
	h.refresh(rt1, nil)
	if status, body := h.refresh(tok2["refresh_token"].(string), nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("refresh after reuse detection: %d %v", status, body)
	}
	if resp, _ := h.mcpPost(tok2["access_token"].(string), "", initialize); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("access token of a revoked grant: %d", resp.StatusCode)
	}
}

func TestRefreshNeedsResource(t *testing.T) {
	s := Start(t, Options{DCR: true})
	h := newHand(t, s)
	h.register(nil)
	rt := h.login("")["refresh_token"].(string)
	status, body := h.refresh(rt, func(v url.Values) { v.Del("resource") })
	if status != http.StatusBadRequest || body["error"] != "invalid_target" {
		t.Fatalf("refresh without resource: %d %v", status, body)
	}
	wantViolation(t, s, "token (refresh_token): 0 resource parameters")
	if c := s.Counts(); c.RefreshRefused != 1 {
		t.Errorf("counts %+v", c)
	}
	// Without rotation the same refresh token keeps working and no new one comes.
	status, tok := h.refresh(rt, nil)
	if status != http.StatusOK || tok["refresh_token"] != nil {
		t.Fatalf("refresh without rotation: %d %v", status, tok)
	}
	if status, _ := h.refresh(rt, func(v url.Values) { v.Set("scope", "mcp:admin") }); status != http.StatusBadRequest {
		t.Fatalf("refresh widening the scope: %d", status)
	}
}

func TestRevokeAndExpire(t *testing.T) {
	s := Start(t, Options{DCR: true, MetadataInHeader: true})
	h := newHand(t, s)
	h.register(nil)
	tok := h.login("")
	at := tok["access_token"].(string)
	if resp, _ := h.mcpPost(at, "", initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("fresh token: %d", resp.StatusCode)
	}

	s.ExpireAccessTokens()
	resp, _ := h.mcpPost(at, "", initialize)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("expired token: %d, want 401", resp.StatusCode)
	}
	want := `Bearer resource_metadata="` + s.ResourceMetadataURL + `", error="invalid_token"`
	if got := resp.Header.Get("WWW-Authenticate"); got != want {
		t.Errorf("WWW-Authenticate %s, want %s", got, want)
	}
	status, tok2 := h.refresh(tok["refresh_token"].(string), nil)
	if status != http.StatusOK {
		t.Fatalf("refresh of an expired access token: %d %v", status, tok2)
	}
	at2 := tok2["access_token"].(string)
	if resp, _ := h.mcpPost(at2, "", initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("refreshed token: %d", resp.StatusCode)
	}

	s.Revoke()
	if resp, _ := h.mcpPost(at2, "", initialize); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked token: %d, want 401", resp.StatusCode)
	}
	if status, body := h.refresh(tok["refresh_token"].(string), nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("refresh of a revoked grant: %d %v", status, body)
	}
	// A revoked grant is the server's doing, not a client violation; and a new
	// login works.
	noErrors(t, s)
	if resp, _ := h.mcpPost(h.login("")["access_token"].(string), "", initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("after re-login: %d", resp.StatusCode)
	}
	if c := s.Counts(); c.MCPUnauthorized != 2 || c.RefreshRefused != 1 || c.Authorizes != 2 {
		t.Errorf("counts %+v", c)
	}
}

func TestUnknownAndStaticTokens(t *testing.T) {
	s := Start(t, Options{StaticTokens: []string{"static-1"}, ChallengeScope: "mcp:read", StepUpTool: "admin", StepUpScope: "mcp:admin"})
	h := newHand(t, s)
	resp, _ := h.mcpPost("made-up", "", initialize)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("made-up token: %d", resp.StatusCode)
	}
	if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer scope="mcp:read", error="invalid_token"` {
		t.Errorf("WWW-Authenticate %q", got)
	}
	s.ExpireAccessTokens()
	s.Revoke()
	sid := h.session("static-1")
	if resp, body := h.call("static-1", sid, "admin", `{}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("static token on the step-up tool: %d %s", resp.StatusCode, body)
	}
	if c := s.Counts(); c.UnknownTokens != 1 || c.MCPUnauthorized != 1 || c.MCPAuthorized != 2 {
		t.Errorf("counts %+v", c)
	}
	noErrors(t, s)
}

func TestStepUp(t *testing.T) {
	s := Start(t, Options{DCR: true, MetadataInHeader: true, ChallengeScope: "mcp:read", StepUpTool: "admin", StepUpScope: "mcp:admin"})
	h := newHand(t, s)
	h.register(nil)
	at := h.login("mcp:read")["access_token"].(string)
	sid := h.session(at)
	if resp, body := h.call(at, sid, "echo", `{}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("echo: %d %s", resp.StatusCode, body)
	}
	resp, _ := h.call(at, sid, "admin", `{}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("step-up tool with base scope: %d, want 403", resp.StatusCode)
	}
	ch := resp.Header.Get("WWW-Authenticate")
	want := `Bearer error="insufficient_scope", scope="mcp:read mcp:admin", resource_metadata="` + s.ResourceMetadataURL + `"`
	if !strings.HasPrefix(ch, want) {
		t.Fatalf("403 challenge\n got %s\nwant prefix %s", ch, want)
	}
	at2 := h.login("mcp:read mcp:admin")["access_token"].(string)
	sid2 := h.session(at2)
	if resp, body := h.call(at2, sid2, "admin", `{}`); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "stepped up") {
		t.Fatalf("step-up tool with step-up scope: %d %s", resp.StatusCode, body)
	}
	// A token without the base scope is refused everything, with the base scope named.
	at3 := h.login("mcp:admin")["access_token"].(string)
	resp, _ = h.mcpPost(at3, "", initialize)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `scope="mcp:read"`) {
		t.Fatalf("token without base scope: %d %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	noErrors(t, s)
	if c := s.Counts(); c.MCPForbidden != 2 {
		t.Errorf("counts %+v", c)
	}
}

func TestPreRegisteredClients(t *testing.T) {
	s := Start(t, Options{PreRegistered: map[string]string{"conf": "s3cret", "pub": ""}})
	h := newHand(t, s)

	t.Run("confidential basic", func(t *testing.T) {
		h.t = t
		h.clientID, h.secret = "conf", "s3cret"
		at := h.login("")["access_token"].(string)
		if resp, _ := h.mcpPost(at, "", initialize); resp.StatusCode != http.StatusOK {
			t.Fatalf("pre-registered token: %d", resp.StatusCode)
		}
	})
	t.Run("confidential post", func(t *testing.T) {
		h.t = t
		h.clientID, h.secret = "conf", ""
		code := h.authorize("", nil).Get("code")
		status, body := h.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {h.verifier},
			"resource": {s.MCPURL}, "client_secret": {"s3cret"}})
		if status != http.StatusOK {
			t.Fatalf("client_secret_post: %d %v", status, body)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		h.t = t
		h.clientID, h.secret = "conf", "wrong"
		code := h.authorize("", nil).Get("code")
		if status, body := h.exchange(code); status != http.StatusUnauthorized || body["error"] != "invalid_client" {
			t.Fatalf("wrong secret: %d %v", status, body)
		}
		wantViolation(t, s, "wrong client_secret")
	})
	t.Run("confidential without secret", func(t *testing.T) {
		h.t = t
		h.clientID, h.secret = "conf", ""
		code := h.authorize("", nil).Get("code")
		if status, _ := h.exchange(code); status != http.StatusUnauthorized {
			t.Fatalf("confidential client as public: %d", status)
		}
	})
	t.Run("public", func(t *testing.T) {
		h.t = t
		h.clientID, h.secret = "pub", ""
		if tok := h.login(""); tok["access_token"] == nil {
			t.Fatalf("public client: %v", tok)
		}
	})
	t.Run("pinned redirect", func(t *testing.T) {
		h.t = t
		h.clientID, h.secret = "pub", ""
		moved := startCallback(t, http.StatusOK)
		resp, _ := h.get(h.authorizeURL("", func(v url.Values) { v.Set("redirect_uri", moved.URL) }))
		if resp.StatusCode != http.StatusBadRequest || moved.calls() != 0 {
			t.Fatalf("pre-registered client's redirect URI moved: %d, callback calls %d", resp.StatusCode, moved.calls())
		}
		wantViolation(t, s, "is not registered for client \"pub\"")
	})
}

func TestDCRValidation(t *testing.T) {
	s := Start(t, Options{DCR: true})
	h := newHand(t, s)
	post := func(md map[string]any) (int, map[string]any) {
		b, _ := json.Marshal(md)
		req, _ := http.NewRequest(http.MethodPost, s.RegistrationEndpoint, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, body := h.do(req)
		var m map[string]any
		json.Unmarshal(body, &m)
		return resp.StatusCode, m
	}
	if st, m := post(map[string]any{"redirect_uris": []string{"http://example.com/cb"}, "application_type": "native"}); st != http.StatusBadRequest || m["error"] != "invalid_redirect_uri" {
		t.Errorf("non-loopback http redirect: %d %v", st, m)
	}
	if st, m := post(map[string]any{"redirect_uris": []string{h.cb.URL}, "application_type": "web"}); st != http.StatusBadRequest || m["error"] != "invalid_redirect_uri" {
		t.Errorf("web app with loopback redirect: %d %v", st, m)
	}
	// RFC 7591's default auth method is client_secret_basic: a secret comes back.
	st, m := post(map[string]any{"redirect_uris": []string{h.cb.URL}, "application_type": "native"})
	if st != http.StatusCreated || m["client_secret"] == nil || m["token_endpoint_auth_method"] != "client_secret_basic" {
		t.Errorf("default auth method: %d %v", st, m)
	}
	if len(s.Errors()) != 2 {
		t.Errorf("violations %q, want the two refusals", s.Errors())
	}
	// Missing application_type registers, but is a violation of 2026-07-28.
	if st, _ := post(map[string]any{"redirect_uris": []string{h.cb.URL}, "token_endpoint_auth_method": "none"}); st != http.StatusCreated {
		t.Errorf("no application_type: %d", st)
	}
	wantViolation(t, s, "no application_type")
	if c := s.Counts(); c.Registrations != 2 {
		t.Errorf("counts %+v", c)
	}

	// A confidential DCR client authenticates with Basic, and only with it.
	h.register(map[string]any{"token_endpoint_auth_method": "client_secret_basic"})
	if h.secret == "" {
		t.Fatal("no secret for a client_secret_basic registration")
	}
	code := h.authorize("", nil).Get("code")
	if status, body := h.exchange(code); status != http.StatusOK {
		t.Fatalf("basic auth: %d %v", status, body)
	}
	secret := h.secret
	h.secret = ""
	code = h.authorize("", nil).Get("code")
	status, body := h.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {h.verifier},
		"resource": {s.MCPURL}, "client_secret": {secret}})
	if status != http.StatusUnauthorized {
		t.Fatalf("client_secret_post by a client_secret_basic client: %d %v", status, body)
	}
}

func TestNoDCRNoCIMD(t *testing.T) {
	s := Start(t, Options{})
	h := newHand(t, s)
	md := h.getJSON(s.Issuer + "/.well-known/oauth-authorization-server")
	if _, ok := md["registration_endpoint"]; ok {
		t.Error("registration_endpoint offered without Options.DCR")
	}
	if _, ok := md["client_id_metadata_document_supported"]; ok {
		t.Error("CIMD offered without Options.CIMD")
	}
	req, _ := http.NewRequest(http.MethodPost, s.Issuer+"/register", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, _ := h.do(req); resp.StatusCode != http.StatusNotFound {
		t.Errorf("register without DCR: %d", resp.StatusCode)
	}
	wantViolation(t, s, "offers no registration_endpoint")
}
