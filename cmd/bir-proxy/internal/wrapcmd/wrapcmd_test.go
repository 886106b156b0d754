package wrapcmd

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/mcpconfig"
)

// parse defines verb's flags and parses args, as cmd/bir-proxy does.
func parse(t *testing.T, verb string, args ...string) (*Flags, []string, error) {
	t.Helper()
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := DefineFlags(fs, verb, Shared{})
	err := fs.Parse(args)
	return f, fs.Args(), err
}

// TestDefineFlagsPerVerb: each verb has its own flags and no other's, and their
// values land in Flags.
func TestDefineFlagsPerVerb(t *testing.T) {
	f, names, err := parse(t, "status", "--check", "--json", "--all", "--timeout", "3s", "--host", "cursor", "--scope", "project", "--config", "x.json")
	if err != nil || len(names) != 0 || !f.Check || !f.JSON || !f.All || f.Timeout != 3*time.Second ||
		f.Host != "cursor" || f.Scope != "project" || f.Config != "x.json" || f.verb != "status" {
		t.Errorf("status: %+v %q %v", f, names, err)
	}
	if f, _, _ := parse(t, "status"); f.Timeout != DefaultCheckTimeout || f.All {
		t.Errorf("status defaults: %+v", f)
	}
	f, names, err = parse(t, "wrap", "--dry-run", "--proxy-path", "/p", "--otlp-endpoint", "http://127.0.0.1:4318", "--otlp-capture", "--cassette", "d", "github", "fetch")
	if err != nil || !f.DryRun || f.ProxyPath != "/p" || f.OTLP != "http://127.0.0.1:4318" || !f.Capture || f.Cassettes != "d" ||
		strings.Join(names, " ") != "github fetch" {
		t.Errorf("wrap: %+v %q %v", f, names, err)
	}
	for verb, foreign := range map[string][]string{
		"status": {"--dry-run", "--restore", "--proxy-path=/p", "--mock=c"},
		"unwrap": {"--check", "--all", "--proxy-path=/p", "--otlp-capture"},
		"wrap":   {"--check", "--json", "--all", "--restore"},
	} {
		for _, a := range foreign {
			if _, _, err := parse(t, verb, a); err == nil {
				t.Errorf("%s took %s", verb, a)
			}
		}
	}
}

// TestRunUsageErrors: flags that do not go together are one line on stderr, nothing
// on stdout, exit status 2, before any file is looked for; a host whose format is not
// supported is exit status 1.
func TestRunUsageErrors(t *testing.T) {
	for _, c := range []struct {
		verb string
		args []string
		code int
		want string
	}{
		{"status", []string{"github"}, 2, `unexpected argument "github"`},
		{"status", []string{"--timeout", "0s"}, 2, "--timeout 0s: want a duration above 0"},
		{"status", []string{"--scope", "bogus"}, 2, `unknown scope "bogus"`},
		{"status", []string{"--host", "bogus"}, 2, "bogus"},
		{"wrap", []string{"--otlp-capture"}, 2, "--otlp-capture goes with --otlp-endpoint"},
		{"wrap", []string{"--mock", "c.jsonl"}, 2, "--mock CASSETTE points one entry at the mock"},
		{"wrap", []string{"--mock", "c.jsonl", "--cassette", "d", "x"}, 2, "not both"},
		{"unwrap", []string{"--restore", "a", "b"}, 2, "--restore takes one backup ID"},
		{"wrap", []string{"--host", "codex"}, 1, "Codex's TOML config is not supported yet"},
	} {
		f, names, err := parse(t, c.verb, c.args...)
		if err != nil {
			t.Fatalf("%s %q: %v", c.verb, c.args, err)
		}
		var out, errOut strings.Builder
		o := Options{Stdout: &out, Stderr: &errOut, Flags: f, Names: names,
			Backups: func() (mcpconfig.Backups, error) { t.Fatal("a file was looked for"); return mcpconfig.Backups{}, nil }}
		code := Run(context.Background(), o)
		got := errOut.String()
		if code != c.code || out.Len() != 0 || strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "bir-proxy "+c.verb+": ") || !strings.Contains(got, c.want) ||
			c.code == 2 && !strings.HasSuffix(got, "(see bir-proxy help "+c.verb+")\n") {
			t.Errorf("%s %q: exit %d, stdout %q, stderr %q; want %d and %q", c.verb, c.args, code, out.String(), got, c.code, c.want)
		}
	}
}
