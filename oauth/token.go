package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/redact"
)

// tokenError is an error answer of the token endpoint (RFC 6749 §5.2).
type tokenError struct {
	Status      int
	Code        string // invalid_grant, invalid_client, ...
	Description string
}

func (e *tokenError) Error() string {
	s := fmt.Sprintf("the authorization server refused (HTTP %d", e.Status)
	if e.Code != "" {
		s += ", " + e.Code
	}
	s += ")"
	if e.Description != "" && len(e.Description) < 300 {
		s += ": " + e.Description
	}
	return s
}

// invalidGrant reports whether err says the grant itself is gone (revoked, expired,
// already used): signing in again is the only way on.
func invalidGrant(err error) bool {
	var te *tokenError
	return errors.As(err, &te) && (te.Code == "invalid_grant" || te.Code == "invalid_client" || te.Code == "unauthorized_client")
}

// forgotClient reports whether err says the server does not know (or no longer
// accepts) the client (RFC 6749 §5.2 invalid_client): its registration is dead.
// unauthorized_client is not: the client is known, only not allowed that grant.
func forgotClient(err error) bool {
	var te *tokenError
	return errors.As(err, &te) && te.Code == "invalid_client"
}

// tokenRequest POSTs a token request (RFC 6749 §4.1.3, §6) with the client's
// authentication, and reads the answer into a Token. old is the grant being
// refreshed: its refresh token is kept when the server sends no new one.
func tokenRequest(ctx context.Context, hc *http.Client, as *ServerMetadata, cl *ClientInfo, form url.Values, old *Token, asked []string) (*Token, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	switch cl.AuthMethod {
	case "client_secret_post":
		form.Set("client_id", cl.ID)
		form.Set("client_secret", cl.Secret)
	case "client_secret_basic":
	default:
		form.Set("client_id", cl.ID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, as.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if cl.AuthMethod == "client_secret_basic" {
		// RFC 6749 §2.3.1: both parts form-encoded before the Basic encoding.
		req.SetBasicAuth(url.QueryEscape(cl.ID), url.QueryEscape(cl.Secret))
	}
	start := time.Now()
	// One try, not go-retryablehttp: a code or a rotated refresh token is spent by the first.
	resp, err := noRedirects(hc).Do(req)
	if err != nil {
		return nil, fmt.Errorf("the token endpoint: %w", urlErr(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, metadataCap))
	if err != nil {
		return nil, fmt.Errorf("the token endpoint: %w", urlErr(err))
	}
	if resp.StatusCode != http.StatusOK {
		te := &tokenError{Status: resp.StatusCode}
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if decodePeerJSON(body, &e) == nil {
			te.Code, te.Description = e.Error, scrubSecrets(e.Description, form, cl.Secret)
		}
		return nil, te
	}
	return readTokenAnswer(body, start, old, asked)
}

// readTokenAnswer reads a token endpoint's 200 answer (RFC 6749 §5.1) into a Token,
// issued at start. It refuses a token that could not be sent as it is: the access
// token goes into every request's Authorization header, and one with CR/LF (or
// anything outside RFC 6750's b64token) would, stored, fail every request with
// "invalid header field value", in later runs too, without a new sign-in ever
// starting.
func readTokenAnswer(body []byte, start time.Time, old *Token, asked []string) (*Token, error) {
	var tr struct {
		AccessToken  string          `json:"access_token"`
		TokenType    string          `json:"token_type"`
		ExpiresIn    json.RawMessage `json:"expires_in"`
		RefreshToken string          `json:"refresh_token"`
		Scope        string          `json:"scope"`
	}
	if err := decodePeerJSON(body, &tr); err != nil {
		return nil, fmt.Errorf("the token endpoint's answer is not a token response: %w", err)
	}
	if tr.AccessToken == "" {
		return nil, errors.New("the token endpoint's answer holds no access token")
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") {
		return nil, fmt.Errorf("the token endpoint gave a %q token; only Bearer tokens are supported", tr.TokenType)
	}
	// Never quoted: it is a secret, whatever its bytes.
	if !b64token(tr.AccessToken) {
		return nil, errors.New("the token endpoint gave an access token that is not a Bearer token (RFC 6750 b64token: letters, digits, -._~+/ then = padding; this one has other characters, CR/LF or spaces): it cannot go in an Authorization header, so it is not stored")
	}
	if tr.RefreshToken != "" && !vschars(tr.RefreshToken) {
		return nil, errors.New("the token endpoint gave a refresh token with characters RFC 6749 does not allow (control characters such as CR/LF, or non-ASCII): it is not stored")
	}
	t := &Token{AccessToken: tr.AccessToken, RefreshToken: tr.RefreshToken, Scope: tr.Scope, Issued: start.UTC()}
	var secs float64
	if len(tr.ExpiresIn) > 0 {
		// Some servers send the number as a string.
		s := strings.Trim(string(tr.ExpiresIn), `"`)
		fmt.Sscan(s, &secs)
	}
	if secs > 0 {
		t.Expiry = start.Add(time.Duration(secs * float64(time.Second))).UTC()
	}
	if t.RefreshToken == "" && old != nil {
		t.RefreshToken = old.RefreshToken // RFC 6749 §6: no new one, the old one stays
	}
	if t.Scope == "" {
		if old != nil && old.Scope != "" {
			t.Scope = old.Scope
		} else {
			t.Scope = strings.Join(asked, " ")
		}
	}
	return t, nil
}

// scrubSecrets is a server's error description without what the request sent that
// is secret: a server that echoes its input ("unknown refresh token …") would
// otherwise put it on stderr and in the host's error answer.
func scrubSecrets(desc string, form url.Values, secret string) string {
	for _, k := range []string{"code", "code_verifier", "refresh_token", "client_secret"} {
		for _, v := range form[k] {
			if len(v) >= 4 {
				desc = strings.ReplaceAll(desc, v, redact.Redacted)
			}
		}
	}
	if len(secret) >= 4 {
		desc = strings.ReplaceAll(desc, secret, redact.Redacted)
	}
	return desc
}

// noRedirects is hc not following redirects. A token request's body holds the code
// and its verifier, a refresh token, maybe the client secret; net/http sends that
// body on with a 307 or 308, to wherever it points (plain http, another host): a
// redirect is an answer, and not a token.
func noRedirects(hc *http.Client) *http.Client {
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// urlErr is err without net/url's quoting of the request URL and method.
func urlErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// register makes a client by dynamic client registration (RFC 7591): a public
// client using the authorization code grant, refresh included, with the loopback
// redirect URI.
func register(ctx context.Context, hc *http.Client, as *ServerMetadata, name, redirect string, scopes []string) (*ClientInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	meta := map[string]any{
		"client_name":                name,
		"redirect_uris":              []string{redirect},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
		// The redirect URI is loopback: a native application (MCP 2026-07-28 has the
		// client say so; an OpenID server refuses loopback redirects for "web").
		"application_type": "native",
	}
	if len(scopes) > 0 {
		meta["scope"] = strings.Join(scopes, " ")
	}
	b, _ := json.Marshal(meta)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, as.RegistrationEndpoint, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	// One try, not go-retryablehttp: a registration repeated makes a second client.
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("registering the client: %w", urlErr(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, metadataCap))
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = decodePeerJSON(body, &e)
		why := fmt.Sprintf("HTTP %d", resp.StatusCode)
		if e.Error != "" {
			why += " " + e.Error
		}
		if e.Description != "" && len(e.Description) < 300 {
			why += ": " + e.Description
		}
		return nil, fmt.Errorf("registering the client was refused (%s)", why)
	}
	var r struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AuthMethod   string `json:"token_endpoint_auth_method"`
	}
	if err := decodePeerJSON(body, &r); err != nil || r.ClientID == "" {
		return nil, errors.New("the registration answer holds no client_id")
	}
	ci := &ClientInfo{Kind: KindDynamic, ID: r.ClientID, Secret: r.ClientSecret, AuthMethod: r.AuthMethod,
		RedirectURI: redirect, Issuer: as.Issuer}
	if ci.AuthMethod == "" {
		ci.AuthMethod = "none"
		if ci.Secret != "" {
			ci.AuthMethod = "client_secret_basic" // RFC 7591 §2's default
		}
	}
	return ci, nil
}

// secretMethod is how a pre-registered client with a secret authenticates: Basic,
// the RFC 8414 default, unless the server lists only client_secret_post.
func secretMethod(as *ServerMetadata) string {
	if len(as.TokenEndpointAuthMethodsSupported) == 0 {
		return "client_secret_basic"
	}
	for _, m := range as.TokenEndpointAuthMethodsSupported {
		if m == "client_secret_basic" {
			return m
		}
	}
	for _, m := range as.TokenEndpointAuthMethodsSupported {
		if m == "client_secret_post" {
			return m
		}
	}
	return "client_secret_basic"
}

// b64token reports whether s is an RFC 6750 §2.1 b64token, what a Bearer
// Authorization header carries: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" /
// "/" ) *"=".
func b64token(s string) bool {
	i := 0
	for i < len(s) {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			i++
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for i < len(s) && s[i] == '=' {
		i++
	}
	return i == len(s)
}

// vschars reports whether s is an RFC 6749 (Appendix A.17) refresh token,
// 1*VSCHAR: printable ASCII and space. A refresh token travels in a form body, not a
// header, so it may hold more than a b64token; never a control character.
func vschars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
