package logcmd

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// run parses args as the command line of `bir-proxy log` and runs it.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	fs := flag.NewFlagSet("log", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := DefineFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	var out, errOut strings.Builder
	code = Run(t.Context(), Options{Stdout: &out, Stderr: &errOut, Flags: f, Args: fs.Args()})
	return code, out.String(), errOut.String()
}

// TestRunUsageErrors: a command line that cannot mean anything is one line on stderr,
// nothing on stdout and exit status 2, before any journal is read.
func TestRunUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"-n", "-1"}, "-n -1: want a count of 0 or more"},
		{[]string{"--show", "x", "--follow"}, "--show prints one call"},
		{[]string{"--show", "x", "--json"}, "--show prints one call"},
		{[]string{"--stats", "-n", "3"}, "--stats sums every call"},
		{[]string{"--outcome", "ok,bogus"}, `--outcome "bogus": want one of`},
		{[]string{"--since", "yesterday-ish"}, "yesterday-ish"},
	} {
		code, out, errOut := run(t, append(c.args, "--journal", filepath.Join(t.TempDir(), "none.jsonl"))...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 ||
			!strings.HasPrefix(errOut, "bir-proxy log: ") || !strings.Contains(errOut, c.want) ||
			!strings.HasSuffix(errOut, "(see bir-proxy help log)\n") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
}

// TestServerColumnWidth: the SERVER column is as wide as the longest name shown, up
// to 40 characters (a longer one is cut with …), a name's control characters
// counted as the escapes it is shown as, so every row's TOOL column starts where the
// header's does.
func TestServerColumnWidth(t *testing.T) {
	for _, c := range []struct {
		name    string
		servers []string
		width   int
		shown   string
	}{
		{"short names keep the header's width", []string{"a", "gh"}, len("SERVER"), "gh"},
		{"the longest name", []string{"a", "everything-older"}, len("everything-older"), "everything-older"},
		{"cut at 40", []string{"a", strings.Repeat("x", 50)}, 40, strings.Repeat("x", 39) + "…"},
		{"escaped", []string{"a", "evil\x1b[2J"}, len(`evil\x1b[2J`), `evil\x1b[2J`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.jsonl")
			for _, s := range c.servers {
				writeJournal(t, path, s)
			}
			code, out, errOut := run(t, "--journal", path)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if code != 0 || len(lines) != 1+len(c.servers) {
				t.Fatalf("exit %d, %d lines\n%s%s", code, len(lines), out, errOut)
			}
			col := strings.Index(lines[0], "SERVER")
			tool := col + c.width + 2
			if got := strings.Index(lines[0], "TOOL"); got != tool {
				t.Errorf("header: TOOL at %d, want %d\n%s", got, tool, out)
			}
			for _, l := range lines[1:] {
				r := []rune(l)
				if len(r) < tool+4 || string(r[tool:tool+4]) != "tool" || r[tool-1] != ' ' || r[tool-2] != ' ' {
					t.Errorf("row's TOOL column not at %d: %q", tool, l)
				}
			}
			if !strings.Contains(out, " "+c.shown+" ") {
				t.Errorf("%q not shown\n%s", c.shown, out)
			}
			if strings.ContainsRune(out, 0x1b) {
				t.Errorf("an ESC printed:\n%q", out)
			}
		})
	}
}

// writeJournal appends a call of server's to the journal at path, written by a real
// journal-mode Reporter, as the proxy writes it.
func writeJournal(t *testing.T, path, server string) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := recorder.Open(t.Context(), recorder.Config{Server: server, JournalPath: path, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r.Submit(recordertest.SampleStep("tool", 1))
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
