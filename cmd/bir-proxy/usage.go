package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/editdist"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/relay"
)

// Flags are shown the way CLI users expect them (issue 40): `--name PLACEHOLDER`, the
// placeholder saying what the value is (NAME, URL, FILE, DURATION), never Go's
// `-name string`; and a mistyped flag gets a "did you mean".

// placeholders name the value of the flags whose usage does not (a `WORD` in backquotes
// does). TestEveryValueFlagHasAPlaceholder holds every flag to one or the other.
var placeholders = map[string]string{
	"config": "FILE", "scope": "SCOPE", "proxy-path": "PATH", "journal": "FILE", "n": "N",
	"outcome": "OUTCOME", "server": "NAME", "show": "ID", "since": "WHEN", "tool": "NAME",
	"client-id": "ID", "client-metadata-url": "URL", "client-secret": "SECRET", "oauth-port": "PORT",
	"oauth-scope": "SCOPE", "timeout": "DURATION", "url": "URL", "concurrency": "N",
	"connect-timeout": "DURATION", "header": `"NAME: VALUE"`, "header-file": "FILE", "log-level": "LEVEL",
	"max-message": "BYTES", "max-slowdown": "FACTOR", "oauth-wait": "DURATION", "skip-tool": "NAME",
	"transport": "KIND", "correlation-key": "KEY", "journal-keep": "N", "journal-max-mb": "MB",
	"recorder": "URL", "stop-grace": "DURATION", "host": "HOST", "latency": "MODE",
}

// placeholder is what stands for f's value in the help; "" for a flag that takes none.
func placeholder(f *flag.Flag) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return ""
	}
	name, _ := flag.UnquoteUsage(f)
	if strings.Contains(f.Usage, "`") {
		return name
	}
	if p := placeholders[f.Name]; p != "" {
		return p
	}
	return "VALUE"
}

// printFlags prints fs's flags, sorted, as `  --name PLACEHOLDER` and the usage below.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		line := "  --" + f.Name
		if p := placeholder(f); p != "" {
			line += " " + p
		}
		_, usage := flag.UnquoteUsage(f)
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "0s" && d != "[]" {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		fmt.Fprintf(w, "%s\n      %s\n", line, strings.ReplaceAll(usage, "\n", "\n      "))
	})
}

// withSuggestion is a flag parse error with "did you mean --x?" when a defined flag
// is near the one given (a typo of one or two letters, a missing dash-word).
func withSuggestion(err error, fs *flag.FlagSet) error {
	const undefined = "flag provided but not defined: "
	msg := err.Error()
	if !strings.HasPrefix(msg, undefined) {
		return err
	}
	given := strings.TrimLeft(strings.TrimPrefix(msg, undefined), "-")
	if s := nearestFlag(given, fs); s != "" {
		return fmt.Errorf("unknown flag --%s; did you mean --%s?", given, s)
	}
	return errors.New("unknown flag --" + given)
}

// nearestFlag is the defined flag closest to name, within an edit distance that a
// typo makes (at most 2, and less than half the name); "" when none is.
func nearestFlag(name string, fs *flag.FlagSet) string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d <= 2 && d*2 < len(f.Name) {
			cs = append(cs, cand{f.Name, d})
		}
	})
	if len(cs) == 0 {
		return ""
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].d < cs[j].d || cs[i].d == cs[j].d && cs[i].name < cs[j].name })
	return cs[0].name
}

// nearestWord is the word of words closest to w within a typo's distance, for "did
// you mean" on commands too; "" when none is.
func nearestWord(w string, words []string) string {
	best, bd := "", 3
	for _, c := range words {
		if d := editDistance(w, c); d < bd && d*2 < len(c) {
			best, bd = c, d
		}
	}
	return best
}

// editDistance is the distance of two short words (adjacent swaps count one),
// capped: flag names are short, and a long one is no typo of another.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	return editdist.Of([]byte(a), []byte(b))
}

// A host that started bir-proxy with a command line it cannot run (a mistyped flag in
// a hand-written entry, a word that is neither a command nor a program) shows the
// user only "Connection closed": its initialize gets no answer, and the usage error
// went to a stderr few hosts show. So, as for a server that cannot start, each
// request the host sends in the next moments is answered with the error.

// hostAnswerWindow is how long requests are answered after the start, and
// hostAnswerTail after the last answer: a host sends initialize at once, and maybe a
// request or two behind it.
const (
	hostAnswerWindow = 2 * time.Second
	hostAnswerTail   = 100 * time.Millisecond
	hostAnswerMax    = 1 << 20 // a line past it is not read whole
)

// answerHost answers each request read from in within the window with a JSON-RPC
// error carrying msg, written to out. It does nothing when in is a terminal (a
// person typing, not a host). It returns when in ends or the window closes.
func answerHost(in *os.File, out io.Writer, msg string) {
	if st, err := in.Stat(); err != nil || st.Mode()&os.ModeCharDevice != 0 {
		return
	}
	lines := make(chan []byte)
	done := make(chan struct{})
	defer close(done)
	go func() {
		r := framing.NewReader(in, framing.WithMaxMessage(hostAnswerMax))
		for {
			line, err := r.Read()
			if err != nil {
				close(lines)
				return
			}
			select {
			case lines <- line:
			case <-done:
				return
			}
		}
	}()
	deadline := time.NewTimer(hostAnswerWindow)
	defer deadline.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return
			}
			answered := false
			jsonlex.EachRPC(line, func(_ []byte, f jsonlex.Fields) {
				if f.Method != nil && f.ID != nil {
					out.Write(append(jsonlex.ErrorResponse(f.ID, relay.ServerErrorCode, msg), '\n'))
					answered = true
				}
			})
			if answered {
				deadline.Reset(hostAnswerTail)
			}
		case <-deadline.C:
			return
		}
	}
}

// unknownWord is the usage error of a first word that is neither one of bir-proxy's
// commands nor a program on PATH (`bir-proxy staus`, `bir-proxy version`), "" for one
// that may be a server's command. A wrapped entry always begins with a flag, so only
// a command line typed by hand begins with a bare word.
func unknownWord(args []string) string {
	if len(args) == 0 || args[0] == "" || strings.HasPrefix(args[0], "-") || strings.ContainsAny(args[0], `/\`) {
		return ""
	}
	if _, err := exec.LookPath(args[0]); err == nil {
		return ""
	}
	w := args[0]
	if w == "version" {
		return `unknown command "version"; did you mean --version?`
	}
	var names []string
	for _, sc := range subcommands() {
		names = append(names, sc.name)
	}
	if near := nearestWord(w, names); near != "" {
		return fmt.Sprintf("unknown command %q; did you mean %q?", printableWord(w), near)
	}
	return fmt.Sprintf("unknown command %q: not one of bir-proxy's commands (bir-proxy help lists them), nor a program on PATH", printableWord(w))
}

// printableWord is w with control characters escaped, for a message quoting it.
func printableWord(w string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, w)
}
