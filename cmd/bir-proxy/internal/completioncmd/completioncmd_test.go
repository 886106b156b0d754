package completioncmd

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestJournalServers: a journal's server is offered when its file name keeps the
// name as it is; other files, folders and a missing dir give nothing.
func TestJournalServers(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"github.jsonl", "linear.jsonl", "github.jsonl.1", "notes.txt", ".jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.jsonl"), 0o700); err != nil {
		t.Fatal(err)
	}
	got := journalServers(dir)
	slices.Sort(got)
	if want := []string{"github", "linear"}; !slices.Equal(got, want) {
		t.Errorf("journalServers: got %q, want %q", got, want)
	}
	if got := journalServers(filepath.Join(dir, "none")); got != nil {
		t.Errorf("journalServers of a missing dir: %q", got)
	}
}

// TestFishQuote: a fish word in single quotes, its backslashes and quotes escaped.
func TestFishQuote(t *testing.T) {
	for in, want := range map[string]string{
		"status":      `'status'`,
		"it's":        `'it\'s'`,
		`C:\dir`:      `'C:\\dir'`,
		`a\'b`:        `'a\\\'b'`,
		"":            `''`,
		"bash zsh fi": `'bash zsh fi'`,
	} {
		if got := fishQuote(in); got != want {
			t.Errorf("fishQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestRunDescription: the scripts are written from the Description they are given:
// its commands, in order, and their flags, a value-taking one as such.
func TestRunDescription(t *testing.T) {
	d := Description{
		Commands: []Command{
			{Name: "alpha", Summary: "the first", Flags: []Flag{{Name: "level", Usage: "how much", TakesValue: true}, {Name: "quiet", Usage: "say less"}}},
			{Name: "help", Summary: "help"},
		},
		Proxy: []Flag{{Name: "server", Usage: "the name", TakesValue: true}},
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(Options{Stdout: &out, Stderr: &errOut, Description: d, Args: args})
		return code, out.String(), errOut.String()
	}
	code, bash, _ := run("bash")
	for _, want := range []string{
		"    alpha)\n      :\n      case \"$prev\" in --level|-level) return ;; esac\n",
		`compgen -W "--level --quiet"`,
		`compgen -W "alpha help"`,
		"case \"$prev\" in --server|-server) return ;; esac",
	} {
		if code != 0 || !strings.Contains(bash, want) {
			t.Errorf("bash (%d): no %q in\n%s", code, want, bash)
		}
	}
	code, fish, _ := run("fish")
	for _, want := range []string{
		"complete -c bir-proxy -n __fish_use_subcommand -a alpha -d 'the first'\n",
		"complete -c bir-proxy -n '__fish_seen_subcommand_from alpha' -l level -r -d 'how much'\n",
		"complete -c bir-proxy -n '__fish_seen_subcommand_from alpha' -l quiet -d 'say less'\n",
		"complete -c bir-proxy -n __fish_use_subcommand -l server -r -d 'the name'\n",
		"complete -c bir-proxy -n '__fish_seen_subcommand_from help' -a 'alpha help'\n",
	} {
		if code != 0 || !strings.Contains(fish, want) {
			t.Errorf("fish (%d): no %q in\n%s", code, want, fish)
		}
	}
	if code, _, errOut := run("tcsh"); code != 2 || errOut != "bir-proxy completion: no completion for \"tcsh\": bash, zsh or fish (see bir-proxy help completion)\n" {
		t.Errorf("tcsh: %d %q", code, errOut)
	}
	if code, _, errOut := run(); code != 2 || errOut != "bir-proxy completion: give one shell: bash, zsh or fish (see bir-proxy help completion)\n" {
		t.Errorf("no shell: %d %q", code, errOut)
	}
}
