// Package logcmd is `bir-proxy log`: the calls bir-proxy recorded, from the journal
// and the spool (recorder/logview reads and prints them), one in full, or summed
// per server and tool.
package logcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/recorder/logview"
)

// Usage is the command's synopsis.
const Usage = "[flags]  |  log --show ID  |  log --stats [--json]"

// About is the paragraph under its usage line.
const About = `Prints the calls bir-proxy recorded: the journal (reports written when no
recorder is configured) and the reports waiting in the spool for a recorder
that was not reachable. --show prints one call in full; its ID is in the
table's first column. --stats sums them per server and tool (calls, errors,
durations, result sizes), most costly first: by total result bytes sent to
the host, then by calls × median duration.`

// Flags are the command's flags.
type Flags struct {
	o        logview.LogOptions
	outcomes string
	since    string
	stats    bool
}

// DefineFlags defines the command's flags on fs.
func DefineFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.o.Server, "server", "", "only this server's calls")
	fs.StringVar(&f.o.Tool, "tool", "", "only calls of this tool")
	fs.StringVar(&f.outcomes, "outcome", "", "only calls with these outcomes, comma-separated: "+strings.Join(logview.Outcomes, ", "))
	fs.BoolVar(&f.o.Failed, "failed", false, "only calls that failed: "+strings.Join(logview.FailedOutcomes, ", "))
	fs.StringVar(&f.since, "since", "", "only calls since then: a duration back (15m, 2h, 3d), a date (2026-03-01), a time today (09:30) or an RFC 3339 time")
	fs.StringVar(&f.o.Show, "show", "", "print the call with this ID (the table's first column) in full: arguments, result, error")
	fs.StringVar(&f.o.Path, "journal", "", "one journal file (default: every journal in $XDG_STATE_HOME/bir-proxy/journal, and the spool)")
	fs.BoolVar(&f.o.Follow, "follow", false, "keep printing calls as they are recorded")
	fs.BoolVar(&f.o.JSON, "json", false, "print the reports as JSON lines (a waiting one starts with \"waiting\":true)")
	fs.IntVar(&f.o.Limit, "n", 0, "only the last N calls (0: all)")
	fs.BoolVar(&f.stats, "stats", false, "per server and tool: calls, errors, p50/p95 duration, result size (p50, max, as the server sent it), trimmed; "+
		"sorted by cost (total result bytes, then calls × p50). Percentiles are nearest-rank, over every call up to 100,000 per tool, "+
		"then a uniform sample of that many. With --json: {\"tools\":[{\"server\",\"tool\",\"calls\",\"errors\",\"p50Ms\",\"p95Ms\",\"resultBytesP50\",\"resultBytesMax\",\"trimmed\"}]}")
	return f
}

// Options are what Run runs with.
type Options struct {
	Stdout, Stderr io.Writer
	Flags          *Flags
	Args           []string // the words after the flags: none is taken
}

// Run runs the command; it returns the exit status: 0, 1 when the journal could not
// be read, 2 for a usage error.
func Run(ctx context.Context, opts Options) int {
	usage := func(err error) int {
		fmt.Fprintf(opts.Stderr, "bir-proxy log: %s (see bir-proxy help log)\n", strings.TrimSpace(err.Error()))
		return 2
	}
	f := opts.Flags
	o := f.o
	switch {
	case len(opts.Args) > 0:
		return usage(fmt.Errorf("unexpected argument %q", opts.Args[0]))
	case o.Limit < 0:
		return usage(fmt.Errorf("-n %d: want a count of 0 or more", o.Limit))
	case o.Show != "" && (o.Follow || o.JSON):
		return usage(errors.New("--show prints one call; it does not go with --follow or --json"))
	case f.stats && (o.Show != "" || o.Follow || o.Limit != 0):
		return usage(errors.New("--stats sums every call; it does not go with --show, --follow or -n"))
	}
	if f.outcomes != "" {
		for _, oc := range strings.Split(f.outcomes, ",") {
			oc = strings.TrimSpace(oc)
			if !slices.Contains(logview.Outcomes, oc) {
				return usage(fmt.Errorf("--outcome %q: want one of %s", oc, strings.Join(logview.Outcomes, ", ")))
			}
			o.Outcomes = append(o.Outcomes, oc)
		}
	}
	if f.since != "" {
		t, err := logview.ParseSince(f.since, time.Now())
		if err != nil {
			return usage(err)
		}
		o.Since = t
	}
	o.Notes = opts.Stderr
	o.Recorder = func() string { return waitingFor(ctx) }
	print := logview.PrintLog
	if f.stats {
		print = logview.PrintStats
	}
	if err := print(ctx, opts.Stdout, o); err != nil && ctx.Err() == nil {
		fmt.Fprintf(opts.Stderr, "bir-proxy log: %v\n", err)
		return 1
	}
	return 0
}

// waitingFor names the recorder spooled reports wait for, as far as this directory
// knows: the spool does not record which recorder a report was meant for, so it is the
// one a proxy started here would use.
func waitingFor(ctx context.Context) string {
	cwd, _ := os.Getwd()
	ep, err := recorder.Discover(recorder.DiscoverOptions{Env: os.Getenv, Dir: cwd})
	if err != nil || ep == nil {
		return "the recorder their proxy was configured with (none is configured here)"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := recorder.Ping(ctx, ep); err != nil {
		return fmt.Sprintf("the recorder at %s (from %s), which is not reachable: %v", ep.URL, ep.Source, err)
	}
	return fmt.Sprintf("the recorder at %s (from %s), which is reachable now", ep.URL, ep.Source)
}
