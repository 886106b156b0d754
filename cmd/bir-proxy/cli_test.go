package main

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/mcpconfig"
)

// runArgs runs bir-proxy's command line in-process, as main would.
func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	c := &cli{stdout: &out, stderr: &errOut, proxyRuns: stubProxyRuns, backups: backups,
		recorderStatus: func(context.Context) string { return "recorder: stub" }}
	code = runWith(c, args)
	return code, out.String(), errOut.String()
}

// TestUsageErrors: every usage error exits 2 with one line on stderr that
// says what was wrong, and nothing on stdout.
func TestUsageErrors(t *testing.T) {
	isolate(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"wrap", "--bogus"}, "unknown flag --bogus"},
		{[]string{"wrap", "--scope", "bogus"}, `unknown scope "bogus"`},
		{[]string{"wrap", "--proxy-path"}, "flag needs an argument"},
		{[]string{"wrap", "--restore"}, "-restore"},
		{[]string{"unwrap", "--bogus"}, "-bogus"},
		{[]string{"unwrap", "--restore", "a", "b"}, "--restore takes one backup ID"},
		{[]string{"status", "extra"}, `unexpected argument "extra"`},
		{[]string{"status", "--dry-run"}, "-dry-run"},
		{[]string{"status", "--scope", "global"}, `unknown scope "global"`},
		{[]string{"log", "--bogus"}, "-bogus"},
		{[]string{"log", "extra"}, `unexpected argument "extra"`},
		{[]string{"log", "--outcome", "ok,nope"}, `--outcome "nope"`},
		{[]string{"log", "--since", "last tuesday"}, `--since "last tuesday"`},
		{[]string{"log", "-n", "-1"}, "-n -1"},
		{[]string{"log", "--show", "ab:1", "--follow"}, "--show prints one call"},
		{[]string{"help", "nope"}, `no command "nope"`},
		{[]string{"help", "wrap", "log"}, "one command at a time"},
		{[]string{"--bogus", "srv"}, "-bogus"},
		{[]string{"--log-level", "loud", "srv"}, `--log-level "loud"`},
		{[]string{"--max-message", "-1", "srv"}, "--max-message -1"},
		{[]string{"--stop-grace", "-1s", "srv"}, "--stop-grace -1s"},
		{[]string{"--server", "x"}, "no server command"},
		{nil, "no server command"},
	} {
		code, out, errOut := runArgs(tc.args...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if code != 2 || out != "" || len(lines) != 1 || !strings.Contains(errOut, tc.says) || !strings.HasPrefix(errOut, "bir-proxy") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, nothing, and one line with %q", tc.args, code, out, errOut, tc.says)
		}
	}
}

// TestHelp: one usage text per command, on stdout, exit 0; `help COMMAND`
// is the same text as `COMMAND --help`.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "bir-proxy — a transparent MCP proxy"},
		{[]string{"--help"}, "bir-proxy — a transparent MCP proxy"},
		{[]string{"-h"}, "bir-proxy — a transparent MCP proxy"},
		{[]string{"help", "wrap"}, "Usage: bir-proxy wrap "},
		{[]string{"wrap", "--help"}, "Usage: bir-proxy wrap "},
		{[]string{"unwrap", "-h"}, "Usage: bir-proxy unwrap "},
		{[]string{"status", "--help"}, "Usage: bir-proxy status "},
		{[]string{"log", "--help"}, "Usage: bir-proxy log "},
		{[]string{"help", "help"}, "Usage: bir-proxy help "},
		{[]string{"help", "--help"}, "Usage: bir-proxy help "},
	} {
		code, out, errOut := runArgs(tc.args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, stdout:\n%s", tc.args, code, errOut, out)
		}
		if n := strings.Count(out, "Usage:"); n != 1 {
			t.Errorf("%q: the usage is printed %d times:\n%s", tc.args, n, out)
		}
	}
	if _, a, _ := runArgs("help", "wrap"); true {
		if _, b, _ := runArgs("wrap", "--help"); a != b {
			t.Errorf("help wrap and wrap --help differ:\n%s\n---\n%s", a, b)
		}
	}
	_, out, _ := runArgs("help")
	for _, want := range []string{"bir-proxy wrap ", "bir-proxy unwrap ", "bir-proxy status ", "bir-proxy log ", "bir-proxy help ", "-server", "-log-level"} {
		if !strings.Contains(out, want) {
			t.Errorf("the overview lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := runArgs("--version"); code != 0 || !strings.HasPrefix(out, "bir-proxy ") {
		t.Errorf("--version: %d %q", code, out)
	}
}

// TestTakesValueMatchesProxyFlags: reading a wrapped entry finds the server's
// command after the proxy's flags, so mcpconfig must know exactly which of
// them take a value.
func TestTakesValueMatchesProxyFlags(t *testing.T) {
	fs := newFlagSet("bir-proxy")
	defineProxyFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		bf, isBool := f.Value.(interface{ IsBoolFlag() bool })
		takes := !(isBool && bf.IsBoolFlag())
		if mcpconfig.TakesValue(f.Name) != takes {
			t.Errorf("--%s takes a value: %v, but mcpconfig.TakesValue says %v", f.Name, takes, !takes)
		}
	})
}
