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

	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/wrapcmd"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/internal/userconfig"
	"github.com/bir-dev/bir-proxy/internal/version"
	"github.com/bir-dev/bir-proxy/mcpconfig"
)

const fakeProxy = "/opt/bir/bin/bir-proxy"

// isolate points HOME, the state directory and Claude Code's config at
// fresh temporary directories, so that a command with no --scope (which
// acts on ~/.claude.json too) never touches the real ones; it returns the
// state directory, where runCmd keeps backups. A test that uses --config
// alone needs none of it, and may run in parallel.
func isolate(t *testing.T) (home, state string) {
	t.Helper()
	home, state = t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("USERPROFILE", home)
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	// Claude Desktop's file is under these.
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("APPDATA", filepath.Join(home, "AppData", "Roaming"))
	return home, state
}

// stubProxyRuns says every bir-proxy runs, for tests whose proxy path is
// made up.
func stubProxyRuns(context.Context, string) (string, error) { return "bir-proxy test", nil }

// testBackups keeps backups in the test's state directory: XDG_STATE_HOME
// when isolate set it, else one of the test's own (so that a parallel test
// never writes to the real one).
func testBackups(t *testing.T) func() (mcpconfig.Backups, error) {
	state := os.Getenv("XDG_STATE_HOME")
	if !strings.HasPrefix(state, os.TempDir()) {
		state = t.TempDir()
	}
	return func() (mcpconfig.Backups, error) {
		return mcpconfig.Backups{Dir: filepath.Join(state, "bir-proxy", "backups")}, nil
	}
}

// runCmd runs one subcommand in-process, as `bir-proxy CMD ARGS...` would.
func runCmd(t *testing.T, cmd string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCmdWith(t, stubProxyRuns, cmd, args...)
}

func runCmdWith(t *testing.T, proxyRuns func(context.Context, string) (string, error), cmd string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli{stdout: &out, stderr: &errOut, proxyRuns: proxyRuns, backups: testBackups(t),
		recorderStatus: func(context.Context) string { return "recorder: stub" }}
	sc, ok := findSubcommand(cmd)
	if !ok {
		t.Fatalf("no command %s", cmd)
	}
	code = sc.run(context.Background(), c, args)
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

// backupsOf lists the backups the test's state directory holds for file.
func backupsOf(t *testing.T, state, file string) []mcpconfig.Backup {
	t.Helper()
	list, err := mcpconfig.Backups{Dir: filepath.Join(state, "bir-proxy", "backups")}.List(file)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func TestWrapUnwrapCommands(t *testing.T) {
	_, state := isolate(t)
	dir, path, orig := projectConfig(t, "claude-code-project.json")
	t.Chdir(dir) // the default config is .mcp.json in the working directory

	code, out, errOut := runCmd(t, "wrap", "--proxy-path", fakeProxy)
	if code != 0 {
		t.Fatalf("wrap: %d %s", code, errOut)
	}
	for _, want := range []string{
		"project scope: " + path + "\n",
		"  wrapped github\n", "  wrapped postgres\n", "  wrapped local-tool\n",
		"  wrapped sentry\n", "  wrapped linear\n",
		"  unchanged bir: the recorder's own server is never wrapped",
		path + ": wrapped 7 entries; the previous version is backup ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("wrap output lacks %q:\n%s", want, out)
		}
	}
	wrapped := readFile(t, path)
	if bytes.Equal(wrapped, orig) {
		t.Fatal("the file did not change")
	}
	if list := backupsOf(t, state, path); len(list) != 1 || !bytes.Equal(readFile(t, list[0].Path), orig) {
		t.Errorf("the backup is not the previous version: %+v", list)
	}

	code, out, _ = runCmd(t, "wrap", "--proxy-path", fakeProxy)
	if code != 0 || !strings.Contains(out, "nothing to change") || !bytes.Equal(readFile(t, path), wrapped) {
		t.Errorf("a second wrap: %d %s", code, out)
	}

	code, out, errOut = runCmd(t, "unwrap")
	if code != 0 {
		t.Fatalf("unwrap: %d %s", code, errOut)
	}
	if got := readFile(t, path); !bytes.Equal(got, orig) {
		t.Errorf("unwrap(wrap(x)) != x; got:\n%s", got)
	}
	if !strings.Contains(out, "  unwrapped github\n") {
		t.Errorf("unwrap output:\n%s", out)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the project holds more than its config: %v", ents)
	}
}

func TestWrapNamedAndFlagOrder(t *testing.T) {
	isolate(t)
	_, path, _ := projectConfig(t, "claude-code-project.json")
	// Flags after a name still count: --dry-run must not become a name.
	code, out, errOut := runCmd(t, "wrap", "--config", path, "fetch", "--proxy-path", fakeProxy, "github")
	if code != 0 {
		t.Fatalf("%d %s", code, errOut)
	}
	if !strings.HasPrefix(out, "config: "+path+"\n  wrapped github\n  wrapped fetch\n"+path+": wrapped 2 entries; the previous version is backup ") {
		t.Errorf("output:\n%s", out)
	}
	code, _, errOut = runCmd(t, "unwrap", "--config", path, "nope")
	if code != 1 || !strings.Contains(errOut, `no server named "nope"`) {
		t.Errorf("unknown name: %d %s", code, errOut)
	}
}

func TestWrapDryRun(t *testing.T) {
	_, state := isolate(t)
	_, path, orig := projectConfig(t, "tabs-crlf.json")
	code, out, errOut := runCmd(t, "wrap", "--dry-run", "--config", path, "--proxy-path", fakeProxy)
	if code != 0 {
		t.Fatalf("%d %s", code, errOut)
	}
	for _, want := range []string{
		"  would wrap git\n",
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
	if list := backupsOf(t, state, path); len(list) != 0 {
		t.Error("a dry run wrote a backup")
	}
}

func TestWrapBadInput(t *testing.T) {
	isolate(t)
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
			code, _, errOut := runCmd(t, "wrap", "--config", path, "--proxy-path", fakeProxy)
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
		code, out, errOut := runCmd(t, "wrap", "--config", path, "--proxy-path", fakeProxy)
		if code != 0 || !strings.Contains(out, "  wrapped ok\n") {
			t.Fatalf("%d %s %s", code, out, errOut)
		}
		if !strings.Contains(errOut, `warning: config: args-numbers: not understood ("args" holds something other than strings); left alone`) {
			t.Errorf("stderr:\n%s", errOut)
		}
	})
}

// claudeFixture is a project tree and a ~/.claude.json with several
// projects, as Claude Code leaves them: the repository root has a
// .mcp.json and local servers, a package inside it has local servers of
// its own, and unrelated projects share a prefix with it.
type claudeFixture struct {
	home, state, root, pkg, sub, claudeJSON, mcpJSON string
	claudeDoc, mcpDoc                                string
}

func newClaudeFixture(t *testing.T) claudeFixture {
	t.Helper()
	home, state := isolate(t)
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := claudeFixture{home: home, state: state, root: filepath.Join(base, "app")}
	f.pkg = filepath.Join(f.root, "packages", "api")
	f.sub = filepath.Join(f.root, "docs", "guide")
	for _, d := range []string{f.pkg, f.sub, filepath.Join(base, "application")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f.claudeJSON = filepath.Join(home, ".claude.json")
	f.claudeDoc = fmt.Sprintf(`{
  "numStartups": 3,
  "mcpServers": {"u": {"type": "stdio", "command": "user-mcp", "args": [], "env": {}}},
  "projects": {
    %q: {"mcpServers": {"o": {"command": "other-mcp"}}},
    %q: {"allowedTools": [], "mcpServers": {"l": {"type": "stdio", "command": "local-mcp", "args": [], "env": {}}}},
    %q: {"mcpServers": {"api": {"command": "api-mcp"}}},
    "/somewhere/else": {"mcpServers": {"e": {"command": "else-mcp"}}}
  }
}
`, filepath.Join(base, "application"), f.root, f.pkg)
	if err := os.WriteFile(f.claudeJSON, []byte(f.claudeDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	f.mcpJSON = filepath.Join(f.root, ".mcp.json")
	f.mcpDoc = `{"mcpServers": {"p": {"command": "project-mcp", "args": ["--flag"]}, "bir": {"command": "bir", "args": ["mcp"]}}}` + "\n"
	if err := os.WriteFile(f.mcpJSON, []byte(f.mcpDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestScopesFromASubdirectory: from a subdirectory, wrap, unwrap and status
// act on the files and scopes Claude Code would use there: the nearest
// .mcp.json above, and the project of ~/.claude.json that encloses the
// directory most closely; with no --scope, on all of them, and the three
// commands agree.
func TestScopesFromASubdirectory(t *testing.T) {
	f := newClaudeFixture(t)
	t.Chdir(f.sub)

	code, out, errOut := runCmd(t, "status")
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	for _, want := range []string{
		"project scope: " + f.mcpJSON + "\n  p    not wrapped  project-mcp --flag\n",
		"local scope: " + f.claudeJSON + " (project " + f.root + ")\n  l  not wrapped  local-mcp\n",
		"user scope: " + f.claudeJSON + "\n  u  not wrapped  user-mcp\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = runCmd(t, "wrap", "--proxy-path", fakeProxy)
	if code != 0 {
		t.Fatalf("wrap: %d %s", code, errOut)
	}
	for _, want := range []string{
		"project scope: " + f.mcpJSON + "\n  wrapped p\n",
		"local scope: " + f.claudeJSON + " (project " + f.root + ")\n  wrapped l\n",
		"user scope: " + f.claudeJSON + "\n  wrapped u\n",
		f.mcpJSON + ": wrapped 1 entry;",
		f.claudeJSON + ": wrapped 2 entries;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("wrap lacks %q:\n%s", want, out)
		}
	}
	got := string(readFile(t, f.claudeJSON))
	for _, want := range []string{
		`"u": {"type": "stdio", "command": "/opt/bir/bin/bir-proxy", "args": ["--server", "u", "user-mcp"], "env": {}}`,
		`"l": {"type": "stdio", "command": "/opt/bir/bin/bir-proxy", "args": ["--server", "l", "local-mcp"], "env": {}}`,
		`"api": {"command": "api-mcp"}`, `"o": {"command": "other-mcp"}`, `"e": {"command": "else-mcp"}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("~/.claude.json lacks %s:\n%s", want, got)
		}
	}
	// Local and user scope share the file: one write, one backup.
	if list := backupsOf(t, f.state, f.claudeJSON); len(list) != 1 || string(readFile(t, list[0].Path)) != f.claudeDoc {
		t.Errorf("backups of ~/.claude.json: %+v", list)
	}

	code, out, _ = runCmd(t, "status")
	for _, want := range []string{"  p    wrapped      project-mcp --flag\n", "  l  wrapped  local-mcp\n", "  u  wrapped  user-mcp\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status after wrap lacks %q (exit %d):\n%s", want, code, out)
		}
	}

	// A name is looked for in every scope; --scope narrows.
	if code, out, errOut := runCmd(t, "unwrap", "l"); code != 0 || !strings.Contains(out, "  unwrapped l\n") || strings.Contains(out, "unwrapped u") {
		t.Fatalf("unwrap l: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runCmd(t, "unwrap", "--scope", "user"); code != 0 || !strings.Contains(out, "user scope: ") || strings.Contains(out, "project scope") {
		t.Fatalf("unwrap --scope user: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runCmd(t, "unwrap"); code != 0 {
		t.Fatalf("unwrap: %s", errOut)
	}
	if got := string(readFile(t, f.claudeJSON)); got != f.claudeDoc {
		t.Errorf("unwrap(wrap(x)) != x:\n%s", got)
	}
	if got := string(readFile(t, f.mcpJSON)); got != f.mcpDoc {
		t.Errorf("unwrap(wrap(x)) != x:\n%s", got)
	}

	// In the nested package, its own project is the local scope.
	t.Chdir(f.pkg)
	code, out, _ = runCmd(t, "status", "--scope", "local")
	if code != 0 || !strings.Contains(out, "local scope: "+f.claudeJSON+" (project "+f.pkg+")\n  api  not wrapped  api-mcp\n") {
		t.Errorf("status in the package: %d\n%s", code, out)
	}
	// Outside every project, --scope local says so.
	t.Chdir(f.home)
	code, _, errOut = runCmd(t, "wrap", "--scope", "local", "--proxy-path", fakeProxy)
	if code != 1 || !strings.Contains(errOut, "has no project for "+f.home) {
		t.Errorf("--scope local outside any project: %d %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "wrap", "--scope", "project", "--proxy-path", fakeProxy)
	if code != 1 || !strings.Contains(errOut, "no .mcp.json in "+f.home+" or any directory above it") {
		t.Errorf("--scope project with no .mcp.json: %d %s", code, errOut)
	}
}

func TestStatus(t *testing.T) {
	isolate(t)
	_, path, _ := projectConfig(t, "claude-code-project.json")
	if code, _, errOut := runCmd(t, "wrap", "--config", path, "--proxy-path", fakeProxy, "github", "linear"); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := runCmd(t, "status", "--config", path)
	if code != 0 {
		t.Fatalf("%d %s", code, errOut)
	}
	defaults, _ := userconfig.DefaultPath()
	want := "config: " + path + `
  github      wrapped      npx -y @modelcontextprotocol/server-github
  filesystem  not wrapped  npx -y @modelcontextprotocol/server-filesystem /Users/dev/projects /Users/dev/Documents
  postgres    not wrapped  docker run -i --rm -e DATABASE_URL mcp/postgres -- --read-only
  fetch       not wrapped  uvx mcp-server-fetch --ignore-robots-txt
  sentry      not wrapped  https://mcp.sentry.dev/mcp  (remote, http)
  linear      wrapped      https://mcp.linear.app/sse  (remote, sse)
  local-tool  not wrapped  /usr/local/bin/my-mcp-server
  bir         not wrapped  bir mcp  (the recorder's own server)
the wrapped entries' /opt/bir/bin/bir-proxy runs: bir-proxy test
defaults file: ` + defaults + ` (none; docs/config.md)
recorder: stub
this bir-proxy: bir-proxy ` + version.Get().String() + "\n"
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

// TestStatusChecksTheProxyRuns: an entry wrapped with a bir-proxy that is
// not there (another machine's path) is BROKEN, and status fails.
func TestStatusChecksTheProxyRuns(t *testing.T) {
	isolate(t)
	proxy := testutil.Build(t, "./cmd/bir-proxy")
	path := filepath.Join(t.TempDir(), ".mcp.json")
	doc := fmt.Sprintf(`{"mcpServers": {
  "here": {"command": %q, "args": ["--server", "here", "srv"]},
  "there": {"command": "/home/teammate/bin/bir-proxy", "args": ["--server", "there", "srv"]}
}}`, proxy)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCmdWith(t, proxyRuns, "status", "--config", path)
	for _, want := range []string{
		"  here   wrapped  srv\n",
		"  there  BROKEN   srv  (/home/teammate/bin/bir-proxy does not run)\n",
		"the wrapped entries' " + proxy + " runs: bir-proxy ",
		"the wrapped entries' /home/teammate/bin/bir-proxy does not run: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("exit %d with a broken entry, want 1", code)
	}
}

// TestBackupsAndRestore: backups go to the state directory, 0600, one per
// write; unwrap --restore lists them and puts one back, keeping what it
// replaced; a backup an older bir-proxy left in the project moves out.
func TestBackupsAndRestore(t *testing.T) {
	_, state := isolate(t)
	dir, path, orig := projectConfig(t, "claude-code-project.json")
	if err := os.WriteFile(path+".bir-proxy.bak", orig, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if code, out, errOut := runCmd(t, "wrap", "--proxy-path", fakeProxy); code != 0 || !strings.Contains(out, "moved the backup an older bir-proxy left in the project") {
		t.Fatalf("wrap: %d %s %s", code, out, errOut)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the project holds more than its config: %v", ents)
	}
	wrapped := readFile(t, path)
	if code, _, errOut := runCmd(t, "unwrap", "github"); code != 0 {
		t.Fatal(errOut)
	}
	list := backupsOf(t, state, path)
	if len(list) != 3 {
		t.Fatalf("backups: %+v", list)
	}
	for _, bk := range list {
		if !strings.HasPrefix(bk.Path, filepath.Join(state, "bir-proxy", "backups")) {
			t.Errorf("backup outside the state directory: %s", bk.Path)
		}
		if fi, err := os.Stat(bk.Path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v %v", bk.Path, fi.Mode(), err)
		}
	}

	code, out, _ := runCmd(t, "unwrap", "--restore")
	if code != 0 || !strings.Contains(out, path+": 3 backups, oldest first") || !strings.Contains(out, "  "+list[2].ID+"  ") {
		t.Fatalf("listing: %d\n%s", code, out)
	}
	// Each backup says which write it was taken before (issue 39).
	for i, op := range []string{"kept beside the file by bir-proxy 0.1", "before wrap", "before unwrap github"} {
		if l := lineWith(out, list[i].ID); !strings.HasSuffix(l, "  "+op) {
			t.Errorf("backup %d is listed as %q, want it to end in %q", i, l, op)
		}
	}
	// The start of an ID will do.
	code, out, errOut := runCmd(t, "unwrap", "--restore", list[2].ID[:20])
	if code != 0 || !strings.Contains(out, "restored backup "+list[2].ID) {
		t.Fatalf("restore: %d %s %s", code, out, errOut)
	}
	if !bytes.Equal(readFile(t, path), wrapped) {
		t.Error("the restored file is not the backup")
	}
	if n := len(backupsOf(t, state, path)); n != 4 {
		t.Errorf("the version a restore replaced was not kept: %d backups", n)
	}
	_, out, _ = runCmd(t, "unwrap", "--restore")
	if l := lineWith(out, backupsOf(t, state, path)[3].ID); !strings.HasSuffix(l, "  before unwrap --restore "+list[2].ID) {
		t.Errorf("the restore's backup is listed as %q\n%s", l, out)
	}
	if code, _, errOut := runCmd(t, "unwrap", "--restore", "1999"); code != 1 || !strings.Contains(errOut, `no backup "1999"`) {
		t.Errorf("an unknown ID: %d %s", code, errOut)
	}
}

// TestWrapGitSharedFile: a .mcp.json git tracks gets a command that runs on
// every machine, bir-proxy from PATH, or is refused with the fix.
func TestWrapGitSharedFile(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if testutil.InCI() {
			t.Fatal("no git on PATH: CI checks the repository out with git, so it must be there")
		}
		t.Skip("no git")
	}
	isolate(t)
	dir, path, orig := projectConfig(t, "claude-code-project.json")
	for _, args := range [][]string{{"init", "-q"}, {"add", ".mcp.json"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	t.Chdir(dir)
	// Built before PATH is narrowed: the build needs the go command. (Run alone, the
	// test failed here; in the suite an earlier test's build was cached.)
	proxyBin := testutil.Build(t, "./cmd/bir-proxy")

	t.Setenv("PATH", t.TempDir()+string(os.PathListSeparator)+filepath.Dir(mustLookPath(t, "git")))
	code, out, errOut := runCmd(t, "wrap")
	if code != 1 || out != "" || !strings.Contains(errOut, "is tracked by git") || !strings.Contains(errOut, "Put bir-proxy on PATH") {
		t.Errorf("wrap of a shared file without bir-proxy on PATH: %d %q %q", code, out, errOut)
	}
	if !bytes.Equal(readFile(t, path), orig) {
		t.Fatal("a refused wrap wrote the file")
	}

	bin := t.TempDir()
	if err := os.Symlink(proxyBin, filepath.Join(bin, "bir-proxy")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	code, out, errOut = runCmd(t, "wrap", "github")
	if code != 0 || !strings.Contains(out, "is tracked by git: writing the command bir-proxy") {
		t.Fatalf("wrap with bir-proxy on PATH: %d %s %s", code, out, errOut)
	}
	if !strings.Contains(string(readFile(t, path)), `"command": "bir-proxy"`) {
		t.Errorf("wrote:\n%s", readFile(t, path))
	}
	if code, out, _ := runCmdWith(t, proxyRuns, "status"); code != 0 || !strings.Contains(out, "the wrapped entries' bir-proxy runs: bir-proxy ") {
		t.Errorf("status: %d\n%s", code, out)
	}
	// With nothing left to wrap, a shared file is not refused for want of
	// bir-proxy on PATH.
	if code, _, errOut := runCmd(t, "wrap", "--proxy-path", "bir-proxy"); code != 0 {
		t.Fatalf("wrap the rest: %s", errOut)
	}
	t.Setenv("PATH", filepath.Dir(mustLookPath(t, "git")))
	if code, out, errOut := runCmd(t, "wrap"); code != 0 || !strings.Contains(out, "nothing to change") {
		t.Errorf("wrap of a wrapped shared file: %d %s %s", code, out, errOut)
	}
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultProxyPath(t *testing.T) {
	var errOut bytes.Buffer
	p, err := wrapcmd.DefaultProxyPath(&errOut)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	if !filepath.IsAbs(p) || !mcpconfig.SameFile(p, exe) {
		t.Errorf("default proxy path %s is not this executable %s", p, exe)
	}
}

// TestWrappedEntryRuns wraps real entries, then starts each the way a host
// does — command, args and env taken from the file — and checks that the
// original server answers through the proxy.
func TestWrappedEntryRuns(t *testing.T) {
	isolate(t)
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
	if code, _, errOut := runCmd(t, "wrap", "--config", path, "--proxy-path", proxy); code != 0 {
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
	startAs := func(t *testing.T, name string, transform func([]string) []string) *testutil.Proc {
		e := cfg.MCPServers[name]
		if e.Command != proxy {
			t.Fatalf("%s runs %s, not the proxy", name, e.Command)
		}
		cmd := exec.Command(e.Command, transform(e.Args)...)
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
	start := func(t *testing.T, name string) *testutil.Proc {
		return startAs(t, name, func(a []string) []string { return a })
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
	// Tools that pass the entry on change it: the MCP Inspector's --config mode
	// splits its command line at the first "--" (what follows is not the
	// server's), and gemini mcp add drops every "--". The written form has
	// none, so the server starts either way.
	t.Run("host transforms", func(t *testing.T) {
		if slices.Contains(cfg.MCPServers["raw"].Args, "--") {
			t.Fatalf("wrap wrote a bare --: %q", cfg.MCPServers["raw"].Args)
		}
		for name, transform := range map[string]func([]string) []string{
			"inspector --config": func(a []string) []string {
				if i := slices.Index(a, "--"); i >= 0 {
					return a[:i]
				}
				return a
			},
			"gemini mcp add": func(a []string) []string {
				return slices.DeleteFunc(slices.Clone(a), func(s string) bool { return s == "--" })
			},
		} {
			t.Run(name, func(t *testing.T) {
				p := startAs(t, "raw", transform)
				p.Send(initialize)
				if got := p.ReadLine(); !strings.Contains(got, `"serverInfo":{"name":"rawserver"`) {
					t.Fatalf("initialize answered %s", got)
				}
			})
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

// lineWith is the first line of out that holds s, without its newline.
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
