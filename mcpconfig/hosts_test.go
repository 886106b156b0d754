package mcpconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMaskJSONC(t *testing.T) {
	for _, c := range []struct {
		in, want      string
		trailingComma bool
	}{
		{`{"a": "x//y /* z */"}`, `{"a": "x//y /* z */"}`, true},
		{"{\"a\": 1 // one\n}", "{\"a\": 1       \n}", false},
		{"{/* a\nb */\"a\": 1}", "{    \n    \"a\": 1}", false},
		{`{"a": [1, 2,], }`, `{"a": [1, 2 ]  }`, true},
		{`{"a": [1, 2,]}`, `{"a": [1, 2,]}`, false}, // Gemini: not allowed, the parser says so
		{`[,]`, `[,]`, true}, // not a trailing comma: an error
		{`{"a": 1, /* x */ }`, `{"a": 1          }`, true},
		{`{"a": "\"//"} // c`, `{"a": "\"//"}     `, true},
		{`{"a": 1} /* open`, `{"a": 1} /* open`, true}, // unterminated: left for the parser
		{`{"a": 1} /`, `{"a": 1} /`, true},
	} {
		got := string(maskJSONC([]byte(c.in), true, c.trailingComma))
		if got != c.want {
			t.Errorf("maskJSONC(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	plain := []byte(`{"a": "// not a comment", "b": [1, 2]}`)
	if m := maskJSONC(plain, true, true); &m[0] != &plain[0] {
		t.Error("a plain JSON file was copied")
	}
}

func TestStripComments(t *testing.T) {
	for in, want := range map[string]string{
		", ":                    ", ",
		", /* x */ ":            ", ",
		", // c\n    ":          ",\n    ",
		",\n    // c\n    ":     ",\n    ",
		",\n  /* c */\n  ":      ",\n  ",
		" /*a*/ : /*b*/ ":       " : ",
		"\n\t\t// one\n\t\t":    "\n\t\t",
		" // c\n  ":             "\n  ",
		",\n  // a\n  // b\n  ": ",\n  ",
	} {
		if got := stripComments(in); got != want {
			t.Errorf("stripComments(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestJSONCCommentsKept: wrapping a JSONC file keeps every comment it has, once
// and byte for byte, and unwrapping gives back the file.
func TestJSONCCommentsKept(t *testing.T) {
	for _, name := range []string{"gemini-comments.json", "vscode-jsonc.json"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "corpus", name))
			if err != nil {
				t.Fatal(err)
			}
			loc := Location{File: name, Host: corpusHost(name)}
			w, err := mustParse(t, loc, data).Wrap(nil, testProxy)
			if err != nil {
				t.Fatal(err)
			}
			cs := comments(data)
			if len(cs) < 3 {
				t.Fatalf("%d comments found", len(cs))
			}
			for _, c := range cs {
				if n, m := strings.Count(string(data), c), strings.Count(string(w.New), c); n != m {
					t.Errorf("comment %q: %d in the file, %d wrapped", c, n, m)
				}
			}
			u, err := mustParse(t, loc, w.New).Unwrap(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(u.New, data) {
				t.Errorf("unwrap(wrap(x)) != x:\n%s", unifiedDiff(name, data, u.New))
			}
		})
	}
}

// TestHostFormats: each host's file is read in its own format and no other.
func TestHostFormats(t *testing.T) {
	gemini := []byte("{\n  // c\n  \"mcpServers\": {\"a\": {\"command\": \"x\"}}\n}\n")
	if _, err := Parse(Location{File: "settings.json", Host: HostGemini}, gemini); err != nil {
		t.Errorf("Gemini with a comment: %v", err)
	}
	var se *SyntaxError
	if _, err := Parse(Location{File: ".mcp.json", Host: HostClaudeCode}, gemini); !errors.As(err, &se) || se.Line != 2 {
		t.Errorf("Claude Code with a comment: %v, want invalid JSON at line 2", err)
	}
	trailing := []byte(`{"mcpServers": {"a": {"command": "x",}}}`)
	if _, err := Parse(Location{File: "settings.json", Host: HostGemini}, trailing); !errors.As(err, &se) {
		t.Errorf("Gemini with a trailing comma: %v, want invalid JSON (strip-json-comments keeps it)", err)
	}
	vscode := []byte(`{"servers": {"a": {"command": "x",},}, /* c */}`)
	d, err := Parse(Location{File: "mcp.json", Host: HostVSCode}, vscode)
	if err != nil || len(d.Servers()) != 1 {
		t.Errorf("VS Code with trailing commas: %v", err)
	}
	if _, err := Parse(Location{File: "mcp.json"}, vscode); err == nil {
		t.Error("a VS Code file read as Claude Code's was accepted")
	}
	_, err = Parse(Location{File: "mcp.json"}, []byte(`{"servers": {"a": {"command": "x"}}}`))
	if !errors.Is(err, ErrNoServers) || !strings.Contains(err.Error(), "--host vscode") {
		t.Errorf("VS Code's shape read as Claude Code's: %v", err)
	}
}

func TestCodexTOML(t *testing.T) {
	_, err := Parse(Location{File: "/home/u/.codex/config.toml"}, []byte("[mcp_servers.x]\ncommand = \"npx\"\n"))
	if !errors.Is(err, ErrUnsupportedFormat) || !strings.Contains(err.Error(), "Codex's TOML config is not supported yet") || strings.Contains(err.Error(), "invalid JSON") {
		t.Errorf("Parse(config.toml) = %v", err)
	}
	if _, err := ParseHost("codex"); !errors.Is(err, ErrUnsupportedFormat) || !strings.Contains(err.Error(), "Codex's TOML config is not supported yet") {
		t.Errorf("ParseHost(codex) = %v", err)
	}
	if _, err := ParseHost("emacs"); err == nil || !strings.Contains(err.Error(), "claude-desktop") {
		t.Errorf("ParseHost(emacs) = %v", err)
	}
}

// TestHostFiles: every host's files are found from a project directory, in a
// private home.
func TestHostFiles(t *testing.T) {
	home := t.TempDir()
	proj := filepath.Join(home, "src", "app")
	sub := filepath.Join(proj, "pkg")
	write := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{".cursor/mcp.json", ".gemini/settings.json", ".vscode/mcp.json"} {
		write(filepath.Join(proj, rel))
	}
	// The user's files in home are not taken for a project's from below home.
	write(filepath.Join(home, ".cursor", "mcp.json"))
	write(filepath.Join(home, ".gemini", "settings.json"))
	env := Env{Dir: sub, Home: home, XDGConfigHome: filepath.Join(home, "xdg"), GOOS: "linux"}

	want := map[Host][]string{
		HostClaudeCode: {
			"project scope " + filepath.Join(sub, ".mcp.json") + " false",
			"local scope " + filepath.Join(home, ".claude.json") + " (project " + sub + ") true",
			"user scope " + filepath.Join(home, ".claude.json") + " true",
		},
		HostClaudeDesktop: {"Claude Desktop user " + filepath.Join(home, "xdg", "Claude", "claude_desktop_config.json") + " true"},
		HostCursor: {
			"Cursor project " + filepath.Join(proj, ".cursor", "mcp.json") + " true",
			"Cursor user " + filepath.Join(home, ".cursor", "mcp.json") + " true",
		},
		HostGemini: {
			"Gemini CLI project " + filepath.Join(proj, ".gemini", "settings.json") + " true",
			"Gemini CLI user " + filepath.Join(home, ".gemini", "settings.json") + " true",
		},
		HostVSCode:   {"VS Code project " + filepath.Join(proj, ".vscode", "mcp.json") + " true"},
		HostWindsurf: {"Windsurf user " + filepath.Join(home, ".codeium", "windsurf", "mcp_config.json") + " true"},
	}
	for _, h := range Hosts {
		var got []string
		for _, f := range env.HostFiles(h, "") {
			if f.Loc.Host != h {
				t.Errorf("%s: location host %q", h, f.Loc.Host)
			}
			got = append(got, f.Label()+" "+f.Loc.String()+" "+map[bool]string{true: "true", false: "false"}[f.Found])
		}
		if strings.Join(got, "\n") != strings.Join(want[h], "\n") {
			t.Errorf("%s:\n got %q\nwant %q", h, got, want[h])
		}
	}

	// From home itself, ~/.gemini/settings.json is the user's file only.
	env.Dir = home
	if fs := env.HostFiles(HostGemini, ScopeProject); len(fs) != 1 || fs[0].Found {
		t.Errorf("from home: %+v", fs)
	}
	if fs := env.HostFiles(HostCursor, ScopeUser); len(fs) != 1 || fs[0].Scope != ScopeUser {
		t.Errorf("--scope user: %+v", fs)
	}
	// No home (only $CLAUDE_CONFIG_DIR): no user file that would be a
	// relative path.
	env = Env{Dir: proj, ClaudeConfigDir: filepath.Join(home, "cc"), GOOS: "linux"}
	for _, h := range Hosts {
		for _, f := range env.HostFiles(h, ScopeUser) {
			if !filepath.IsAbs(f.Loc.File) {
				t.Errorf("%s without a home: %s", h, f.Loc.File)
			}
		}
	}
}

func TestClaudeDesktopPaths(t *testing.T) {
	for _, c := range []struct {
		env  Env
		want string
	}{
		{Env{Home: "/Users/u", GOOS: "darwin"}, "/Users/u/Library/Application Support/Claude/claude_desktop_config.json"},
		{Env{Home: "/home/u", GOOS: "linux"}, "/home/u/.config/Claude/claude_desktop_config.json"},
		{Env{Home: "/home/u", XDGConfigHome: "/x", GOOS: "linux"}, "/x/Claude/claude_desktop_config.json"},
		{Env{Home: "/home/u", XDGConfigHome: "rel", GOOS: "linux"}, "/home/u/.config/Claude/claude_desktop_config.json"},
		{Env{Home: "/h", AppData: "/h/AppData/Roaming", GOOS: "windows"}, "/h/AppData/Roaming/Claude/claude_desktop_config.json"},
	} {
		if got := c.env.UserFile(HostClaudeDesktop); got != filepath.FromSlash(c.want) {
			t.Errorf("%+v: %s, want %s", c.env, got, c.want)
		}
	}
}

func TestGuessHost(t *testing.T) {
	for path, want := range map[string]Host{
		"/p/.gemini/settings.json": HostGemini,
		"/p/.vscode/mcp.json":      HostVSCode,
		"/p/.cursor/mcp.json":      HostCursor,
		"/h/Library/Application Support/Claude/claude_desktop_config.json": HostClaudeDesktop,
		"/h/.codeium/windsurf/mcp_config.json":                             HostWindsurf,
		"/p/.mcp.json":                                                     HostClaudeCode,
		"/p/other.json":                                                    HostClaudeCode,
	} {
		if got := GuessHost(path); got != want {
			t.Errorf("GuessHost(%s) = %s, want %s", path, got, want)
		}
	}
}

// FuzzJSONC: whatever a JSONC file holds, reading it does not panic; a file
// that is plain JSON is its own mask; the mask keeps every length and line
// break; and what wrap writes unwraps to the very same bytes, comments and
// trailing commas included.
func FuzzJSONC(f *testing.F) {
	for _, name := range []string{"gemini-comments.json", "vscode-jsonc.json"} {
		if data, err := os.ReadFile(filepath.Join("testdata", "corpus", name)); err == nil {
			f.Add(data, true)
		}
	}
	f.Add([]byte("{\"mcpServers\": {\"a\": {\"command\": \"x\", // c\n\"args\": [\"y\",]}}}"), true)
	f.Add([]byte(`{"servers": {"r": {"type": "http", /* c */ "url": "https://h/mcp", "headers": {"A": "1",},},}}`), true)
	f.Add([]byte(`{"mcpServers": {"a": {"command": "x" /* c */}}} //`), false)
	f.Fuzz(func(t *testing.T, data []byte, vscode bool) {
		m := maskJSONC(data, true, vscode)
		if len(m) != len(data) || bytes.Count(m, []byte("\n")) != bytes.Count(data, []byte("\n")) {
			t.Fatalf("mask of %q is %q", data, m)
		}
		if json.Valid(data) && !bytes.Equal(m, data) {
			t.Fatalf("plain JSON %q masked to %q", data, m)
		}
		host := HostGemini
		if vscode {
			host = HostVSCode
		}
		loc := Location{File: "f.json", Host: host}
		d, err := Parse(loc, data)
		if err != nil {
			return
		}
		w, err := d.Wrap(nil, testProxy)
		if err != nil || !w.Changed() {
			return
		}
		wd, err := Parse(loc, w.New)
		if err != nil {
			t.Fatalf("wrap(%q) = %q, which does not parse: %v", data, w.New, err)
		}
		u, err := wd.Unwrap(nil)
		if err != nil {
			t.Fatalf("unwrap(wrap(%q)): %v", data, err)
		}
		if !bytes.Equal(u.New, data) {
			t.Fatalf("unwrap(wrap(%q)) = %q", data, u.New)
		}
	})
}

// comments are the comments of a JSONC text, found apart from maskJSONC.
func comments(b []byte) []string {
	var out []string
	inStr := false
	for i := 0; i < len(b); i++ {
		switch {
		case inStr && b[i] == '\\':
			i++
		case b[i] == '"':
			inStr = !inStr
		case inStr || b[i] != '/' || i+1 == len(b):
		case b[i+1] == '/':
			j := bytes.IndexByte(b[i:], '\n')
			if j < 0 {
				j = len(b) - i
			}
			out = append(out, string(b[i:i+j]))
			i += j - 1
		case b[i+1] == '*':
			j := bytes.Index(b[i+2:], []byte("*/"))
			if j < 0 {
				return out
			}
			out = append(out, string(b[i:i+2+j+2]))
			i += 2 + j + 1
		}
	}
	return out
}
