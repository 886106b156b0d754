package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/bir-dev/bir-proxy/internal/backoff"
	"github.com/bir-dev/bir-proxy/redact"
)

// ResourceMetadata is what the client reads of an RFC 9728 protected resource
// metadata document.
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported,omitempty"`
}

// ServerMetadata is what the client reads of an RFC 8414 (or OpenID Connect
// Discovery) authorization server metadata document. It is kept in the store, so a
// refresh needs no discovery.
type ServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint,omitempty"`
	ScopesSupported                   []string `json:"scopes_supported,omitempty"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported,omitempty"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported,omitempty"`
	// RFC 9207: the authorization response names its issuer; the client checks it.
	IssParameterSupported bool `json:"authorization_response_iss_parameter_supported,omitempty"`
}

// notAURL is the error of a server URL url.Parse refused, with nothing of the URL:
// url.Parse's error quotes it whole, and its detail a piece of it ("invalid port
// \":pa\" after host"), which with a password holding a '/', '?' or '#' unescaped is
// a password, whole or in part, on stderr.
func notAURL(raw string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := "the server URL is not a URL: " + hideQuoted(err.Error())
	if strings.Contains(raw, "@") {
		msg += " (a password in it must have its '/', '?', '#' and '@' percent-encoded)"
	}
	return errors.New(msg)
}

// hideQuoted is msg with what it quotes shown as "xxxxx".
func hideQuoted(msg string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(msg, '"')
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		b.WriteString(msg[:i])
		b.WriteString(`"xxxxx"`)
		j := i + 1 // the closing quote's index (Go quoting: \" is no end)
		for ; j < len(msg) && msg[j] != '"'; j++ {
			if msg[j] == '\\' {
				j++
			}
		}
		if j >= len(msg) {
			return b.String()
		}
		msg = msg[j+1:]
	}
}

// metadataCap bounds a metadata document: a server cannot make the client read an
// endless body.
const metadataCap = 1 << 20

// requestTimeout bounds each request of discovery, registration and the token
// endpoint: an authorization server that accepts and never answers must not hold a
// proxy's call past its bound.
const requestTimeout = 30 * time.Second

// CanonicalURI is the canonical form of an MCP server URL used as the RFC 8707
// `resource` and as the token store's key: scheme and host lower-cased, the default
// port and the fragment dropped, a lone "/" path dropped (the spec's examples use the
// form without it); the path is kept as it is, and so is the query but for its
// secret parameters (`api_key=`, `token=`, as redact names them), which are dropped:
// RFC 8707 says a resource SHOULD NOT have a query, and this one travels to the
// authorization server (maybe a third party) and into the sign-in URL printed on
// stderr. A query that tells tenants apart stays, so their grants stay apart.
func CanonicalURI(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", notAURL(raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("the server URL is not an http:// or https:// URL")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	u.Host = host
	if port != "" {
		u.Host += ":" + port
	}
	u.Fragment, u.RawFragment, u.User = "", "", nil
	u.RawQuery, u.ForceQuery = withoutSecretParams(u.RawQuery), false
	if u.Path == "/" && u.RawQuery == "" {
		u.Path, u.RawPath = "", ""
	}
	return u.String(), nil
}

// withoutSecretParams is the query q without the parameters whose names redact takes
// for secrets, the others kept in their order and spelling.
func withoutSecretParams(q string) string {
	if q == "" {
		return ""
	}
	kept := make([]string, 0, strings.Count(q, "&")+1)
	for _, p := range strings.Split(q, "&") {
		name, _, _ := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if p != "" && !redact.IsSecretParam(name) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "&")
}

// protectedResourceURLs are where the protected resource metadata of serverURL may
// be, in the spec's order: the URL the 401 named, else the well-known URI with the
// server's path inserted, then at the root (2025-11-25 "Protected Resource Metadata
// Discovery Requirements").
func protectedResourceURLs(serverURL, fromHeader string) ([]string, error) {
	if fromHeader != "" {
		return []string{fromHeader}, nil
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, err
	}
	origin := u.Scheme + "://" + u.Host
	const wk = "/.well-known/oauth-protected-resource"
	var out []string
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		out = append(out, origin+wk+p)
	}
	return append(out, origin+wk), nil
}

// serverMetadataURLs are where an issuer's metadata may be, in the spec's order
// (2025-11-25 "Authorization Server Metadata Discovery"): for an issuer with a path,
// RFC 8414 with the path inserted, OpenID Connect with the path inserted, OpenID
// Connect with the path appended; for one without, RFC 8414 then OpenID Connect.
func serverMetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("the authorization server %q is not a URL: %w", issuer, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the authorization server %q is not an http:// or https:// URL", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}, nil
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + p,
		origin + "/.well-known/openid-configuration" + p,
		origin + p + "/.well-known/openid-configuration",
	}, nil
}

// errNotFound is a metadata document that is not there (a 4xx): try the next place.
var errNotFound = errors.New("not found")

// discoveryPace paces a metadata GET's tries: 250 ms doubling to 2 s, full jitter, a
// Retry-After honoured up to 5 s. All of a GET's tries and waits are within one
// requestTimeout.
var discoveryPace = backoff.Policy{Base: 250 * time.Millisecond, Cap: 2 * time.Second, Jitter: backoff.Full, MaxRetryAfter: 5 * time.Second}

// discoveryRetries is how many times a metadata GET is tried again after a
// transient failure: 429, 502, 503, 504, or no answer (a refused or reset
// connection; not a redirect loop, a bad certificate or the timeout).
const discoveryRetries = 2

// retryingGET is hc trying a metadata GET again (a read of a public document: safe to
// repeat), its own log off: the error the last try met is what the caller says.
func retryingGET(hc *http.Client) *retryablehttp.Client {
	return &retryablehttp.Client{
		HTTPClient:   hc,
		RetryMax:     discoveryRetries,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
		CheckRetry: func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			if err != nil {
				// false for the context's end and for what no retry mends
				return retryablehttp.DefaultRetryPolicy(ctx, nil, err)
			}
			switch resp.StatusCode {
			case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
				return true, nil
			}
			return false, nil
		},
		Backoff: func(_, _ time.Duration, attempt int, resp *http.Response) time.Duration {
			return discoveryPace.Next(attempt, backoff.FromResponse(resp))
		},
	}
}

// getJSON GETs a JSON document into v.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	// The spec has the client send the protocol version during discovery; this is
	// the newest one the proxy's transport speaks.
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := retryingGET(hc).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 4 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return errNotFound
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, metadataCap+1))
	if err != nil {
		return err
	}
	if len(body) > metadataCap {
		return fmt.Errorf("the document is over %d bytes", metadataCap)
	}
	if err := decodePeerJSON(body, v); err != nil {
		return fmt.Errorf("not a JSON document: %w", err)
	}
	return nil
}

// discoverResource finds the protected resource metadata of serverURL. It returns
// nil, nil when the server publishes none (an older server: its origin is then taken
// as the authorization server, as the 2025-03-26 spec had it).
func discoverResource(ctx context.Context, hc *http.Client, serverURL, fromHeader string) (*ResourceMetadata, error) {
	urls, err := protectedResourceURLs(serverURL, fromHeader)
	if err != nil {
		return nil, err
	}
	for _, u := range urls {
		var m ResourceMetadata
		err := getJSON(ctx, hc, u, &m)
		if errors.Is(err, errNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the protected resource metadata %s: %w", u, err)
		}
		if err := checkResource(serverURL, m.Resource); err != nil {
			return nil, fmt.Errorf("the protected resource metadata %s: %w", u, err)
		}
		if len(m.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("the protected resource metadata %s names no authorization server", u)
		}
		return &m, nil
	}
	return nil, nil
}

// checkResource refuses metadata for another resource (RFC 9728 §3.3: a document that
// names another resource must not be used). The document's resource may be the
// server URL or a prefix of it on the same origin (the root form of the well-known
// URI describes the whole origin).
func checkResource(serverURL, resource string) error {
	if resource == "" {
		return nil // older servers leave it out; the URL we asked is what it describes
	}
	s, err := CanonicalURI(serverURL)
	if err != nil {
		return err
	}
	r, err := CanonicalURI(resource)
	if err != nil {
		return fmt.Errorf("its resource %q is not a URL", resource)
	}
	if s == r || strings.HasPrefix(s, strings.TrimSuffix(r, "/")+"/") {
		return nil
	}
	return fmt.Errorf("it describes %s, not %s", redact.URL(r), redact.URL(s))
}

// secureURL refuses an authorization server URL that is not https, except on a
// loopback host (local servers and tests): the spec requires TLS for every
// authorization server endpoint, which carries codes, tokens and client secrets.
func secureURL(what, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("the %s %q is not a URL", what, raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		h := u.Hostname()
		if h == "localhost" || strings.HasSuffix(h, ".localhost") {
			return nil
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("the %s %s is not https: refusing to send credentials to it", what, raw)
}

// discoverServer reads the metadata of the authorization server issuer, trying the
// spec's places in order, and checks it is usable: it names itself (RFC 8414 §3.3),
// has the endpoints the flow needs, and offers PKCE S256 (the spec has a client refuse
// an authorization server that does not say it does).
func discoverServer(ctx context.Context, hc *http.Client, issuer string) (*ServerMetadata, error) {
	if err := secureURL("authorization server", issuer); err != nil {
		return nil, err
	}
	urls, err := serverMetadataURLs(issuer)
	if err != nil {
		return nil, err
	}
	for _, u := range urls {
		var m ServerMetadata
		err := getJSON(ctx, hc, u, &m)
		if errors.Is(err, errNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the authorization server metadata %s: %w", u, err)
		}
		if strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			return nil, fmt.Errorf("the authorization server metadata %s names issuer %q, not %q", u, m.Issuer, issuer)
		}
		if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
			return nil, fmt.Errorf("the authorization server metadata %s has no authorization or token endpoint", u)
		}
		for what, e := range map[string]string{"authorization endpoint": m.AuthorizationEndpoint, "token endpoint": m.TokenEndpoint, "registration endpoint": m.RegistrationEndpoint} {
			if e == "" {
				continue
			}
			if err := secureURL(what, e); err != nil {
				return nil, err
			}
		}
		s256 := false
		for _, c := range m.CodeChallengeMethodsSupported {
			s256 = s256 || c == "S256"
		}
		if !s256 {
			return nil, fmt.Errorf("the authorization server %s does not offer PKCE with S256 (code_challenge_methods_supported): refusing to sign in without it", issuer)
		}
		return &m, nil
	}
	return nil, fmt.Errorf("the authorization server %s publishes no metadata (tried %s)", issuer, strings.Join(urls, ", "))
}
