package oauthtest

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The authorization server.

const codeTTL = 5 * time.Minute

func (s *Server) serveAS(w http.ResponseWriter, r *http.Request) {
	s.logRequest("AS", r)
	p := r.URL.Path
	if s.asMetadataPath(p) {
		s.serveASMetadata(w, r)
		return
	}
	switch p {
	case s.issPath + "/authorize":
		s.serveAuthorize(w, r)
	case s.issPath + "/token":
		s.serveToken(w, r)
	case s.issPath + "/register":
		if !s.opt.DCR {
			s.violation("register: POST to %s, but the metadata offers no registration_endpoint (Options.DCR off)", p)
			http.NotFound(w, r)
			return
		}
		s.serveRegister(w, r)
	case s.issPath + "/jwks":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"keys":[]}`)
	default:
		http.NotFound(w, r)
	}
}

// asMetadataPath reports whether p is one of the metadata URLs Options.ASMetadata
// serves (MCP 2025-11-25 "Authorization Server Metadata Discovery", RFC 8414 §3.1
// path insertion, RFC 8414 §5 / OIDC Discovery §4 for the OpenID forms).
func (s *Server) asMetadataPath(p string) bool {
	set := s.opt.ASMetadata
	if set == 0 {
		set = WellKnownOAuth
		if s.issPath != "" {
			set = WellKnownOIDCAppend
		}
	}
	if set&WellKnownOAuth != 0 && p == "/.well-known/oauth-authorization-server"+s.issPath {
		return true
	}
	if set&WellKnownOIDCInsert != 0 && p == "/.well-known/openid-configuration"+s.issPath {
		return true
	}
	if set&WellKnownOIDCAppend != 0 && p == s.issPath+"/.well-known/openid-configuration" {
		return true
	}
	return false
}

func (s *Server) serveASMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	md := map[string]any{
		"issuer":                                s.Issuer,
		"authorization_endpoint":                s.AuthorizationEndpoint,
		"token_endpoint":                        s.TokenEndpoint,
		"jwks_uri":                              s.Issuer + "/jwks",
		"scopes_supported":                      s.opt.ScopesSupported,
		"response_types_supported":              []string{"code"},
		"response_modes_supported":              []string{"query"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported": []string{"none", "client_secret_post", "client_secret_basic"},
		// MCP 2025-11-25 "Authorization Code Protection": clients MUST refuse a
		// server whose metadata lacks it, OIDC discovery included.
		"code_challenge_methods_supported": []string{"S256"},
		// OIDC Discovery §3 requires these two; the fixture issues no ID tokens.
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	}
	if s.opt.DCR {
		md["registration_endpoint"] = s.RegistrationEndpoint
	}
	if s.opt.CIMD {
		md["client_id_metadata_document_supported"] = true
	}
	if !s.opt.NoIss {
		md["authorization_response_iss_parameter_supported"] = true
	}
	s.mu.Lock()
	s.counts.ASMetaGet++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, md)
}

// serveAuthorize auto-consents after strict validation (OAuth 2.1 §4.1.1, RFC 7636
// §4.3, RFC 8707 §2, MCP "Open Redirection": exact redirect URI).
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.counts.Authorizes++
	s.mu.Unlock()
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		s.violation("authorize: unparsable request: %v", err)
		http.Error(w, "invalid_request: unparsable", http.StatusBadRequest)
		return
	}
	q := r.Form
	resources := q["resource"]
	s.mu.Lock()
	if len(resources) == 0 {
		s.seen = append(s.seen, "")
	}
	s.seen = append(s.seen, resources...)
	s.mu.Unlock()

	// Until client_id and redirect_uri are known good, errors go to the user
	// agent, never to a redirect (OAuth 2.1 §4.1.2.1).
	clientID := q.Get("client_id")
	if clientID == "" {
		s.refuseAuthorize(w, "authorize: no client_id")
		return
	}
	c, problem := s.authorizeClient(r, clientID)
	if c == nil {
		s.refuseAuthorize(w, "authorize: client_id %q: %s", clientID, problem)
		return
	}
	redirectURI := q.Get("redirect_uri")
	if len(q["redirect_uri"]) != 1 || redirectURI == "" {
		s.refuseAuthorize(w, "authorize: client %q sent %d redirect_uri parameters; the fixture wants exactly one", clientID, len(q["redirect_uri"]))
		return
	}
	if !s.redirectAllowed(c, redirectURI) {
		s.refuseAuthorize(w, "authorize: redirect_uri %q is not registered for client %q (exact match required)", redirectURI, clientID)
		return
	}

	fail := func(code, format string, args ...any) {
		s.violation(format, args...)
		s.redirectError(w, r, redirectURI, q.Get("state"), code, fmt.Sprintf(format, args...))
	}
	for name, vals := range q {
		if len(vals) > 1 && name != "resource" {
			fail("invalid_request", "authorize: parameter %s sent %d times", name, len(vals))
			return
		}
	}
	if rt := q.Get("response_type"); rt != "code" {
		fail("unsupported_response_type", "authorize: response_type %q, want code", rt)
		return
	}
	if m := q.Get("code_challenge_method"); m != "S256" {
		fail("invalid_request", "authorize: code_challenge_method %q, want S256", m)
		return
	}
	challenge := q.Get("code_challenge")
	if !validChallenge(challenge) {
		fail("invalid_request", "authorize: code_challenge %q is not a base64url SHA-256 (43 characters)", challenge)
		return
	}
	state := q.Get("state")
	if state == "" {
		fail("invalid_request", "authorize: no state (the fixture requires it)")
		return
	}
	if len(resources) != 1 {
		fail("invalid_target", "authorize: %d resource parameters, want exactly one: %s", len(resources), s.MCPURL)
		return
	}
	if canonicalResource(resources[0]) != s.resource {
		fail("invalid_target", "authorize: resource %q is not the MCP server's canonical URI %q", resources[0], s.MCPURL)
		return
	}
	scope := splitScope(q.Get("scope"))
	if bad := s.unknownScopes(scope); len(bad) > 0 {
		fail("invalid_scope", "authorize: unknown scopes %q", bad)
		return
	}
	if len(scope) == 0 {
		// RFC 6749 §3.3: the server's default when the client asks for none.
		scope = slices.Clone(s.opt.ScopesSupported)
	}

	s.mu.Lock()
	code := s.newSecret("code_")
	s.codes[code] = &authCode{
		clientID:    clientID,
		redirectURI: redirectURI,
		challenge:   challenge,
		scope:       scope,
		resource:    resources[0],
		expires:     s.now().Add(codeTTL),
	}
	s.mu.Unlock()
	v := url.Values{"code": {code}, "state": {state}}
	if !s.opt.NoIss {
		v.Set("iss", s.Issuer) // RFC 9207 §2; MCP 2026-07-28 "Authorization Response Validation"
	}
	http.Redirect(w, r, withQuery(redirectURI, v), http.StatusFound)
}

func (s *Server) refuseAuthorize(w http.ResponseWriter, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.violation("%s", msg)
	http.Error(w, "invalid_request: "+msg, http.StatusBadRequest)
}

func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, redirectURI, state, code, desc string) {
	v := url.Values{"error": {code}, "error_description": {desc}}
	if state != "" {
		v.Set("state", state)
	}
	if !s.opt.NoIss {
		v.Set("iss", s.Issuer)
	}
	http.Redirect(w, r, withQuery(redirectURI, v), http.StatusFound)
}

func withQuery(base string, v url.Values) string {
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + v.Encode()
}

// validChallenge: RFC 7636 §4.2, S256 gives BASE64URL(SHA256(verifier)) without
// padding, 43 characters.
func validChallenge(c string) bool {
	if len(c) != 43 {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	return err == nil && len(b) == sha256.Size
}

// validVerifier: RFC 7636 §4.1, 43..128 unreserved characters.
func validVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for _, ch := range v {
		switch {
		case ch >= 'A' && ch <= 'Z', ch >= 'a' && ch <= 'z', ch >= '0' && ch <= '9':
		case ch == '-' || ch == '.' || ch == '_' || ch == '~':
		default:
			return false
		}
	}
	return true
}

func (s *Server) unknownScopes(scope []string) []string {
	known := union(s.opt.ScopesSupported, splitScope(s.opt.ChallengeScope))
	known = union(known, splitScope(s.opt.StepUpScope))
	var bad []string
	for _, sc := range scope {
		if !slices.Contains(known, sc) {
			bad = append(bad, sc)
		}
	}
	return bad
}

// authorizeClient finds the client an authorization request names: registered
// (DCR or pre-registered) or, with CIMD on, a URL client_id whose document is
// fetched (again once its cache lifetime is over).
func (s *Server) authorizeClient(r *http.Request, id string) (*client, string) {
	s.mu.Lock()
	c := s.clients[id]
	fresh := c != nil && (c.kind != "cimd" || s.now().Before(c.cimdExpires))
	s.mu.Unlock()
	if fresh {
		return c, ""
	}
	if !looksLikeURL(id) {
		return nil, "not registered"
	}
	if !s.opt.CIMD {
		return nil, "a URL client_id, but the metadata does not offer client_id_metadata_document_supported (Options.CIMD off)"
	}
	c, problem := s.fetchCIMD(r, id)
	if c == nil {
		return nil, problem
	}
	s.mu.Lock()
	s.clients[id] = c
	s.mu.Unlock()
	return c, ""
}

func looksLikeURL(id string) bool {
	return strings.HasPrefix(id, "https://") || strings.HasPrefix(id, "http://")
}

// redirectAllowed: exact string match with a registered redirect URI (MCP
// 2025-11-25 "Open Redirection"; stricter than OAuth 2.1 §8.4.2's any-port rule
// for loopback, so a client whose redirect URI moves with a busy port is caught).
func (s *Server) redirectAllowed(c *client, uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.pinRedirect && len(c.redirectURIs) == 0 {
		if msg := checkRedirectURI(uri); msg != "" {
			return false
		}
		c.redirectURIs = []string{uri}
	}
	return slices.Contains(c.redirectURIs, uri)
}

// checkRedirectURI: MCP "Communication Security": every redirect URI is localhost
// or https; OAuth 2.1 §2.3: absolute, no fragment.
func checkRedirectURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return "not an absolute URL"
	}
	if u.Fragment != "" || strings.Contains(uri, "#") {
		return "has a fragment"
	}
	switch u.Scheme {
	case "https":
		return ""
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return ""
		}
		return "http but not loopback"
	}
	return "scheme " + u.Scheme + " is neither https nor loopback http"
}

// serveToken is the token endpoint (OAuth 2.1 §3.2, §4.1.3, §4.3; RFC 7636 §4.6;
// RFC 8707 §2.2).
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if d := s.opt.TokenDelay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/x-www-form-urlencoded" {
		s.violation("token: Content-Type %q, want application/x-www-form-urlencoded", r.Header.Get("Content-Type"))
		tokenError(w, http.StatusBadRequest, "invalid_request", "form body required")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.violation("token: unparsable form: %v", err)
		tokenError(w, http.StatusBadRequest, "invalid_request", "unparsable form")
		return
	}
	if len(r.URL.Query()) > 0 {
		s.violation("token: parameters in the URL query (%d), which may carry secrets into logs", len(r.URL.Query()))
	}
	f := r.PostForm
	gt := f.Get("grant_type")
	s.mu.Lock()
	switch gt {
	case "authorization_code":
		s.counts.CodeExchanges++
	case "refresh_token":
		s.counts.Refreshes++
	}
	resources := f["resource"]
	if gt == "authorization_code" || gt == "refresh_token" {
		if len(resources) == 0 {
			s.seen = append(s.seen, "")
		}
		s.seen = append(s.seen, resources...)
	}
	s.mu.Unlock()

	refuse := func(status int, code, format string, args ...any) {
		s.mu.Lock()
		switch gt {
		case "authorization_code":
			s.counts.CodesRefused++
		case "refresh_token":
			s.counts.RefreshRefused++
		}
		s.mu.Unlock()
		tokenError(w, status, code, fmt.Sprintf(format, args...))
	}
	violate := func(status int, code, format string, args ...any) {
		s.violation(format, args...)
		refuse(status, code, format, args...)
	}
	for name, vals := range f {
		if len(vals) > 1 && name != "resource" {
			violate(http.StatusBadRequest, "invalid_request", "token: parameter %s sent %d times", name, len(vals))
			return
		}
	}
	if gt != "authorization_code" && gt != "refresh_token" {
		violate(http.StatusBadRequest, "unsupported_grant_type", "token: grant_type %q", gt)
		return
	}
	c, method, problem := s.authenticateClient(r)
	if c == nil {
		s.violation("token (%s): client authentication failed: %s", gt, problem)
		if method == "client_secret_basic" {
			w.Header().Set("WWW-Authenticate", `Basic realm="oauthtest"`)
		}
		refuse(http.StatusUnauthorized, "invalid_client", "%s", problem)
		return
	}
	if len(resources) != 1 {
		violate(http.StatusBadRequest, "invalid_target", "token (%s): %d resource parameters, want exactly one: %s", gt, len(resources), s.MCPURL)
		return
	}
	if canonicalResource(resources[0]) != s.resource {
		violate(http.StatusBadRequest, "invalid_target", "token (%s): resource %q is not the MCP server's canonical URI %q", gt, resources[0], s.MCPURL)
		return
	}
	now := s.now()

	s.mu.Lock()
	defer s.mu.Unlock()
	// The rest runs under the lock: concurrent exchanges of one code, or refreshes
	// of one refresh token, must see each other.
	violateLocked := func(status int, code, format string, args ...any) {
		s.errs = append(s.errs, fmt.Sprintf(format, args...))
		refuseLocked(s, gt, w, status, code, fmt.Sprintf(format, args...))
	}
	var g *grant
	var scope []string
	switch gt {
	case "authorization_code":
		code := f.Get("code")
		ac := s.codes[code]
		switch {
		case ac == nil:
			violateLocked(http.StatusBadRequest, "invalid_grant", "token: unknown authorization code")
			return
		case ac.used && ac.grant == nil:
			// Revoked (Revoke) before it was exchanged: not the client's fault.
			refuseLocked(s, gt, w, http.StatusBadRequest, "invalid_grant", "authorization code revoked")
			return
		case ac.used:
			// OAuth 2.1 §4.1.3: a replayed code SHOULD revoke what it issued.
			ac.grant.revoked = true
			violateLocked(http.StatusBadRequest, "invalid_grant", "token: authorization code used twice (its grant is now revoked)")
			return
		case now.After(ac.expires):
			violateLocked(http.StatusBadRequest, "invalid_grant", "token: authorization code expired")
			return
		case ac.clientID != c.id:
			violateLocked(http.StatusBadRequest, "invalid_grant", "token: code issued to %q, presented by %q", ac.clientID, c.id)
			return
		}
		if ru, ok := f["redirect_uri"]; ok && ru[0] != ac.redirectURI {
			violateLocked(http.StatusBadRequest, "invalid_grant", "token: redirect_uri %q differs from the authorization request's %q", ru[0], ac.redirectURI)
			return
		}
		verifier := f.Get("code_verifier")
		if !validVerifier(verifier) {
			violateLocked(http.StatusBadRequest, "invalid_grant", "token: code_verifier missing or malformed (RFC 7636 §4.1: 43-128 unreserved characters)")
			return
		}
		sum := sha256.Sum256([]byte(verifier))
		if base64.RawURLEncoding.EncodeToString(sum[:]) != ac.challenge {
			violateLocked(http.StatusBadRequest, "invalid_grant", "token: PKCE verification failed: S256(code_verifier) != code_challenge")
			return
		}
		if canonicalResource(ac.resource) != canonicalResource(resources[0]) {
			violateLocked(http.StatusBadRequest, "invalid_target", "token: resource %q differs from the authorization request's %q", resources[0], ac.resource)
			return
		}
		ac.used = true
		g = &grant{clientID: c.id, scope: ac.scope, resource: s.MCPURL}
		ac.grant = g
		s.grants = append(s.grants, g)
		scope = ac.scope
	case "refresh_token":
		rt := s.refresh[f.Get("refresh_token")]
		switch {
		case rt == nil:
			violateLocked(http.StatusBadRequest, "invalid_grant", "token: unknown refresh token")
			return
		case rt.grant.clientID != c.id:
			violateLocked(http.StatusBadRequest, "invalid_grant", "token: refresh token of %q presented by %q", rt.grant.clientID, c.id)
			return
		case rt.grant.revoked:
			refuseLocked(s, gt, w, http.StatusBadRequest, "invalid_grant", "grant revoked")
			return
		case rt.rotated:
			if s.opt.ReuseRevokesGrant {
				rt.grant.revoked = true
			}
			violateLocked(http.StatusBadRequest, "invalid_grant", "token: refresh token used again after rotation replaced it")
			return
		}
		g = rt.grant
		scope = g.scope
		if sc, ok := f["scope"]; ok {
			want := splitScope(sc[0])
			if !hasAll(g.scope, want) {
				violateLocked(http.StatusBadRequest, "invalid_scope", "token: refresh asks for %q beyond the grant's %q", want, g.scope)
				return
			}
			scope = want
		}
		if s.opt.RotateRefresh {
			rt.rotated = true
		}
	}

	at := s.newSecret("at_")
	s.access[at] = &accessToken{grant: g, scope: scope, resource: s.MCPURL, expires: now.Add(s.opt.AccessTTL)}
	resp := map[string]any{
		"access_token": at,
		"token_type":   "Bearer",
		"expires_in":   int(s.opt.AccessTTL / time.Second),
		"scope":        strings.Join(scope, " "),
	}
	if gt == "authorization_code" || s.opt.RotateRefresh {
		rt := s.newSecret("rt_")
		s.refresh[rt] = &refreshToken{grant: g}
		resp["refresh_token"] = rt
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, resp)
}

func refuseLocked(s *Server, gt string, w http.ResponseWriter, status int, code, desc string) {
	switch gt {
	case "authorization_code":
		s.counts.CodesRefused++
	case "refresh_token":
		s.counts.RefreshRefused++
	}
	tokenError(w, status, code, desc)
}

// authenticateClient: OAuth 2.1 §2.4 / RFC 6749 §2.3.1 (client_secret_basic with
// form-encoded id and secret, client_secret_post), public clients send client_id
// only. A client uses the method it registered (RFC 7591 §2
// token_endpoint_auth_method); pre-registered confidential clients may use either.
func (s *Server) authenticateClient(r *http.Request) (*client, string, string) {
	f := r.PostForm
	var id, secret, method string
	if user, pass, ok := r.BasicAuth(); ok {
		method = "client_secret_basic"
		var err1, err2 error
		id, err1 = url.QueryUnescape(user)
		secret, err2 = url.QueryUnescape(pass)
		if err1 != nil || err2 != nil {
			return nil, method, "Basic credentials are not form-encoded (RFC 6749 §2.3.1)"
		}
		if fid := f.Get("client_id"); fid != "" && fid != id {
			return nil, method, fmt.Sprintf("client_id %q in the form differs from the Basic user %q", fid, id)
		}
		if f.Has("client_secret") {
			return nil, method, "client_secret sent in both the Authorization header and the form"
		}
	} else {
		id = f.Get("client_id")
		if f.Has("client_secret") {
			method = "client_secret_post"
			secret = f.Get("client_secret")
		} else {
			method = "none"
		}
	}
	if id == "" {
		return nil, method, "no client_id"
	}
	s.mu.Lock()
	c := s.clients[id]
	s.mu.Unlock()
	if c == nil {
		return nil, method, fmt.Sprintf("unknown client %q", id)
	}
	if !slices.Contains(c.methods, method) {
		return nil, method, fmt.Sprintf("client %q authenticated with %s; it may use %v", id, method, c.methods)
	}
	if c.secret != "" && subtle.ConstantTimeCompare([]byte(secret), []byte(c.secret)) != 1 {
		return nil, method, fmt.Sprintf("wrong client_secret for %q", id)
	}
	return c, method, ""
}

// serveRegister is RFC 7591 dynamic client registration.
func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	regError := func(code, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		s.violation("register: %s", msg)
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": msg})
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" {
		regError("invalid_client_metadata", "Content-Type %q, want application/json (RFC 7591 §3.1)", r.Header.Get("Content-Type"))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		regError("invalid_client_metadata", "reading the body: %v", err)
		return
	}
	var md map[string]any
	if err := json.Unmarshal(body, &md); err != nil {
		regError("invalid_client_metadata", "body is not a JSON object: %v", err)
		return
	}
	uris, ok := stringList(md["redirect_uris"])
	if !ok || len(uris) == 0 {
		regError("invalid_redirect_uri", "redirect_uris missing or not a list of strings")
		return
	}
	allLoopback := true
	for _, u := range uris {
		if msg := checkRedirectURI(u); msg != "" {
			regError("invalid_redirect_uri", "redirect URI %q: %s", u, msg)
			return
		}
		pu, _ := url.Parse(u)
		allLoopback = allLoopback && pu.Scheme == "http"
	}
	method := "client_secret_basic" // RFC 7591 §2: the default when omitted
	if v, present := md["token_endpoint_auth_method"]; present {
		m, isString := v.(string)
		if !isString {
			regError("invalid_client_metadata", "token_endpoint_auth_method is not a string")
			return
		}
		method = m
	}
	if method != "none" && method != "client_secret_post" && method != "client_secret_basic" {
		regError("invalid_client_metadata", "token_endpoint_auth_method %q not supported", method)
		return
	}
	grantTypes := []string{"authorization_code"} // RFC 7591 §2 default
	if v, present := md["grant_types"]; present {
		if grantTypes, ok = stringList(v); !ok {
			regError("invalid_client_metadata", "grant_types is not a list of strings")
			return
		}
	}
	if !slices.Contains(grantTypes, "authorization_code") {
		regError("invalid_client_metadata", "grant_types %q lacks authorization_code", grantTypes)
		return
	}
	for _, g := range grantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			regError("invalid_client_metadata", "grant_type %q not supported", g)
			return
		}
	}
	if v, present := md["response_types"]; present {
		rts, isList := stringList(v)
		if !isList || !slices.Equal(rts, []string{"code"}) {
			regError("invalid_client_metadata", "response_types %v, want [code]", v)
			return
		}
	}
	// MCP 2026-07-28 "Application Type and Redirect URI Constraints": clients MUST
	// send application_type; an OIDC server refuses loopback redirect URIs for "web".
	switch at, _ := md["application_type"].(string); {
	case at == "":
		s.violation("register: no application_type (MCP 2026-07-28 client registration: clients MUST specify it; \"native\" for loopback redirect URIs)")
	case at == "web" && allLoopback:
		regError("invalid_redirect_uri", "application_type web with loopback redirect URIs (OIDC Registration §2); use native")
		return
	case at != "web" && at != "native":
		regError("invalid_client_metadata", "application_type %q", at)
		return
	}
	if sc, present := md["scope"]; present {
		str, isString := sc.(string)
		if !isString {
			regError("invalid_client_metadata", "scope is not a string")
			return
		}
		if bad := s.unknownScopes(splitScope(str)); len(bad) > 0 {
			regError("invalid_client_metadata", "unknown scopes %q", bad)
			return
		}
	}

	s.mu.Lock()
	c := &client{id: s.newSecret("dcr_"), methods: []string{method}, redirectURIs: uris, kind: "dcr"}
	// client_ids are not secrets; keep the list to what is.
	s.secrets = s.secrets[:len(s.secrets)-1]
	if method != "none" {
		c.secret = s.newSecret("cs_")
	}
	s.clients[c.id] = c
	s.counts.Registrations++
	s.mu.Unlock()

	md["client_id"] = c.id
	md["client_id_issued_at"] = time.Now().Unix()
	md["token_endpoint_auth_method"] = method
	md["grant_types"] = grantTypes
	if c.secret != "" {
		md["client_secret"] = c.secret
		md["client_secret_expires_at"] = 0
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, md)
}

// fetchCIMD fetches and validates a Client ID Metadata Document
// (draft-ietf-oauth-client-id-metadata-document; MCP 2025-11-25 "Client ID
// Metadata Documents", "For Authorization Servers").
func (s *Server) fetchCIMD(r *http.Request, id string) (*client, string) {
	u, err := url.Parse(id)
	switch {
	case err != nil:
		return nil, "not a URL"
	case u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname())):
		// The draft wants https; the fixture also takes loopback http so tests
		// need no certificates.
		return nil, "CIMD client_id must be https (or http on loopback, in tests)"
	case u.User != nil:
		return nil, "CIMD client_id has credentials"
	case u.Fragment != "" || strings.Contains(id, "#"):
		return nil, "CIMD client_id has a fragment"
	case u.Path == "" || u.Path == "/":
		return nil, "CIMD client_id has no path component"
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return nil, "CIMD client_id has a dot segment"
		}
	}
	s.mu.Lock()
	s.counts.CIMDFetches++
	s.mu.Unlock()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, id, nil)
	if err != nil {
		return nil, fmt.Sprintf("building the CIMD request: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.fetcher.Do(req)
	if err != nil {
		return nil, fmt.Sprintf("fetching the CIMD document: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Sprintf("fetching the CIMD document: status %d (redirects are not followed)", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Sprintf("reading the CIMD document: %v", err)
	}
	var md map[string]any
	if err := json.Unmarshal(body, &md); err != nil {
		return nil, fmt.Sprintf("CIMD document is not a JSON object: %v", err)
	}
	if got, _ := md["client_id"].(string); got != id {
		return nil, fmt.Sprintf("CIMD document's client_id %q is not its URL %q (must match exactly)", got, id)
	}
	if name, _ := md["client_name"].(string); name == "" {
		return nil, "CIMD document has no client_name (MCP: client_id, client_name, redirect_uris are required)"
	}
	uris, ok := stringList(md["redirect_uris"])
	if !ok || len(uris) == 0 {
		return nil, "CIMD document has no redirect_uris"
	}
	for _, ru := range uris {
		if msg := checkRedirectURI(ru); msg != "" {
			return nil, fmt.Sprintf("CIMD redirect URI %q: %s", ru, msg)
		}
	}
	if _, has := md["client_secret"]; has {
		return nil, "CIMD document carries a client_secret (the draft forbids shared secrets)"
	}
	if m, present := md["token_endpoint_auth_method"]; present && m != "none" {
		return nil, fmt.Sprintf("CIMD token_endpoint_auth_method %v: the fixture supports only none", m)
	}
	c := &client{id: id, methods: []string{"none"}, redirectURIs: uris, kind: "cimd", cimdExpires: s.now().Add(cacheLifetime(resp.Header))}
	return c, ""
}

// cacheLifetime reads Cache-Control max-age (MCP: SHOULD cache respecting HTTP
// cache headers); without one the document is fetched again at every authorization.
func cacheLifetime(h http.Header) time.Duration {
	for _, d := range strings.Split(h.Get("Cache-Control"), ",") {
		d = strings.TrimSpace(d)
		if d == "no-store" || d == "no-cache" {
			return 0
		}
		if v, ok := strings.CutPrefix(d, "max-age="); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				// A day is the longest the fixture keeps a document; a larger
				// max-age times time.Second would overflow into a negative
				// lifetime (found by FuzzCacheLifetime).
				return min(time.Duration(min(n, 86400))*time.Second, 24*time.Hour)
			}
		}
	}
	return 0
}

func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		str, ok := x.(string)
		if !ok {
			return nil, false
		}
		out = append(out, str)
	}
	return out, true
}

func tokenError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
