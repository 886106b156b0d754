package oauthtest

import (
	"net/http"
	"testing"
)

// The fixture's own parsers: what a client sends must never crash the checker.

func FuzzCanonicalResource(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:1/mcp", "HTTP://LOCALHOST/", "https://h#f", "mcp.example.com", "http://[::1]:8/x?y", "%zz", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		c := canonicalResource(u)
		if c == "" && u != "" {
			t.Fatalf("canonicalResource(%q) is empty", u)
		}
		// Canonical forms are fixed points: comparing canonical to canonical is sound.
		if c[0] != 0 {
			if again := canonicalResource(c); again != c {
				t.Fatalf("canonicalResource not idempotent: %q -> %q -> %q", u, c, again)
			}
		}
	})
}

func FuzzCallsTool(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"admin"}}`))
	f.Add([]byte(`[{"method":"tools/call","params":{"name":"admin"}},{"method":"ping"}]`))
	f.Add([]byte(`{"method":`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_ = callsTool(body, "admin")
	})
}

func FuzzCacheLifetime(f *testing.F) {
	for _, s := range []string{"max-age=600", "no-store, max-age=5", "public, max-age=-1", "max-age=99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cc string) {
		if d := cacheLifetime(http.Header{"Cache-Control": {cc}}); d < 0 {
			t.Fatalf("negative lifetime %v for %q", d, cc)
		}
	})
}
