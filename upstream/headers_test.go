package upstream

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestExpand(t *testing.T) {
	env := lookupIn(map[string]string{"TOK": "abc", "EMPTY": ""})
	for _, c := range []struct{ in, want string }{
		{"Bearer ${TOK}", "Bearer abc"},
		{"${TOK}${TOK}", "abcabc"},
		{"$TOK stays", "$TOK stays"},
		{"${MISSING:-dflt}", "dflt"},
		{"${EMPTY:-dflt}", "dflt"},
		{"${EMPTY}", ""},
		{"no refs", "no refs"},
	} {
		got, err := Expand(c.in, "x", env)
		if err != nil || got != c.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	_, err := Expand("Bearer ${NOPE}", "--header Authorization", env)
	var ue *UnsetError
	if !errors.As(err, &ue) || ue.Var != "NOPE" || !strings.Contains(err.Error(), "--header Authorization: environment variable NOPE is not set") {
		t.Errorf("unset: %v", err)
	}
	for _, bad := range []string{"${", "${1X}", "${A B}"} {
		if _, err := Expand(bad, "x", env); err == nil {
			t.Errorf("Expand(%q) should fail", bad)
		}
	}
}

func TestAddHeaderNeverQuotesTheValue(t *testing.T) {
	h := http.Header{}
	env := lookupIn(map[string]string{"TOK": "s3cr3t-value", "NL": "a\r\nX-Injected: 1"})
	if err := AddHeader(h, "Authorization: Bearer ${TOK}", "", env); err != nil || h.Get("Authorization") != "Bearer s3cr3t-value" {
		t.Fatalf("%v %v", err, h)
	}
	for _, line := range []string{"Bearer s3cr3t-value", ": s3cr3t-value", "Bad Name: s3cr3t-value", "X: ${NL}"} {
		err := AddHeader(h, line, "", env)
		if err == nil {
			t.Errorf("AddHeader(%q) should fail", line)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "Injected") {
			t.Errorf("the error quotes the value: %v", err)
		}
	}
}

func TestReadHeaderFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h")
	if err := os.WriteFile(path, []byte("# comment\n\nX-Key: ${K}\r\nX-Two: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if err := ReadHeaderFile(h, path, lookupIn(map[string]string{"K": "kk"})); err != nil || h.Get("X-Key") != "kk" || h.Get("X-Two") != "2" {
		t.Fatalf("%v %v", err, h)
	}
	err := ReadHeaderFile(http.Header{}, path, lookupIn(nil))
	if err == nil || !strings.Contains(err.Error(), ":3 (X-Key)") || !strings.Contains(err.Error(), "K is not set") {
		t.Fatalf("unset in a file: %v", err)
	}
}
