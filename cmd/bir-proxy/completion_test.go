package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestBashCompletion: the bash script, sourced by a real bash and asked as bash asks
// (COMP_WORDS, COMP_CWORD), offers the commands, each command's flags, and the server
// names the built binary finds in the project's .mcp.json and the journal.
func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := testutil.Build(t, "./cmd/bir-proxy")
	dir, home, state := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, ".mcp.json"), `{"mcpServers": {
  "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"]},
  "linear": {"command": "/opt/bin/bir-proxy", "args": ["--server", "linear", "linear-mcp"]},
  "bir": {"command": "bir", "args": ["mcp"]}}}`)
	if err := os.MkdirAll(filepath.Join(state, "bir-proxy", "journal"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(state, "bir-proxy", "journal", "old-server.jsonl"), "")
	script, err := exec.Command(bin, "completion", "bash").Output()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "c.bash"), string(script))

	complete := func(line ...string) []string {
		t.Helper()
		// The words as bash splits them; the last is the one being completed.
		words := append([]string{bin}, line...)
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+w+"'")
		}
		cmd := exec.Command("bash", "--norc", "--noprofile", "-c",
			`source ./c.bash; COMP_WORDS=(`+strings.Join(quoted, " ")+`); COMP_CWORD=`+
				strconv.Itoa(len(words)-1)+`; _bir_proxy; printf '%s\n' "${COMPREPLY[@]}"`)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_STATE_HOME=" + state}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("completing %q: %v\n%s", line, err, out)
		}
		got := strings.Fields(string(out))
		slices.Sort(got)
		return got
	}
	for _, tc := range []struct {
		line      []string
		want      []string
		wantExact bool
	}{
		{[]string{"wr"}, []string{"wrap"}, false}, // and the commands on PATH: the server's command
		{[]string{"comp"}, []string{"completion"}, false},
		{[]string{"wrap", ""}, []string{"github"}, true}, // not the wrapped one, not bir
		{[]string{"unwrap", ""}, []string{"linear"}, true},
		{[]string{"wrap", "--d"}, []string{"--dry-run"}, true},
		{[]string{"wrap", "--scope", ""}, []string{"local", "project", "user"}, true},
		{[]string{"log", "--server", ""}, []string{"bir", "github", "linear", "old-server"}, true},
		{[]string{"log", "--fo"}, []string{"--follow"}, true},
		{[]string{"--serv"}, []string{"--server"}, true},
		{[]string{"--ver"}, []string{"--version"}, true},
		{[]string{"help", "st"}, []string{"status"}, true},
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}, true},
	} {
		got := complete(tc.line...)
		if tc.wantExact && !slices.Equal(got, tc.want) || !tc.wantExact && !containsAll(got, tc.want) {
			t.Errorf("completing %q: got %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestCompletionScripts: every shell's script names every command and every flag of
// each, and an unknown shell is a usage error.
func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := runArgs("completion", sh)
		if code != 0 {
			t.Fatalf("completion %s: %d %s", sh, code, errOut)
		}
		for _, sc := range subcommands() {
			if !strings.Contains(out, sc.name) {
				t.Errorf("%s: no command %s", sh, sc.name)
			}
			for _, f := range commandCompletionFlags(sc) {
				if !strings.Contains(out, f.name) {
					t.Errorf("%s: no flag --%s of %s", sh, f.name, sc.name)
				}
			}
		}
		for _, f := range proxyCompletionFlags() {
			if !strings.Contains(out, f.name) {
				t.Errorf("%s: no proxy flag --%s", sh, f.name)
			}
		}
	}
	if code, _, errOut := runArgs("completion", "tcsh"); code != 2 || !strings.Contains(errOut, `"tcsh"`) {
		t.Errorf("completion tcsh: %d %q", code, errOut)
	}
	if code, _, _ := runArgs("completion"); code != 2 {
		t.Errorf("completion with no shell: %d", code)
	}
	if _, err := exec.LookPath("bash"); err == nil {
		_, out, _ := runArgs("completion", "bash")
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(out)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("bash -n of the bash script: %v\n%s", err, b)
		}
	}
}

func containsAll(got, want []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
