package oauthtest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// Options shape one fixture. The zero value is a server whose 401 names no metadata
// URL (the client must probe the well-known paths), at the root form, with an issuer
// without a path, no DCR, no CIMD and no pre-registered client: set what a test needs.
type Options struct {
	// Metadata: how the protected resource metadata is found.
	MetadataInHeader bool     // 401 carries WWW-Authenticate resource_metadata="..."; else only well-known paths
	MetadataAtPath   bool     // serve /.well-known/oauth-protected-resource/<mcp path> (path form) instead of root form
	ASPathIssuer     bool     // authorization server issuer has a path (tests the RFC 8414 path-insertion + OIDC fallbacks)
	ScopesSupported  []string // AS (and protected resource) scopes_supported; default {"mcp:read","mcp:write"}
	ChallengeScope   string   // scope="..." in the 401 WWW-Authenticate ("" = none); a token needs these scopes for any call
	StepUpTool       string   // a tools/call of this tool name needs StepUpScope: 403 insufficient_scope
	StepUpScope      string
	AccessTTL        time.Duration     // default 1h
	RotateRefresh    bool              // each refresh returns a new refresh token and revokes the old one
	DCR              bool              // registration_endpoint offered
	CIMD             bool              // client_id_metadata_document_supported: true; AS fetches the client_id URL
	PreRegistered    map[string]string // client_id -> client_secret ("" secret = public client)
	TokenDelay       time.Duration     // the token endpoint waits this long (to make races visible)

	// Additions to the contract.

	// MCPPath is the MCP endpoint's path; default "/mcp".
	MCPPath string
	// ASMetadata chooses which of the authorization server metadata well-known URLs
	// answer (the others 404). Zero means: WellKnownOAuth for an issuer without a
	// path; WellKnownOIDCAppend only for a path issuer, the last one in the MCP
	// spec's priority order, so a client must fall back twice to find it.
	ASMetadata WellKnown
	// PreRegisteredRedirectURIs are the redirect URIs registered for every
	// pre-registered client. Empty means: the first loopback redirect_uri a
	// pre-registered client presents becomes its registered one (trust on first
	// use), and a later different one is refused like any unregistered URI.
	PreRegisteredRedirectURIs []string
	// ReuseRevokesGrant: presenting a refresh token that rotation already replaced
	// revokes the whole grant (the refresh token reuse detection OAuth 2.1 §4.3.1
	// suggests), as strict production servers do.
	ReuseRevokesGrant bool
	// NoIss leaves the RFC 9207 iss parameter out of authorization responses and
	// authorization_response_iss_parameter_supported out of the metadata.
	NoIss bool
	// Stateless runs the MCP server without sessions (mcp-go WithStateLess).
	Stateless bool
	// StaticTokens are bearer tokens the MCP server accepts without any grant
	// (never expiring, every scope), as a token given with --header would be.
	StaticTokens []string
}

// WellKnown is a set of authorization server metadata URLs (MCP 2025-11-25
// "Authorization Server Metadata Discovery"); for an issuer without a path the
// two OIDC forms are the same URL.
type WellKnown int

const (
	// WellKnownOAuth is RFC 8414 §3.1: /.well-known/oauth-authorization-server[/path].
	WellKnownOAuth WellKnown = 1 << iota
	// WellKnownOIDCInsert is OIDC discovery with path insertion: /.well-known/openid-configuration[/path].
	WellKnownOIDCInsert
	// WellKnownOIDCAppend is OIDC discovery with path appending: [/path]/.well-known/openid-configuration.
	WellKnownOIDCAppend
)

// Server is one running fixture: an authorization server and a protected MCP
// server, each on its own 127.0.0.1 port (so they are different origins, as in
// production).
type Server struct {
	MCPURL string // the protected Streamable HTTP MCP endpoint (mcp-go server, tool "echo" and the step-up tool)
	Issuer string // the authorization server's issuer URL

	// ResourceMetadataURL is where the protected resource metadata is served
	// (root or path form, per Options.MetadataAtPath).
	ResourceMetadataURL string
	// The authorization server's endpoints, as its metadata names them.
	AuthorizationEndpoint string
	TokenEndpoint         string
	RegistrationEndpoint  string // "" unless Options.DCR

	opt      Options
	resource string // canonical form of MCPURL
	asBase   string // scheme://host:port of the authorization server
	issPath  string // the issuer's path ("" or "/tenant1")
	mcp      *server.StreamableHTTPServer
	fetcher  *http.Client // CIMD fetches
	now      func() time.Time

	mu      sync.Mutex
	counts  Counts
	errs    []string
	seen    []string // resource values on authorize/token/refresh, in order
	reqs    []string
	secrets []string
	clients map[string]*client
	codes   map[string]*authCode
	access  map[string]*accessToken
	refresh map[string]*refreshToken
	grants  []*grant
}

// Counts are what the fixture has seen so far.
type Counts struct {
	Registrations   int // DCR POSTs accepted
	Authorizes      int // GET /authorize visits (browser visits)
	CodeExchanges   int // token requests with grant_type=authorization_code
	Refreshes       int // token requests with grant_type=refresh_token
	RefreshRefused  int
	CIMDFetches     int
	MCPUnauthorized int // 401s the MCP endpoint sent

	// Additions to the contract.
	MCPForbidden    int // 403 insufficient_scope answers the MCP endpoint sent
	MCPAuthorized   int // MCP requests that passed the token check
	CodesRefused    int // authorization_code token requests refused
	ResourceMetaGet int // protected resource metadata documents served
	ASMetaGet       int // authorization server metadata documents served
	UnknownTokens   int // MCP requests with a bearer token the authorization server never issued
}

type client struct {
	id           string
	secret       string   // "" for a public client
	methods      []string // token_endpoint_auth_method values it may use
	redirectURIs []string
	pinRedirect  bool // pre-registered without configured redirect URIs: first one wins
	kind         string
	cimdExpires  time.Time // CIMD: when the cached document must be fetched again
}

type grant struct {
	clientID string
	scope    []string
	resource string
	revoked  bool
}

type authCode struct {
	clientID    string
	redirectURI string
	challenge   string
	scope       []string
	resource    string
	expires     time.Time
	used        bool
	grant       *grant // set once exchanged, so a replay revokes what it issued
}

type accessToken struct {
	grant    *grant
	scope    []string
	resource string
	expires  time.Time
	static   bool // Options.StaticTokens: no grant, never expired by ExpireAccessTokens
}

type refreshToken struct {
	grant   *grant
	rotated bool // replaced by a newer one (Options.RotateRefresh)
}

// Start runs a fixture on 127.0.0.1, closed by tb.Cleanup.
func Start(tb testing.TB, opt Options) *Server {
	tb.Helper()
	if opt.ScopesSupported == nil {
		opt.ScopesSupported = []string{"mcp:read", "mcp:write"}
	}
	if opt.AccessTTL <= 0 {
		opt.AccessTTL = time.Hour
	}
	if opt.MCPPath == "" {
		opt.MCPPath = "/mcp"
	}
	if !strings.HasPrefix(opt.MCPPath, "/") {
		tb.Fatalf("oauthtest: MCPPath %q does not start with /", opt.MCPPath)
	}
	s := &Server{
		opt:     opt,
		now:     time.Now,
		clients: map[string]*client{},
		codes:   map[string]*authCode{},
		access:  map[string]*accessToken{},
		refresh: map[string]*refreshToken{},
	}
	for id, secret := range opt.PreRegistered {
		c := &client{id: id, secret: secret, kind: "pre-registered", redirectURIs: slices.Clone(opt.PreRegisteredRedirectURIs)}
		if secret == "" {
			c.methods = []string{"none"}
		} else {
			c.methods = []string{"client_secret_post", "client_secret_basic"}
		}
		c.pinRedirect = len(c.redirectURIs) == 0
		s.clients[id] = c
	}

	asLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("oauthtest: listening for the authorization server: %v", err)
	}
	mcpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		asLn.Close()
		tb.Fatalf("oauthtest: listening for the MCP server: %v", err)
	}
	s.asBase = "http://" + asLn.Addr().String()
	mcpBase := "http://" + mcpLn.Addr().String()
	if opt.ASPathIssuer {
		s.issPath = "/tenant1"
	}
	s.Issuer = s.asBase + s.issPath
	s.AuthorizationEndpoint = s.Issuer + "/authorize"
	s.TokenEndpoint = s.Issuer + "/token"
	if opt.DCR {
		s.RegistrationEndpoint = s.Issuer + "/register"
	}
	s.MCPURL = mcpBase + opt.MCPPath
	s.resource = canonicalResource(s.MCPURL)
	for _, tok := range opt.StaticTokens {
		all := union(union(opt.ScopesSupported, splitScope(opt.ChallengeScope)), splitScope(opt.StepUpScope))
		s.access[tok] = &accessToken{grant: &grant{clientID: "static"}, scope: all, resource: s.MCPURL, static: true,
			expires: time.Now().Add(100 * 365 * 24 * time.Hour)}
	}
	if opt.MetadataAtPath && opt.MCPPath != "/" {
		s.ResourceMetadataURL = mcpBase + prmRoot + opt.MCPPath
	} else {
		s.ResourceMetadataURL = mcpBase + prmRoot
	}

	transport := &http.Transport{Proxy: nil}
	s.fetcher = &http.Client{
		Transport: transport,
		Timeout:   10 * time.Second,
		// The CIMD draft: the document is fetched from the client_id URL itself; a
		// redirect would let a client_id name a document it does not host.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	s.mcp = newMCPServer(s)

	asSrv := &http.Server{Handler: http.HandlerFunc(s.serveAS), ReadHeaderTimeout: 10 * time.Second}
	mcpSrv := &http.Server{Handler: http.HandlerFunc(s.serveMCPHost), ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); serve(asSrv, asLn) }()
	go func() { defer wg.Done(); serve(mcpSrv, mcpLn) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// GET streams end only when their session does; Close alone would leave
		// mcp-go's session goroutines waiting on them.
		s.mcp.CloseSessions(ctx)
		_ = s.mcp.Shutdown(ctx)
		asSrv.Close()
		mcpSrv.Close()
		wg.Wait()
		transport.CloseIdleConnections()
	})
	return s
}

func serve(srv *http.Server, ln net.Listener) {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		// Nothing to report to: the test sees its requests fail.
		_ = err
	}
}

const prmRoot = "/.well-known/oauth-protected-resource"

// Counts returns what the fixture has counted so far.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// Revoke revokes every grant and token: the next MCP call with any token issued so
// far gets 401, and every refresh token invalid_grant. Registrations stay.
func (s *Server) Revoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.grants {
		g.revoked = true
	}
	for _, c := range s.codes {
		c.used = true
	}
}

// ExpireAccessTokens makes every access token issued so far expired.
func (s *Server) ExpireAccessTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	past := s.now().Add(-time.Second)
	for _, t := range s.access {
		if !t.static && t.expires.After(past) {
			t.expires = past
		}
	}
}

// LastResource returns every `resource` value seen on authorize, token and refresh
// requests, in order ("" where one was missing). All must equal the canonical form
// of MCPURL.
func (s *Server) LastResource() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// Errors returns the protocol violations the fixture saw, in order. A test asserts
// it is empty.
func (s *Server) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs)
}

// Requests returns "AS|MCP METHOD path" of every request either server got, in
// order (never the query), for tests that check the discovery order.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Secrets returns every secret the fixture has issued (client secrets,
// authorization codes, access and refresh tokens), for tests that check none of
// them shows up in logs, reports or journals.
func (s *Server) Secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.secrets)
}

// violation records a protocol violation; the caller holds no lock.
func (s *Server) violation(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
}

func (s *Server) logRequest(side string, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, side+" "+r.Method+" "+r.URL.Path)
}

// newSecret returns a random opaque string and remembers it as a secret; the
// caller holds s.mu.
func (s *Server) newSecret(prefix string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	v := prefix + base64.RawURLEncoding.EncodeToString(b)
	s.secrets = append(s.secrets, v)
	return v
}

// canonicalResource is u with scheme and host lowercased, its fragment dropped and
// a lone "/" path removed (MCP 2025-11-25 "Canonical Server URI": uppercase scheme
// and host SHOULD be accepted; the form without trailing slash is preferred).
// Anything unparsable is returned as is, so it matches nothing.
func canonicalResource(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" || p.Host == "" || p.Fragment != "" || strings.Contains(u, "#") {
		return "\x00" + u
	}
	p.Scheme = strings.ToLower(p.Scheme)
	p.Host = strings.ToLower(p.Host)
	if p.Path == "/" && p.RawQuery == "" {
		p.Path = ""
	}
	return p.String()
}

// isLoopbackHost reports whether host (no port) is a loopback name or address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func splitScope(s string) []string { return strings.Fields(s) }

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
