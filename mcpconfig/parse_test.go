package mcpconfig

import (
	"errors"
	"strings"
	"testing"
)

func TestSyntaxErrorPosition(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		line, col int
	}{
		{"trailing comma", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n", 3, 26},
		{"missing comma", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}\n", 4, 5},
		// Columns count characters: a person's editor does, not bytes.
		{"after multibyte", "{\"mcpServers\": {\"ünï\": {\"command\": x}}}", 1, 36},
		{"comment", "{\n  // servers\n  \"mcpServers\": {}\n}", 2, 3},
		{"truncated", "{\n  \"mcpServers\": {\n", 3, 1},
		{"crlf", "{\r\n  \"mcpServers\": {\r\n    \"a\": [1 2]\r\n  }\r\n}", 3, 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(Location{File: "cfg.json"}, []byte(tc.in))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a SyntaxError", err)
			}
			if se.Line != tc.line || se.Column != tc.col {
				t.Errorf("at %d:%d, want %d:%d (%v)", se.Line, se.Column, tc.line, tc.col, err)
			}
			if !strings.HasPrefix(err.Error(), "cfg.json:") {
				t.Errorf("the message does not name the file: %v", err)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		noSrv    bool   // errors.Is ErrNoServers
		says     string // in the message
	}{
		{"no mcpServers", `{"other": 1}`, true, "no mcpServers"},
		{"VS Code format", `{"servers": {"a": {"command": "x"}}}`, true, "VS Code"},
		{"mcpServers not an object", `{"mcpServers": []}`, false, "not a JSON object"},
		{"top level array", `[{"mcpServers": {}}]`, false, "top level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(Location{File: "cfg.json"}, []byte(tc.in))
			if err == nil {
				t.Fatal("accepted")
			}
			if errors.Is(err, ErrNoServers) != tc.noSrv || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q", err)
			}
		})
	}
}

func TestBOMKept(t *testing.T) {
	in := "\xef\xbb\xbf{\"mcpServers\": {\"a\": {\"command\": \"x\"}}}"
	c, err := mustParse(t, Location{File: "bom.json"}, []byte(in)).Wrap(nil, testProxy)
	if err != nil {
		t.Fatal(err)
	}
	want := "\xef\xbb\xbf{\"mcpServers\": {\"a\": {\"command\": \"/usr/local/bin/bir-proxy\", \"args\": [\"--server=a\", \"x\"]}}}"
	if string(c.New) != want {
		t.Errorf("got %q", c.New)
	}
}

func TestServers(t *testing.T) {
	in := `{"mcpServers": {
	  "w": {"command": "bir-proxy", "args": ["--server", "old-name", "--", "npx", "-y", "p"]},
	  "s": {"command": "uvx", "args": ["tool"]},
	  "r": {"type": "http", "url": "https://example.com/mcp"},
	  "u": {"command": 1}
	}}`
	got := mustParse(t, Location{File: "s.json"}, []byte(in)).Servers()
	want := []Server{
		{Name: "w", Kind: KindWrapped, Command: []string{"npx", "-y", "p"}, ProxyName: "old-name"},
		{Name: "s", Kind: KindStdio, Command: []string{"uvx", "tool"}},
		{Name: "r", Kind: KindRemote, URL: "https://example.com/mcp"},
		{Name: "u", Kind: KindUnknown, Problem: `"command" is not a non-empty string`},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Kind != w.Kind || strings.Join(g.Command, " ") != strings.Join(w.Command, " ") ||
			g.URL != w.URL || g.ProxyName != w.ProxyName || g.Problem != w.Problem {
			t.Errorf("server %d: %+v, want %+v", i, g, w)
		}
	}
}
