// Package verifycmd is `bir-proxy verify`: the recorded calls of a cassette (or of the
// journal) made again on a server, and what changed (package verify). The flags and
// the way to the server (the proxy's own: serverDial) are cmd/bir-proxy's.
package verifycmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/upstream"
	"github.com/bir-dev/bir-proxy/verify"
)

// Usage is the command's synopsis.
const Usage = "CASSETTE|DIR [CASSETTE|DIR...] [flags] -- COMMAND [ARGS...]  |  verify CASSETTE|DIR... --url URL  |  verify --from-journal --server NAME ..."

// About is the paragraph under its usage line.
const About = `Replays the tool calls of a cassette (recorded with bir-proxy --cassette) on
the server started by COMMAND, or at --url, making the handshake the recorded
host made, and says what changed: same, changed, error_drift, schema_drift,
missing_tool, slower, not_run, skipped, not_replayable. Only calls of tools
annotated readOnlyHint: true in both the recorded and the current tools/list
run, unless --allow-idempotent or --allow-writes. A cassette holds the raw
arguments of every call, secrets included: keep it private. Several
cassettes, or a folder's (its *.jsonl cassettes; hidden and other files are
skipped, saying so), are each verified on a server of their own, started
anew, then summed up; the exit status is the worst of theirs (2, 3, 1, 4, 0).
Exit status: 0 nothing changed, 1 something did, 2 bad usage or an unreadable
cassette, 3 the server could not be started or reached, 4 nothing was verified
(no call recorded, or every call skipped or not replayable; --allow-empty
exits 0 instead).`

// Dialer is how the server named server is reached: dial starts it (a command: a new
// process each time) or connects to it; closeAuth is called when done. On failure
// code is the exit status (2 flags that make no server, 3 OAuth not set up).
type Dialer func(server string) (dial func(context.Context) (upstream.Conn, error), closeAuth func(), code int, err error)

// Options are the command's: what it was asked, how the server is reached and where
// it prints.
type Options struct {
	Stdout, Stderr io.Writer
	Logger         *slog.Logger

	// Config is every run's: all but Open, Update and Dial, which Run sets.
	Config verify.Config
	// Cassettes are the cassettes and folders of them named; Journal, when set, is
	// read instead (--from-journal).
	Cassettes []string
	Journal   func() (verify.Source, error)
	// Server is --server: the server's name, or "" for the recording's.
	Server string
	Dial   Dialer

	Update     bool   // --update: write the new answers into the cassette
	JSON       bool   // --json, instead of the table
	JUnit      string // --junit FILE
	AllowEmpty bool   // exit 0, not 4, when nothing was verified
	// Color colours the table (a terminal); Progress adds a progress line on Stderr.
	Color, Progress bool

	// dials are the ways to the servers already set up, by name: several cassettes of
	// one server behind --url signed in once, not once each. A dial still starts a
	// new process (or session) each time.
	dials  map[string]func(context.Context) (upstream.Conn, error)
	closes []func()
}

// Run verifies; it returns the exit status (About).
func Run(ctx context.Context, o Options) int {
	defer func() {
		for _, c := range o.closes {
			c()
		}
	}()
	if o.Journal != nil {
		code, _ := o.runOne(ctx, "", o.JUnit, "")
		return code
	}
	paths, skipped := cassettes(o.Cassettes)
	if skipped != "" {
		fmt.Fprintf(o.Stderr, "bir-proxy verify: %s\n", skipped)
	}
	if len(paths) == 1 && len(o.Cassettes) == 1 && paths[0] == o.Cassettes[0] {
		code, _ := o.runOne(ctx, paths[0], o.JUnit, "") // one cassette named: as it always was
		return code
	}
	return o.runMany(ctx, paths)
}

// runOne verifies one recording (path, or the journal when path is ""), writing the
// JUnit report to junit; label, when set, names the cassette in what is printed
// (several are verified). It returns the exit status and the summary (nil when
// verify could not run).
func (o *Options) runOne(ctx context.Context, path, junitPath, label string) (int, *verify.Summary) {
	cfg := o.Config
	cfg.Logger = o.Logger
	if path == "" {
		cfg.Open, cfg.Redacted = o.Journal, true
	} else {
		cfg.Open = verify.FileSource(path)
		if o.Update {
			cfg.Update = path
		}
	}
	say := func(format string, a ...any) {
		prefix := "bir-proxy verify: "
		if label != "" {
			prefix += termtext.Line(label) + ": "
		}
		fmt.Fprintf(o.Stderr, prefix+format+"\n", a...)
	}
	server := o.Server
	if server == "" {
		server = "server"
		// Opened once here for the server's name, and that Source is the one Run
		// replays: a pipe (`verify <(…)`) opened again found empty what this read took.
		src, err := cfg.Open()
		if err == nil {
			server = src.Header().Server
		}
		open, first := cfg.Open, true
		cfg.Open = func() (verify.Source, error) {
			if first {
				first = false
				return src, err
			}
			return open()
		}
		defer func() {
			if first && src != nil {
				src.Close() // Run did not get as far as opening it
			}
		}()
	}
	dial, ok := o.dials[server]
	if !ok {
		d, closeAuth, code, err := o.Dial(server)
		if err != nil {
			say("%s", termtext.Line(err.Error()))
			return code, nil
		}
		if o.dials == nil {
			o.dials = map[string]func(context.Context) (upstream.Conn, error){}
		}
		dial, o.dials[server] = d, d
		o.closes = append(o.closes, closeAuth)
	}
	cfg.Dial = dial

	var sinks verify.Sinks
	if o.JSON {
		sinks = append(sinks, &verify.JSON{W: o.Stdout, Cassette: label})
	} else {
		sinks = append(sinks, &verify.Table{W: o.Stdout, Color: o.Color})
	}
	if o.Progress && !cfg.Plan {
		sinks = append(sinks, &verify.Progress{W: o.Stderr})
	}
	var junit *verify.JUnit
	if junitPath != "" {
		junit = &verify.JUnit{Path: junitPath}
		sinks = append(sinks, junit)
	}
	sum, err := verify.Run(ctx, cfg, sinks)
	var inErr *verify.InputError
	var unErr *verify.UnreachableError
	switch {
	case errors.As(err, &inErr):
		say("%s", termtext.Line(err.Error()))
		return 2, nil
	case errors.As(err, &unErr):
		say("%s", termtext.Line(err.Error()))
		return 3, nil
	case err != nil:
		say("%s", termtext.Line(err.Error()))
		return 1, nil
	}
	if junit != nil && junit.Err() != nil {
		say("writing %s: %v", termtext.Line(o.JUnit), junit.Err())
		return 2, sum
	}
	if sum.Findings > 0 {
		return 1, sum
	}
	if sum.Verified == 0 && !o.AllowEmpty {
		// A run that compared nothing is no pass: every call skipped (a server that
		// annotates no tool readOnlyHint) exited 0, a green CI that covered nothing.
		say("nothing was verified: %s (exit 4; --allow-empty exits 0)", termtext.Line(sum.Unverified))
		return 4, sum
	}
	return 0, sum
}
