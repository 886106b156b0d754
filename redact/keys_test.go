package redact

import "testing"

func TestIsSecretKey(t *testing.T) {
	secret := []string{
		"password", "PASSWORD", "Password", "db.password", "db_password", "dbPassword",
		"passwd", "pwd", "user-pwd", "passphrase", "keyPassphrase",
		"secret", "clientSecret", "client_secret", "CLIENT_SECRET", "client-secret",
		"clientsecret", "ClientSecret", "AWS_SECRET_ACCESS_KEY", "secret key",
		"token", "accessToken", "access_token", "X-Auth-Token", "x-auth-token",
		"XAuthToken", "GITHUB_TOKEN", "refresh-token", "id.token", "token2",
		"Token_Count", // "token" is a whole word: the SPEC's rule redacts it, by design
		"credential", "credentials", "AWS_CREDENTIALS", "gcpCredentials",
		"auth", "Auth", "X-Auth", "authorization", "Authorization", "Proxy-Authorization",
		"cookie", "Cookie", "Set-Cookie", "cookie_jar",
		"signature", "X-Amz-Signature", "oauth_signature",
		"apikey", "apiKey", "APIKey", "api_key", "API_KEY", "x-api-key", "X-Api-Key",
		"x-goog-api-key", "api key", "API.Key",
		"accesskey", "accessKey", "access_key", "AWS_ACCESS_KEY_ID",
		"privatekey", "privateKey", "private_key", "PRIVATE-KEY", "private_key_id",
		"passwords", "secrets", "cookies", "apiKeys",
	}
	for _, k := range secret {
		if !IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = false, want true", k)
		}
	}
	plain := []string{
		"max_tokens", "maxTokens", "MAX_TOKENS", "input_tokens", "tokens",
		"keyword", "keywords", "tokenizer", "Tokenizer", "tokenize",
		"author", "authorId", "authors", "oauth", "authentication",
		"key", "keys", "publicKey", "public_key", "api", "apiVersion", "access",
		"accessLevel", "private", "privacy", "client", "clientId", "client_id",
		"signed", "sig", "cookieless", "passwordless", "secretary", "pass", "pw",
		"path", "line", "query", "body", "headers", "env", "region", "", "_", "--",
		"keyapi", // joins must be in order
		"api_version_key",
	}
	for _, k := range plain {
		if IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = true, want false", k)
		}
	}
}

func TestIsSecretParam(t *testing.T) {
	for _, k := range []string{"key", "KEY", "sig", "pass", "pw", "token", "access_token", "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "apikey", "client_secret"} {
		if !isSecretParam(k) {
			t.Errorf("isSecretParam(%q) = false, want true", k)
		}
	}
	for _, k := range []string{"limit", "q", "page", "keys", "signed", "state", "max_tokens", "redirect_uri"} {
		if isSecretParam(k) {
			t.Errorf("isSecretParam(%q) = true, want false", k)
		}
	}
}

func TestNextWordSplits(t *testing.T) {
	cases := map[string][]string{
		"clientSecret":   {"client", "Secret"},
		"APIKey":         {"API", "Key"},
		"XAuthToken":     {"X", "Auth", "Token"},
		"x-api-key":      {"x", "api", "key"},
		"db.password":    {"db", "password"},
		"CLIENT_SECRET":  {"CLIENT", "SECRET"},
		"token2fa":       {"token", "2", "fa"},
		"  spaced  out ": {"spaced", "out"},
		"héllo_wörld":    {"héllo", "wörld"},
	}
	for in, want := range cases {
		var got []string
		for i := 0; ; {
			s, e := nextWord(in, i)
			if s == e {
				break
			}
			got = append(got, in[s:e])
			i = e
		}
		if len(got) != len(want) {
			t.Errorf("words(%q) = %q, want %q", in, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("words(%q) = %q, want %q", in, got, want)
				break
			}
		}
	}
}
