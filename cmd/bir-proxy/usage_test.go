package main

import (
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestEveryValueFlagHasAPlaceholder: every flag that takes a value names it in the
// help (NAME, URL, DURATION...), never Go's type name nor a bare VALUE.
func TestEveryValueFlagHasAPlaceholder(t *testing.T) {
	check := func(where string, fs *flag.FlagSet) {
		fs.VisitAll(func(f *flag.Flag) {
			switch p := placeholder(f); p {
			case "VALUE", "string", "value", "int", "duration", "float", "uint":
				t.Errorf("%s --%s shows %q: give its usage a `PLACEHOLDER` or add it to placeholders", where, f.Name, p)
			}
		})
	}
	for _, sc := range subcommands() {
		fs := newFlagSet(sc.name)
		sc.flags(fs)
		check(sc.name, fs)
	}
	fs := newFlagSet("bir-proxy")
	defineProxyFlags(fs)
	check("bir-proxy", fs)
	// The checker checks: a flag with no placeholder is caught.
	probe := newFlagSet("probe")
	probe.String("mystery", "", "no placeholder here")
	var caught bool
	probe.VisitAll(func(f *flag.Flag) { caught = placeholder(f) == "VALUE" })
	if !caught {
		t.Error("a flag without a placeholder was not caught")
	}
}

// TestHelpShowsDoubleDashFlags: help prints --flag PLACEHOLDER, as the README writes
// them.
func TestHelpShowsDoubleDashFlags(t *testing.T) {
	out, _ := exec.Command(testutil.Build(t, "./cmd/bir-proxy"), "--help").Output()
	if !strings.Contains(string(out), "\n  --server NAME\n") || strings.Contains(string(out), "\n  -server") {
		t.Errorf("help:\n%s", out)
	}
}

// TestMistypedFlagSuggests: a mistyped flag is a usage error (status 2) naming the
// nearest flag, for the proxy and a subcommand; one near nothing gets no guess.
func TestMistypedFlagSuggests(t *testing.T) {
	bin := testutil.Build(t, "./cmd/bir-proxy")
	for args, want := range map[string]string{
		"--sever typo echo":  "unknown flag --sever; did you mean --server?",
		"log --sevrer x":     "unknown flag --sevrer; did you mean --server?",
		"--call-timout 1s x": "did you mean --call-timeout?",
		"--zzzzzzzzzz echo":  "unknown flag --zzzzzzzzzz (see",
		"wrap --dryrun":      "did you mean --dry-run?",
	} {
		cmd := exec.Command(bin, strings.Fields(args)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), want) {
			t.Errorf("bir-proxy %s: %v\n%s\nwant status 2 and %q", args, err, out, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"sever", "server", 1}, {"staus", "status", 1}, {"sevrer", "server", 1}, {"abc", "abc", 0}, {"", "ab", 2}, {"wrap", "unwrap", 2}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

// TestUnknownWordAndTypoAnswerTheHost: a first word that is neither a command nor a
// program on PATH, and a mistyped flag in a hand-written entry, are usage errors
// (status 2) with a suggestion; a host waiting on stdin gets each request answered
// with it, and no file is left in the state folder.
func TestUnknownWordAndTypoAnswerTheHost(t *testing.T) {
	bin := testutil.Build(t, "./cmd/bir-proxy")
	for args, want := range map[string]string{
		"staus":                  `did you mean \"status\"?`,
		"version":                "did you mean --version?",
		"doctor":                 "not one of bir-proxy's commands",
		"--sever typo some-tool": "did you mean --server?",
	} {
		state := t.TempDir()
		cmd := exec.Command(bin, strings.Fields(args)...)
		cmd.Env = append(cmd.Environ(), "XDG_STATE_HOME="+state, "BIR_OFF=0")
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("bir-proxy %s: %v, want status 2", args, err)
		}
		if got := stdout.String(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"bir-proxy`) ||
			!strings.Contains(got, want) || strings.Count(got, "\n") != 1 {
			t.Errorf("bir-proxy %s: the host got %q, want one answer with %q", args, got, want)
		}
		if !strings.Contains(stderr.String(), strings.ReplaceAll(want, `\"`, `"`)) {
			t.Errorf("bir-proxy %s: stderr %q", args, stderr.String())
		}
		if ents, _ := os.ReadDir(state); len(ents) > 0 {
			t.Errorf("bir-proxy %s left %v in the state folder", args, ents)
		}
	}
}
