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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cb := &callback{URL: "http://" + ln.Addr().String() + "/callback"}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cb.mu.Lock()
		cb.got = append(cb.got, r.URL.Query())
		cb.mu.Unlock()
		w.WriteHeader(status)
		io.WriteString(w, "you may close this tab")
	})}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return cb
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
