package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://mcp.example.com/mcp", "https://mcp.example.com/mcp"},
		{"https://user:hunter22@mcp.example.com/mcp", "https://user:[REDACTED]@mcp.example.com/mcp"},
		{"https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@h/mcp", "https://[REDACTED]@h/mcp"},
		{"https://h/mcp?token=abc123&region=eu", "https://h/mcp?token=[REDACTED]&region=eu"},
		{"https://h/mcp?api_key=s3cr3t&key=k1&x=1", "https://h/mcp?api_key=[REDACTED]&key=[REDACTED]&x=1"},
		{"http://127.0.0.1:8080/sse", "http://127.0.0.1:8080/sse"},
	} {
		if got := URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := URL("https://h/mcp?sig=" + strings.Repeat("a", 10)); strings.Contains(got, "aaaaaaaaaa") {
		t.Errorf("a signature survived: %q", got)
	}
}
