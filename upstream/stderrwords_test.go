package upstream

import (
	"strings"
	"testing"
)

func TestCleanLine(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[1;31merror:\x1b[0m two\r":   "error: two",
		"\tthree\tfour  ":                 "three four",
		"bell\x07 and \xff":               "bell and ?",
		"osc\x1b]52;c;aGk=\x07 clipboard": "osc clipboard",
		strings.Repeat("é", 200):          strings.Repeat("é", 150) + "…",
	} {
		if got := CleanLine([]byte(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestStderrWords: the lines that say what went wrong are shown, not only the last
// ones, which for a Node server that cannot find its module say nothing.
func TestStderrWords(t *testing.T) {
	node := strings.Split(`node:internal/modules/cjs/loader:1228
  throw err;
  ^

Error: Cannot find module '/srv/index.js'
    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)
    at Module._load (node:internal/modules/cjs/loader:1051:27)
    at node:internal/main/run_main_module:28:49 {
  code: 'MODULE_NOT_FOUND',
  requireStack: []
}

Node.js v20.20.2`, "\n")
	for _, c := range []struct {
		name  string
		lines []string
		n     int
		want  string
	}{
		{"node", node, 4, "its stderr: … | Error: Cannot find module '/srv/index.js' | … | requireStack: [] | } | Node.js v20.20.2"},
		{"python", []string{"Traceback (most recent call last):", `  File "s.py", line 3`, "ModuleNotFoundError: No module named 'mcp'"}, 2,
			"its stderr: Traceback (most recent call last): | … | ModuleNotFoundError: No module named 'mcp'"},
		{"all fit", []string{"starting", "fatal: GITHUB_TOKEN is not set", "bye"}, 6, "its stderr: starting | fatal: GITHUB_TOKEN is not set | bye"},
		{"nothing", []string{"", "  ", "\x1b[0m"}, 4, ""},
		{"go panic", []string{"ok", "panic: boom", "goroutine 1 [running]:", "main.main()", "exit status 2"}, 3, "its stderr: … | panic: boom | … | main.main() | exit status 2"},
	} {
		if got := StderrWords(c.lines, c.n); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
