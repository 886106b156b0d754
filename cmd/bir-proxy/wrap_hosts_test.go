package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// hostProject is a project with Gemini CLI's, Cursor's and VS Code's files,
// copied from the mcpconfig corpus, and a private home and state directory,
// for the built binary.
type hostProject struct {
	bin, dir, home, state string
	files                 map[string][]byte // path → original bytes
}

func newHostProject(t *testing.T) *hostProject {
	t.Helper()
	p := &hostProject{
		bin:  testutil.Build(t, "./cmd/bir-proxy"),
		dir:  t.TempDir(),
		home: t.TempDir(), state: t.TempDir(),
		files: map[string][]byte{},
	}
	if real, err := filepath.EvalSymlinks(p.dir); err == nil {
		p.dir = real
	}
	for rel, corpus := range map[string]string{
		".gemini/settings.json": "gemini-comments.json",
		".cursor/mcp.json":      "cursor-compact.json",
		".vscode/mcp.json":      "vscode-jsonc.json",
	} {
		data, err := os.ReadFile(filepath.Join("..", "..", "mcpconfig", "testdata", "corpus", corpus))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(p.dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		p.files[path] = data
	}
	return p
}

// run runs the binary in the project with the private home.
func (p *hostProject) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "BIR_OFF=1", "HOME="+p.home, "USERPROFILE="+p.home, "XDG_STATE_HOME="+p.state,
		"XDG_CONFIG_HOME="+filepath.Join(p.home, ".config"), "APPDATA="+filepath.Join(p.home, "AppData"), "CLAUDE_CONFIG_DIR=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("bir-proxy %v: %v", args, ctx.Err())
	}
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("bir-proxy %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

func (p *hostProject) unchanged(t *testing.T) {
	t.Helper()
	for path, orig := range p.files {
		if got := readFile(t, path); !bytes.Equal(got, orig) {
			t.Errorf("%s differs from the original:\n%s", path, got)
		}
	}
}

// TestWrapHostsBinary: in a project with Gemini CLI's (with // comments),
// Cursor's and VS Code's files, wrap finds and wraps all three (it said "no
// MCP servers found"), status lists each under its host, and unwrap gives
// back every file byte for byte.
func TestWrapHostsBinary(t *testing.T) {
	p := newHostProject(t)
	gemini := filepath.Join(p.dir, ".gemini", "settings.json")
	cursor := filepath.Join(p.dir, ".cursor", "mcp.json")
	vscode := filepath.Join(p.dir, ".vscode", "mcp.json")

	code, out, errOut := p.run(t, "status")
	for _, want := range []string{
		"Cursor project: " + cursor + "\n",
		"Gemini CLI project: " + gemini + "\n",
		"VS Code project: " + vscode + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status before wrap: no %q in\n%s%s", want, out, errOut)
		}
	}
	if code != 0 || !regexp.MustCompile(`(?m)^  github +not wrapped +npx -y @modelcontextprotocol/server-github$`).MatchString(statusSection(out, "Gemini CLI project: ")) {
		t.Errorf("status before wrap: %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = p.run(t, "wrap", "--proxy-path", p.bin)
	if code != 0 {
		t.Fatalf("wrap: %d\n%s%s", code, out, errOut)
	}
	for _, f := range []string{gemini, cursor, vscode} {
		if !strings.Contains(out, f+": wrapped ") {
			t.Errorf("wrap did not write %s:\n%s", f, out)
		}
		if bytes.Equal(readFile(t, f), p.files[f]) {
			t.Errorf("%s unchanged", f)
		}
	}
	if !strings.Contains(errOut, `streamable: not understood (an "httpUrl" entry (Gemini CLI's streamable HTTP) is not wrapped yet)`) {
		t.Errorf("Gemini's httpUrl entry is not reported as left alone: %s", errOut)
	}
	g := string(readFile(t, gemini))
	for _, c := range []string{"// Gemini CLI settings: comments as strip-json-comments allows them\n", "/* MCP servers\n     below */", "// runs npx", "/* the package */"} {
		if strings.Count(g, c) != 1 {
			t.Errorf("wrapped Gemini file has %d of %q:\n%s", strings.Count(g, c), c, g)
		}
	}

	code, out, errOut = p.run(t, "status")
	if code != 0 {
		t.Errorf("status after wrap: %d\n%s%s", code, out, errOut)
	}
	for _, host := range []string{"Cursor project: ", "Gemini CLI project: ", "VS Code project: "} {
		section := statusSection(out, host)
		if !regexp.MustCompile(`(?m)^  \S+ +wrapped `).MatchString(section) || regexp.MustCompile(`(?m)^  \S+ +not wrapped `).MatchString(section) {
			t.Errorf("status after wrap, %s:\n%s\n(all of it:\n%s)", host, section, out)
		}
	}

	if code, out, errOut := p.run(t, "unwrap"); code != 0 {
		t.Fatalf("unwrap: %d\n%s%s", code, out, errOut)
	}
	p.unchanged(t)
}

// TestWrapHostFlag: --host picks one host's files; the others are left alone.
func TestWrapHostFlag(t *testing.T) {
	p := newHostProject(t)
	gemini := filepath.Join(p.dir, ".gemini", "settings.json")
	code, out, errOut := p.run(t, "wrap", "--host", "gemini", "--proxy-path", p.bin)
	if code != 0 || strings.Contains(out, "Cursor") || strings.Contains(out, "VS Code") {
		t.Fatalf("wrap --host gemini: %d\n%s%s", code, out, errOut)
	}
	for path, orig := range p.files {
		if changed := !bytes.Equal(readFile(t, path), orig); changed != (path == gemini) {
			t.Errorf("%s changed: %v", path, changed)
		}
	}
	code, out, _ = p.run(t, "status", "--host", "vscode")
	if code != 0 || strings.Contains(out, "Gemini") || !strings.Contains(out, "VS Code project: ") {
		t.Errorf("status --host vscode: %d\n%s", code, out)
	}
	if code, out, errOut := p.run(t, "unwrap", "--host", "gemini"); code != 0 {
		t.Fatalf("unwrap --host gemini: %d\n%s%s", code, out, errOut)
	}
	p.unchanged(t)

	// Another host's file that does not parse is named and left alone by a
	// plain wrap; with --host it is the error it is.
	broken := filepath.Join(p.home, ".cursor", "mcp.json")
	if err := os.MkdirAll(filepath.Dir(broken), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(broken, []byte(`{"mcpServers": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = p.run(t, "wrap", "--dry-run", "--proxy-path", p.bin)
	if code != 0 || !strings.Contains(errOut, "warning: "+broken+":1:17: invalid JSON") || !strings.Contains(out, "Gemini CLI project: ") {
		t.Errorf("wrap with a broken ~/.cursor/mcp.json: %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := p.run(t, "wrap", "--dry-run", "--host", "cursor"); code != 1 || !strings.Contains(errOut, broken+":1:17: invalid JSON") {
		t.Errorf("wrap --host cursor with a broken ~/.cursor/mcp.json: %d %s", code, errOut)
	}
	p.unchanged(t)

	if code, _, errOut := p.run(t, "status", "--host", "emacs"); code != 2 || !strings.Contains(errOut, `unknown host "emacs"`) {
		t.Errorf("status --host emacs: %d %s", code, errOut)
	}
	if code, _, errOut := p.run(t, "wrap", "--host", "cursor", "--scope", "local"); code != 1 || !strings.Contains(errOut, "Cursor has no local scope") {
		t.Errorf("wrap --host cursor --scope local: %d %s", code, errOut)
	}
}

// TestWrapConfigKnownAfter: a file wrapped with --config is found by a plain
// unwrap and status in the same project (they said nothing was wrapped,
// although the backup store knew the file).
func TestWrapConfigKnownAfter(t *testing.T) {
	p := newHostProject(t)
	for path := range p.files {
		os.Remove(path)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "mcpconfig", "testdata", "corpus", "gemini-comments.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Not where Gemini CLI keeps it: only the backup store knows it.
	custom := filepath.Join(p.dir, "conf", ".gemini", "settings.json")
	if err := os.MkdirAll(filepath.Dir(custom), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(custom, data, 0o600); err != nil {
		t.Fatal(err)
	}
	p.files = map[string][]byte{custom: data}

	if code, out, errOut := p.run(t, "wrap", "--config", "conf/.gemini/settings.json", "--proxy-path", p.bin); code != 0 {
		t.Fatalf("wrap --config: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := p.run(t, "status")
	if code != 0 || !regexp.MustCompile(`(?m)^  github +wrapped `).MatchString(statusSection(out, "Gemini CLI config: "+custom+"\n")) {
		t.Errorf("status after wrap --config: %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := p.run(t, "unwrap"); code != 0 || !strings.Contains(out, custom+": unwrapped ") {
		t.Fatalf("unwrap: %d\n%s%s", code, out, errOut)
	}
	p.unchanged(t)
}

// TestWrapCodexRefused: Codex's TOML config is refused by name, not called
// invalid JSON, and left alone.
func TestWrapCodexRefused(t *testing.T) {
	p := newHostProject(t)
	toml := filepath.Join(p.home, ".codex", "config.toml")
	if err := os.MkdirAll(filepath.Dir(toml), 0o755); err != nil {
		t.Fatal(err)
	}
	orig := []byte("[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"-y\", \"docs-mcp\"]\n")
	if err := os.WriteFile(toml, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"wrap", "--config", toml}, {"status", "--config", toml}, {"wrap", "--host", "codex"}} {
		code, _, errOut := p.run(t, args...)
		if code != 1 || !strings.Contains(errOut, "Codex's TOML config is not supported yet") || strings.Contains(errOut, "invalid JSON") {
			t.Errorf("%v: %d %s", args, code, errOut)
		}
	}
	if !bytes.Equal(readFile(t, toml), orig) {
		t.Error("the TOML file was written")
	}
}

// statusSection is the part of status's output from the line that starts with
// header to the next line that is not a server's (indented).
func statusSection(out, header string) string {
	i := strings.Index(out, header)
	if i < 0 {
		return ""
	}
	lines := strings.SplitAfter(out[i:], "\n")
	n := 1
	for n < len(lines) && strings.HasPrefix(lines[n], "  ") {
		n++
	}
	return strings.Join(lines[:n], "")
}
