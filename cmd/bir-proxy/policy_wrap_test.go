package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatusShowsToolPolicy: an entry whose proxy has tool-policy flags is read
// right (the server's command after them, a value that looks like a flag kept as a
// value: a --correlation-key, since the proxy refuses a --log-level of
// "--ignore-tool" and status calls that entry BROKEN), status shows the flags for
// that server, wrap leaves the entry as it is, and unwrap gives back the server's
// own command.
func TestStatusShowsToolPolicy(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	path := filepath.Join(dir, ".mcp.json")
	orig := `{"mcpServers":{
  "github":{"command":"` + fakeProxy + `","args":["--server","github","--ignore-tool","delete_*","--allow-tool=*","--call-timeout","30s","--call-timeout-reset-on-progress","--correlation-key","--ignore-tool","npx","-y","@modelcontextprotocol/server-github"]},
  "plain":{"command":"` + fakeProxy + `","args":["--server","plain","uvx","x"]}
}}
`
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "status", "--config", path)
	if code != 0 {
		t.Fatalf("%d %s", code, errOut)
	}
	if !strings.Contains(out, "github  wrapped  npx -y @modelcontextprotocol/server-github  [--ignore-tool delete_* --allow-tool * --call-timeout 30s --call-timeout-reset-on-progress]\n") ||
		!strings.Contains(out, "plain   wrapped  uvx x\n") {
		t.Errorf("status:\n%s", out)
	}
	if code, _, errOut := runCmd(t, "wrap", "--config", path, "--proxy-path", fakeProxy); code != 0 {
		t.Fatal(errOut)
	}
	if got, _ := os.ReadFile(path); string(got) != orig {
		t.Errorf("wrap changed a wrapped entry:\n%s", got)
	}
	if code, _, errOut := runCmd(t, "unwrap", "--config", path, "github"); code != 0 {
		t.Fatal(errOut)
	}
	got, _ := os.ReadFile(path)
	if !strings.Contains(string(got), `"github":{"command":"npx","args":["-y","@modelcontextprotocol/server-github"]}`) {
		t.Errorf("unwrap:\n%s", got)
	}
}
