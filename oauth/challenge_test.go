package oauth

import (
	"reflect"
	"testing"
)

func TestParseChallenge(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want Challenge
	}{
		{[]string{`Bearer resource_metadata="https://a/.well-known/oauth-protected-resource", scope="files:read files:write"`},
			Challenge{ResourceMetadata: "https://a/.well-known/oauth-protected-resource", Scope: "files:read files:write"}},
		{[]string{`Bearer error="insufficient_scope", scope="a b", resource_metadata="https://x/m"`},
			Challenge{ResourceMetadata: "https://x/m", Scope: "a b", Error: "insufficient_scope"}},
		// Another scheme first, token68, case, unquoted values, escapes.
		{[]string{`Basic abc==, bearer Scope=read, error=invalid_token`}, Challenge{Scope: "read", Error: "invalid_token"}},
		{[]string{`Basic realm="x, y"`, `Bearer resource_metadata="http://h/\"q\""`}, Challenge{ResourceMetadata: `http://h/"q"`}},
		{[]string{`Bearer`}, Challenge{}},
		{[]string{`Bearer realm="a", scope="first", scope="second"`}, Challenge{Scope: "first"}},
		{nil, Challenge{}},
		{[]string{`"broken`, `=`, `Bearer scope=`}, Challenge{}},
	} {
		if got := ParseChallenge(c.in); got != c.want {
			t.Errorf("ParseChallenge(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func FuzzParseChallenge(f *testing.F) {
	f.Add(`Bearer resource_metadata="https://a/m", scope="a b", error="insufficient_scope"`)
	f.Add(`Basic abc==, Bearer scope=x`)
	f.Add(`Bearer realm="\"", scope="\\"`)
	f.Fuzz(func(t *testing.T, s string) {
		c := ParseChallenge([]string{s})
		// Whatever it reads, it reads the same way twice, and never invents text.
		if c2 := ParseChallenge([]string{s}); c2 != c {
			t.Fatalf("not deterministic: %+v vs %+v", c, c2)
		}
		if len(c.Scope)+len(c.Error)+len(c.ResourceMetadata) > len(s) {
			t.Fatalf("read more than was there: %+v from %q", c, s)
		}
	})
}

func TestWellKnownOrder(t *testing.T) {
	got, _ := protectedResourceURLs("https://h.example/public/mcp", "")
	want := []string{"https://h.example/.well-known/oauth-protected-resource/public/mcp", "https://h.example/.well-known/oauth-protected-resource"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("protected resource URLs %q, want %q", got, want)
	}
	if got, _ := protectedResourceURLs("https://h.example/mcp", "https://h.example/m"); !reflect.DeepEqual(got, []string{"https://h.example/m"}) {
		t.Errorf("the header's URL is the only one: %q", got)
	}
	got, _ = serverMetadataURLs("https://auth.example/tenant1")
	want = []string{
		"https://auth.example/.well-known/oauth-authorization-server/tenant1",
		"https://auth.example/.well-known/openid-configuration/tenant1",
		"https://auth.example/tenant1/.well-known/openid-configuration",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("issuer with a path: %q, want %q", got, want)
	}
	got, _ = serverMetadataURLs("https://auth.example/")
	want = []string{"https://auth.example/.well-known/oauth-authorization-server", "https://auth.example/.well-known/openid-configuration"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("issuer without a path: %q, want %q", got, want)
	}
}

func TestCanonicalURI(t *testing.T) {
	for in, want := range map[string]string{
		"HTTPS://MCP.Example.COM/mcp":    "https://mcp.example.com/mcp",
		"https://mcp.example.com:443/":   "https://mcp.example.com",
		"http://127.0.0.1:8080/mcp#frag": "http://127.0.0.1:8080/mcp",
		"https://u:p@h.example/a/b?x=1":  "https://h.example/a/b?x=1",
		// A secret in the query never goes to the authorization server; a tenant stays.
		"https://h.example/mcp?api_key=s3cr3t&tenant=a&access%5Ftoken=t": "https://h.example/mcp?tenant=a",
		"https://h.example/mcp?token=s3cr3t":                             "https://h.example/mcp",
		"https://h.example/?apikey=s3cr3t":                               "https://h.example",
		"https://[::1]:9/mcp":                                            "https://[::1]:9/mcp",
		"https://mcp.example.com/server/":                                "https://mcp.example.com/server/",
	} {
		if got, err := CanonicalURI(in); err != nil || got != want {
			t.Errorf("CanonicalURI(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ftp://h/x", "/relative", "https://"} {
		if _, err := CanonicalURI(bad); err == nil {
			t.Errorf("CanonicalURI(%q) accepted", bad)
		}
	}
}

func TestCheckResource(t *testing.T) {
	for _, c := range []struct {
		server, resource string
		ok               bool
	}{
		{"https://h/mcp", "https://h/mcp", true},
		{"https://h/mcp", "https://H/mcp", true},
		{"https://h/mcp", "https://h", true},
		{"https://h/mcp", "", true},
		{"https://h/mcp", "https://other/mcp", false},
		{"https://h/mcp", "https://h/mc", false},
		{"https://h/mcp", "https://h/mcp/deeper", false},
	} {
		if err := checkResource(c.server, c.resource); (err == nil) != c.ok {
			t.Errorf("checkResource(%q, %q) = %v, want ok=%v", c.server, c.resource, err, c.ok)
		}
	}
}

func TestScopeSets(t *testing.T) {
	if got := union([]string{"a", "b"}, []string{"b", "c", ""}); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("union: %q", got)
	}
	if !covers([]string{"a", "b"}, []string{"b"}) || covers([]string{"a"}, []string{"a", "b"}) || !covers(nil, nil) {
		t.Error("covers")
	}
}

func TestSecureURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://as.example/t":      true,
		"http://127.0.0.1:9/t":      true,
		"http://[::1]:9/t":          true,
		"http://localhost:9/t":      true,
		"http://as.example/t":       false,
		"http://10.0.0.1/t":         false,
		"ftp://as.example/t":        false,
		"http://127.0.0.1.nip.io/t": false,
	} {
		if err := secureURL("x", u); (err == nil) != ok {
			t.Errorf("secureURL(%q) = %v, want ok=%v", u, err, ok)
		}
	}
}
