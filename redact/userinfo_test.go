package redact

import "testing"

func TestLooksLikeToken(t *testing.T) {
	for name, want := range map[string]bool{
		"agent": false, "user": false, "alice": false, "git": false, "x-access-token": false,
		"deploy-bot-account":     false, // long, but no digit: a name
		"ghp_4f8A2c9E1b7D3k5M6n": true, "ghu4f8A2c9E1b7D3k5M": true,
		"a1b2c3d4": false, // short
	} {
		if got := LooksLikeToken(name); got != want {
			t.Errorf("LooksLikeToken(%q) = %v, want %v", name, got, want)
		}
	}
}
