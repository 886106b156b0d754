package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// A real host reads what `wrap` wrote. Gemini CLI's settings are JSONC (comments
// allowed), in .gemini/settings.json; `gemini mcp list` starts each configured server
// and says whether it connected, with no model and no network, so it is the host's
// own judgement of the entry, not ours.

// geminiSettings is a project's settings as a user writes them: comments, and a
// server entry that works directly.
const geminiSettings = `{
  // the project's MCP servers
  "mcpServers": {
    /* the demo server, built by the test */
    "demo": {"command": "%SERVER%", "args": []}
  }
}
`

// TestGeminiCLIConnectsThroughWrap: wrap in a Gemini project (found without --config),
// the real Gemini CLI lists the entry Connected through bir-proxy, and unwrap gives
// back the file byte for byte, comments and all.
func TestGeminiCLIConnectsThroughWrap(t *testing.T) {
	s := newSuite(t)
	gemini := s.module(".bin/gemini")
	if _, err := os.Stat(gemini); err != nil {
		t.Fatalf("e2e: Gemini CLI is not installed (%v): run `npm ci` in e2e/", err)
	}
	proxy := testutil.Build(t, "./cmd/bir-proxy")
	server := testutil.Build(t, "./testdata/mcpserver")

	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	project := filepath.Join(tmp, "project")
	for _, d := range []string{filepath.Join(home, ".gemini"), filepath.Join(project, ".gemini")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Gemini CLI starts no project server in a folder the user has not trusted.
	trust := `{"` + project + `": "TRUST_FOLDER"}`
	if err := os.WriteFile(filepath.Join(home, ".gemini", "trustedFolders.json"), []byte(trust), 0o600); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(project, ".gemini", "settings.json")
	original := []byte(strings.ReplaceAll(geminiSettings, "%SERVER%", server))
	if err := os.WriteFile(settings, original, 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"HOME="+home,
		"XDG_STATE_HOME="+filepath.Join(tmp, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(tmp, "config"),
		"PATH="+filepath.Dir(proxy)+string(os.PathListSeparator)+filepath.Dir(s.node)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"NO_COLOR=1",
	)
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(testutil.Context(t), name, args...)
		cmd.Dir = project
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	connected := func(out, via string) {
		t.Helper()
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "demo:") && strings.Contains(line, via) && strings.Contains(line, "Connected") {
				return
			}
		}
		t.Fatalf("gemini mcp list: no line with demo, %q and Connected:\n%s", via, out)
	}

	// The checker first: the entry as written connects directly.
	connected(run(gemini, "mcp", "list"), server)

	wrapOut := run(proxy, "wrap")
	wrapped, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(wrapped, []byte("bir-proxy")) || !bytes.Contains(wrapped, []byte("// the project's MCP servers")) {
		t.Fatalf("wrap (%s) wrote:\n%s", wrapOut, wrapped)
	}
	connected(run(gemini, "mcp", "list"), "bir-proxy --server demo")

	run(proxy, "unwrap")
	back, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, original) {
		t.Fatalf("unwrap did not give back the file:\n--- want\n%s\n--- got\n%s", original, back)
	}
}
