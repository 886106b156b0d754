package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/mcpconfig"
)

// TestWrapCassette: wrap --cassette DIR gives every wrapped entry, stdio and remote,
// its own cassette file in DIR (an absolute path), and unwrap still restores the file
// byte for byte.
func TestWrapCassette(t *testing.T) {
	isolate(t)
	dir, path, orig := projectConfig(t, "claude-code-project.json")
	t.Chdir(dir)
	code, _, errOut := runCmd(t, "wrap", "--proxy-path", fakeProxy, "--cassette", "cassettes")
	if code != 0 {
		t.Fatalf("wrap: %d %s", code, errOut)
	}
	wrapped := readFile(t, path)
	var doc struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(wrapped, &doc); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("cassettes")
	n := 0
	for name, e := range doc.MCPServers {
		if !mcpconfig.IsProxyCommand(e.Command) {
			continue
		}
		n++
		want := "--cassette " + filepath.Join(abs, name+".jsonl")
		if !strings.Contains(strings.Join(e.Args, " "), want) {
			t.Errorf("%s: args %q lack %q", name, e.Args, want)
		}
	}
	if n < 5 {
		t.Fatalf("%d wrapped entries:\n%s", n, wrapped)
	}
	if code, _, errOut := runCmd(t, "unwrap"); code != 0 || !bytes.Equal(readFile(t, path), orig) {
		t.Fatalf("unwrap: %d %s\n%s", code, errOut, readFile(t, path))
	}
}

// TestWrapCarriesProxyFlags: wrap --otlp-endpoint, --otlp-capture, --pin-tools,
// --read-only and --max-result-tokens are written into every wrapped entry (Claude Code gives servers no
// OTEL_* variables: the endpoint must be in the arguments), status shows the policy,
// and unwrap still restores the file byte for byte.
func TestWrapCarriesProxyFlags(t *testing.T) {
	isolate(t)
	dir, path, orig := projectConfig(t, "claude-code-project.json")
	t.Chdir(dir)
	code, _, errOut := runCmd(t, "wrap", "--proxy-path", fakeProxy, "--otlp-endpoint", "http://127.0.0.1:4318",
		"--otlp-capture", "--pin-tools", "block", "--read-only", "--max-result-tokens", "auto")
	if code != 0 {
		t.Fatalf("wrap: %d %s", code, errOut)
	}
	var doc struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(readFile(t, path), &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, e := range doc.MCPServers {
		if !mcpconfig.IsProxyCommand(e.Command) {
			continue
		}
		n++
		args := strings.Join(e.Args, " ")
		for _, want := range []string{"--otlp-endpoint http://127.0.0.1:4318", "--otlp-capture", "--pin-tools block", "--read-only", "--max-result-tokens auto"} {
			if !strings.Contains(args, want) {
				t.Errorf("%s: args %q lack %q", name, e.Args, want)
			}
		}
	}
	if n < 5 {
		t.Fatalf("%d wrapped entries", n)
	}
	if code, out, _ := runCmd(t, "status"); !strings.Contains(out, "--pin-tools block --read-only") {
		t.Errorf("status (%d) does not show the policy:\n%s", code, out)
	}
	if code, _, _ := runCmd(t, "wrap", "--proxy-path", fakeProxy, "--max-result-tokens", "lots"); code != 2 {
		t.Errorf("--max-result-tokens lots: status %d, want 2", code)
	}
	if code, _, _ := runCmd(t, "wrap", "--proxy-path", fakeProxy, "--otlp-capture"); code != 2 {
		t.Errorf("--otlp-capture without --otlp-endpoint: status %d, want 2", code)
	}
	if code, _, errOut := runCmd(t, "unwrap"); code != 0 || !bytes.Equal(readFile(t, path), orig) {
		t.Fatalf("unwrap: %d %s\n%s", code, errOut, readFile(t, path))
	}
}

// TestWrapMock: wrap --mock CASSETTE NAME points the entry at bir-proxy mock (the host
// gets the recorded answers, and the server's command, which does not exist here, is
// never started), status shows it, and unwrap gives the file back byte for byte.
func TestWrapMock(t *testing.T) {
	_, _ = isolate(t)
	bp := testutil.Build(t, "./cmd/bir-proxy")
	rs := testutil.Build(t, "./testdata/rawserver")
	dir := t.TempDir()
	cas := filepath.Join(dir, "c.jsonl")
	rec := testutil.Start(t, exec.Command(bp, "--cassette", cas, "--", rs, "--reply"))
	recorded := mockSession(t, rec, mockScript)
	rec.Stdin.Close()
	if code := rec.ExitCode(); code != 0 {
		t.Fatalf("the recording proxy exited %d: %s", code, rec.Stderr.String())
	}

	path := filepath.Join(dir, ".mcp.json")
	orig := []byte(`{
  "mcpServers": {
    "gone": {"command": "/no/such/server", "args": ["--stdio"]},
    "other": {"command": "npx", "args": ["-y", "other"]}
  }
}
`)
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "wrap", "--config", path, "--mock", cas); code != 2 || !strings.Contains(errOut, "name it") {
		t.Errorf("wrap --mock without a NAME: %d %s", code, errOut)
	}
	if code, out, errOut := runCmd(t, "wrap", "--config", path, "--proxy-path", bp, "--mock", cas, "gone"); code != 0 {
		t.Fatalf("wrap --mock: %d %s %s", code, out, errOut)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(readFile(t, path), &cfg); err != nil {
		t.Fatal(err)
	}
	e := cfg.MCPServers["gone"]
	if e.Command != bp || !strings.Contains(strings.Join(e.Args, " "), "--mock "+cas+" /no/such/server --stdio") {
		t.Fatalf("the mocked entry: %+v", e)
	}
	if o := cfg.MCPServers["other"]; o.Command != "npx" {
		t.Errorf("an entry not named was changed: %+v", o)
	}

	m := testutil.Start(t, exec.Command(e.Command, e.Args...))
	mocked := mockSession(t, m, mockScript)
	for id, a := range recorded {
		if answerBytes(mocked[id]) != answerBytes(a) {
			t.Errorf("id %s:\n mock %s\n  was %s", id, mocked[id], a)
		}
	}
	m.Stdin.Close()
	if code := m.ExitCode(); code != 0 {
		t.Fatalf("the mocked entry exited %d: %s", code, m.Stderr.String())
	}

	if _, out, _ := runCmd(t, "status", "--config", path); !strings.Contains(out, "[--mock "+cas+"]") {
		t.Errorf("status does not show the mock:\n%s", out)
	}
	if code, _, errOut := runCmd(t, "unwrap", "--config", path); code != 0 {
		t.Fatalf("unwrap: %s", errOut)
	}
	if got := readFile(t, path); !bytes.Equal(got, orig) {
		t.Errorf("unwrap did not give the file back:\n%s", got)
	}
}
