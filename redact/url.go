package redact

import (
	"net/url"
	"strings"
)

// IsSecretParam reports whether a URL query parameter of this name carries a secret
// (token, access_token, key, sig, X-Amz-Signature, ...): the rule Text applies to URLs
// in free text.
func IsSecretParam(name string) bool { return isSecretParam(name) }

// URL returns raw with its credentials and query secrets replaced by [REDACTED], for
// showing a server's URL in logs, errors and the recorder registration: the user
// information (a password, or a bare token used as the user name) and the values of
// secret query parameters. The rest stays as written, so the URL is still recognisable.
// Text that does not parse as a URL is redacted as free text.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Text(raw)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Redacted)
		} else {
			u.User = url.User(Redacted)
		}
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			k, _, ok := strings.Cut(p, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			if ok && IsSecretParam(name) {
				parts[i] = k + "=" + Redacted
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = Text(u.Fragment), ""
	}
	// The path may hold a token too (https://host/mcp/sk-...): free-text rules.
	s := u.String()
	s = strings.ReplaceAll(s, url.PathEscape(Redacted), Redacted)
	s = strings.ReplaceAll(s, url.QueryEscape(Redacted), Redacted)
	return Text(s)
}
