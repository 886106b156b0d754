package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/mcpconfig"
)

const fakeProxy = "/opt/bir/bin/bir-proxy"

// cli runs one wrap/unwrap/status command in-process.
func cli(t *testing.T, cmd string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx := context.Background()
	switch cmd {
	case "wrap":
		code = runWrap(ctx, args, &out, &errOut)
	case "unwrap":
		code = runUnwrap(ctx, args, &out, &errOut)
	case "status":
		code = runStatus(ctx, args, &out, &errOut, func(context.Context) string { return "recorder: stub" })
	default:
		t.Fatalf("no command %s", cmd)
	}
	return code, out.String(), errOut.String()
}

// projectConfig copies a corpus file to .mcp.json in a new directory.
func projectConfig(t *testing.T, corpusFile string) (dir, path string, orig []byte) {
	t.Helper()
	orig, err := os.ReadFile(filepath.Join("..", "..", "mcpconfig", "testdata", "corpus", corpusFile))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	path = filepath.Join(dir, ".mcp.json")
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, path, orig
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWrapUnwrapCommands(t *testing.T) {
	dir, path, orig := projectConfig(t, "claude-code-project.json")
	t.Chdir(dir) // the default config is .mcp.json in the working directory

	code, out, errOut := cli(t, "wrap", "--proxy-path", fakeProxy)
	if code != 0 {
		t.Fatalf("wrap: %d %s", code, errOut)
	}
	for _, want := range []string{
		"wrapped github\n", "wrapped postgres\n", "wrapped local-tool\n",
		"wrapped sentry\n", "wrapped linear\n",
		"unchanged bir: the recorder's own server is never wrapped",
		"wrapped 7 entries (previous version kept in ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("wrap output lacks %q:\n%s", want, out)
		}
	}
	wrapped := readFile(t, path)
	if bytes.Equal(wrapped, orig) {
		t.Fatal("the file did not change")
	}
	if got := readFile(t, path+mcpconfig.BackupSuffix); !bytes.Equal(got, orig) {
		t.Error("the backup is not the previous version")
	}

	code, out, _ = cli(t, "wrap", "--proxy-path", fakeProxy)
	if code != 0 || !strings.Contains(out, "nothing to change") || !bytes.Equal(readFile(t, path), wrapped) {
		t.Errorf("a second wrap: %d %s", code, out)
	}

	code, out, errOut = cli(t, "unwrap")
	if code != 0 {
		t.Fatalf("unwrap: %d %s", code, errOut)
	}
	if got := readFile(t, path); !bytes.Equal(got, orig) {
		t.Errorf("unwrap(wrap(x)) != x; got:\n%s", got)
	}
	if !strings.Contains(out, "unwrapped github\n") {
		t.Errorf("unwrap output:\n%s", out)
	}
}

func TestWrapNamedAndFlagOrder(t *testing.T) {
	_, path, _ := projectConfig(t, "claude-code-project.json")
	// Flags after a name still count: --dry-run must not become a name.
	code, out, errOut := cli(t, "wrap", "--config", path, "fetch", "--proxy-path", fakeProxy, "github")
	if code != 0 {
		t.Fatalf("%d %s", code, errOut)
	}
	if out != "wrapped github\nwrapped fetch\n"+path+": wrapped 2 entries (previous version kept in "+path+mcpconfig.BackupSuffix+"); restart the host or reconnect its MCP servers to use them\n" {
		t.Errorf("output:\n%s", out)
	}
	code, _, errOut = cli(t, "unwrap", "--config", path, "nope")
	if code != 1 || !strings.Contains(errOut, `no server named "nope"`) {
		t.Errorf("unknown name: %d %s", code, errOut)
	}
	code, _, errOut = cli(t, "wrap", "--config", path, "--bogus")
	if code != 2 || !strings.Contains(errOut, "bogus") {
		t.Errorf("unknown flag: %d %s", code, errOut)
	}
}

func TestWrapDryRun(t *testing.T) {
	_, path, orig := projectConfig(t, "tabs-crlf.json")
	code, out, errOut := cli(t, "wrap", "--dry-run", "--config", path, "--proxy-path", fakeProxy)
	if code != 0 {
		t.Fatalf("%d %s", code, errOut)
	}
	for _, want := range []string{
		"would wrap git\n",
		"--- " + path + "\n+++ " + path + "\n",
		"-\t\t\t\"command\": \"uvx\",\r\n+\t\t\t\"command\": \"/opt/bir/bin/bir-proxy\",\r\n",
		"+\t\t\t\"args\": [\"--server=time\", \"uvx\"]\r\n",
		"dry run, nothing written",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	if !bytes.Equal(readFile(t, path), orig) {
		t.Error("a dry run wrote the file")
	}
	if _, err := os.Stat(path + mcpconfig.BackupSuffix); err == nil {
		t.Error("a dry run wrote a backup")
	}
}

func TestWrapBadInput(t *testing.T) {
	write := func(t *testing.T, text string, mode os.FileMode) string {
		path := filepath.Join(t.TempDir(), "mcp.json")
		if err := os.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name, text string
		mode       os.FileMode
		says       string
	}{
		{"invalid JSON", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n", 0o600, "mcp.json:3:26: invalid JSON"},
		{"no mcpServers", `{"servers": {}}`, 0o600, "no mcpServers"},
		{"read-only", `{"mcpServers": {"a": {"command": "x"}}}`, 0o444, "read-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := write(t, tc.text, tc.mode)
			code, _, errOut := cli(t, "wrap", "--config", path, "--proxy-path", fakeProxy)
			if code != 1 || !strings.Contains(errOut, tc.says) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, errOut, tc.says)
			}
			if got := readFile(t, path); string(got) != tc.text {
				t.Errorf("the file was touched: %s", got)
			}
			if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
				t.Errorf("files were left beside it: %v", ents)
			}
		})
	}

	t.Run("not understood", func(t *testing.T) {
		_, path, _ := projectConfig(t, "weird-shapes.json")
		code, out, errOut := cli(t, "wrap", "--config", path, "--proxy-path", fakeProxy)
		if code != 0 || !strings.Contains(out, "wrapped ok\n") {
			t.Fatalf("%d %s %s", code, out, errOut)
		}
		if !strings.Contains(errOut, `warning: args-numbers: not understood ("args" holds something other than strings); left alone`) {
			t.Errorf("stderr:\n%s", errOut)
		}
	})
}

// TestClaudeJSONScopes edits a Claude Code user file (found through
// CLAUDE_CONFIG_DIR) for the local and user scopes; each touches only its
// own servers.
func TestClaudeJSONScopes(t *testing.T) {
	project, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfgDir := t.TempDir()
	t.Setenv("CLAUDE_CONFIG_DIR", cfgDir)
	t.Chdir(project)
	doc := fmt.Sprintf(`{
  "numStartups": 3,
  "mcpServers": {"u": {"type": "stdio", "command": "user-mcp", "args": [], "env": {}}},
  "projects": {
    %q: {"allowedTools": [], "mcpServers": {"l": {"type": "stdio", "command": "local-mcp", "args": [], "env": {}}}},
    "/somewhere/else": {"mcpServers": {"o": {"command": "other-mcp"}}}
  }
}
`, project)
	path := filepath.Join(cfgDir, ".claude.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := cli(t, "wrap", "--scope", "local", "--proxy-path", fakeProxy)
	if code != 0 || !strings.Contains(out, "wrapped l\n") || strings.Contains(out, "wrapped u") {
		t.Fatalf("local: %d %s %s", code, out, errOut)
	}
	code, out, errOut = cli(t, "wrap", "--scope", "user", "--proxy-path", fakeProxy)
	if code != 0 || !strings.Contains(out, "wrapped u\n") || strings.Contains(out, "wrapped l") {
		t.Fatalf("user: %d %s %s", code, out, errOut)
	}
	got := string(readFile(t, path))
	for _, want := range []string{
		`"u": {"type": "stdio", "command": "/opt/bir/bin/bir-proxy", "args": ["--server", "u", "user-mcp"], "env": {}}`,
		`"l": {"type": "stdio", "command": "/opt/bir/bin/bir-proxy", "args": ["--server", "l", "local-mcp"], "env": {}}`,
		`"o": {"command": "other-mcp"}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %s:\n%s", want, got)
		}
	}

	code, out, _ = cli(t, "status")
	for _, want := range []string{
		"local scope: " + path + " (project " + project + ")\n  l  wrapped  local-mcp\n",
		"user scope: " + path + "\n  u  wrapped  user-mcp\n",
		"recorder: stub\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if code != 0 || strings.Contains(out, "project scope") {
		t.Errorf("status with no .mcp.json: %d\n%s", code, out)
	}

	for _, scope := range []string{"local", "user"} {
		if code, _, errOut := cli(t, "unwrap", "--scope", scope); code != 0 {
			t.Fatalf("unwrap %s: %s", scope, errOut)
		}
	}
	if got := readFile(t, path); string(got) != doc {
		t.Errorf("unwrap(wrap(x)) != x:\n%s", got)
	}
}

func TestStatus(t *testing.T) {
	_, path, _ := projectConfig(t, "claude-code-project.json")
	if code, _, errOut := cli(t, "wrap", "--config", path, "--proxy-path", fakeProxy, "github", "linear"); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := cli(t, "status", "--config", path)
	if code != 0 {
		t.Fatalf("%d %s", code, errOut)
	}
	want := "project scope: " + path + `
  github      wrapped      npx -y @modelcontextprotocol/server-github
  filesystem  not wrapped  npx -y @modelcontextprotocol/server-filesystem /Users/dev/projects /Users/dev/Documents
  postgres    not wrapped  docker run -i --rm -e DATABASE_URL mcp/postgres -- --read-only
  fetch       not wrapped  uvx mcp-server-fetch --ignore-robots-txt
  sentry      not wrapped  https://mcp.sentry.dev/mcp  (remote, http)
  linear      wrapped      https://mcp.linear.app/sse  (remote, sse)
  local-tool  not wrapped  /usr/local/bin/my-mcp-server
  bir         not wrapped  bir mcp  (the recorder's own server)
recorder: stub
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	if code, _, _ := cli(t, "status", "--config", path, "extra"); code != 2 {
		t.Errorf("status with a name: exit %d", code)
	}
}

func TestDefaultProxyPath(t *testing.T) {
	var errOut bytes.Buffer
	p, err := defaultProxyPath(&errOut)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	if !filepath.IsAbs(p) || !sameFile(p, exe) {
		t.Errorf("default proxy path %s is not this executable %s", p, exe)
	}
}

// TestWrappedEntryRuns wraps real entries, then starts each the way a host
// does — command, args and env taken from the file — and checks that the
// original server answers through the proxy.
func TestWrappedEntryRuns(t *testing.T) {
	proxy := testutil.Build(t, "./cmd/bir-proxy")
	raw := testutil.Build(t, "./testdata/rawserver")
	mcp := testutil.Build(t, "./testdata/mcpserver")

	path := filepath.Join(t.TempDir(), ".mcp.json")
	doc := fmt.Sprintf(`{
  "mcpServers": {
    "raw": {
      "command": %q,
      "args": ["--reply", "--env"],
      "env": {"FIXTURE_TOKEN": "tok-from-the-file"}
    },
    "bare": {
      "command": %q
    }
  }
}
`, raw, mcp)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cli(t, "wrap", "--config", path, "--proxy-path", proxy); code != 0 {
		t.Fatalf("wrap: %s", errOut)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(readFile(t, path), &cfg); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	start := func(t *testing.T, name string) *testutil.Proc {
		e := cfg.MCPServers[name]
		if e.Command != proxy {
			t.Fatalf("%s runs %s, not the proxy", name, e.Command)
		}
		cmd := exec.Command(e.Command, e.Args...)
		cmd.Env = append(os.Environ(), "BIR_OFF=1", "XDG_STATE_HOME="+state)
		for k, v := range e.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		p := testutil.Start(t, cmd)
		t.Cleanup(func() { // before Start's own cleanup, which kills it
			p.Stdin.Close()
			if err := p.Wait(); err != nil {
				t.Errorf("%s exited: %v", name, err)
			}
		})
		return p
	}
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test-host","version":"0"}}}`

	t.Run("args and env", func(t *testing.T) {
		p := start(t, "raw")
		p.Send(initialize)
		if got := p.ReadLine(); !strings.Contains(got, `"serverInfo":{"name":"rawserver"`) {
			t.Fatalf("initialize answered %s", got)
		}
		p.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		p.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"env","arguments":{}}}`)
		var res struct {
			Result struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(p.ReadLine()), &res); err != nil || len(res.Result.Content) != 1 {
			t.Fatalf("env call: %v %+v", err, res)
		}
		var env []string
		if err := json.Unmarshal([]byte(res.Result.Content[0].Text), &env); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(env, "FIXTURE_TOKEN=tok-from-the-file") {
			t.Errorf("the entry's env did not reach the server: %q", env)
		}
	})
	t.Run("no args key", func(t *testing.T) {
		// The wrapped entry says --server=bare; the proxy must take it.
		if a := cfg.MCPServers["bare"].Args; len(a) == 0 || a[0] != "--server=bare" {
			t.Fatalf("args %q", a)
		}
		p := start(t, "bare")
		p.Send(initialize)
		if got := p.ReadLine(); !strings.Contains(got, `"name":"mcpserver"`) {
			t.Fatalf("initialize answered %s", got)
		}
	})
}
