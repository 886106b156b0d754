package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/internal/version"
	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/pins"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/recorder/logview"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/upstream"
)

// closeGrace is how long the proxy, at exit, lets reports still in flight reach the
// recorder. What doesn't make it stays in the spool for the next run; a host waiting
// for its server to exit should not wait on the recorder.
const closeGrace = time.Second

// reporting wraps the recorder's Reporter, which is absent under BIR_OFF=1 or when it
// could not be opened; the session goes on either way.
type reporting struct {
	r  *recorder.Reporter
	id string
}

// openReporter finds where reports go (SPEC §5): a recorder, or else the journal.
func openReporter(ctx context.Context, f *proxyFlags, log *slog.Logger) *reporting {
	if off() {
		return &reporting{id: randomID()}
	}
	cwd, _ := os.Getwd()
	ep, err := recorder.Discover(recorder.DiscoverOptions{Flag: f.recorderURL, Env: os.Getenv, Dir: cwd, AllowRemote: f.allowRemote, Logger: log})
	if err != nil {
		// A recorder we may not talk to (not loopback, a discovery file that is
		// unreadable or that others could have written): reports go to the journal
		// rather than nowhere.
		log.Warn("not using the configured recorder; reports go to the journal", "err", err)
		ep = nil
	}
	r, err := recorder.Open(ctx, recorder.Config{
		Endpoint:    ep,
		Server:      f.server,
		Version:     version.Get().String(),
		Upstream:    f.upstreamFacts(),
		JournalPath: f.journal,
		// The flags' zero or negative values take the defaults.
		JournalMaxBytes: int64(f.journalMaxMB) << 20,
		JournalKeep:     f.journalKeep,
		SpoolMax:        f.spoolMax.n,
		Logger:          log,
	})
	if err != nil {
		log.Warn("recording is off for this session", "err", err)
		return &reporting{id: randomID()}
	}
	return &reporting{r: r, id: r.ProxyID()}
}

// upstreamFacts is how the registration describes the upstream. A remote one is its
// URL as given (${VAR} references unexpanded: they name secrets, they are not ones),
// with credentials and query secrets redacted. For auto, the registration at start
// says "http" (what is tried first); a fallback to HTTP+SSE, learnt from the first
// POST's answer, is registered again (settledTransport).
func (f *proxyFlags) upstreamFacts() recorder.Upstream {
	if f.url == "" {
		return recorder.Upstream{Transport: "stdio", Command: f.command}
	}
	transport := "http"
	if f.transport == upstream.TransportSSE {
		transport = "sse"
	}
	return recorder.Upstream{Transport: transport, URL: redact.URL(f.url)}
}

// settledTransport passes on the transport a remote connection settled on.
func (p *reporting) settledTransport(t string) {
	if p.r != nil {
		p.r.SettledTransport(t)
	}
}

func (p *reporting) sink() report.Sink {
	if p.r == nil {
		return nil // an untyped nil: intercept then only removes the key
	}
	return p.r
}

func (p *reporting) proxyID() string { return p.id }

// drift journals a tool's drift from its pin (journal mode only: Reporter.Drift).
func (p *reporting) drift(s pins.Status) {
	if p.r != nil {
		p.r.Drift(journal.DriftOf{Tool: s.Name, Status: s.Status, Changed: s.Changed, From: s.From}, time.Now())
	}
}

// learned passes on what a revived server said about itself: the recorder registers
// again (SPEC §5), as after the first handshake.
func (p *reporting) learned(f report.ServerFacts) {
	if p.r != nil {
		p.r.Learned(f)
	}
}

// remote is the recorder replay dispatches come from: nil under BIR_OFF and in
// journal mode, where nothing may be asked of a recorder.
func (p *reporting) remote() *recorder.Remote {
	if p.r == nil {
		return nil
	}
	return p.r.Remote()
}

func (p *reporting) close() {
	if p.r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	_ = p.r.Close(ctx)
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// recorderStatus describes where this directory's reports would go, in one line, and
// then what waits in the spool and what was dropped from it, a line per server.
func recorderStatus(ctx context.Context) string {
	if off() {
		return "BIR_OFF is set: nothing is recorded"
	}
	line := recorderLine(ctx)
	state, err := recorder.DefaultStateDir()
	if err != nil {
		return line
	}
	sts, err := recorder.SpoolStatus(state)
	if err != nil {
		return line + "\nspool: " + err.Error()
	}
	return line + spoolLines(sts)
}

// spoolLines describes the spool of each server, each line after a newline.
func spoolLines(sts []recorder.SpoolState) string {
	var b strings.Builder
	for _, st := range sts {
		if st.Files > 0 {
			fmt.Fprintf(&b, "\nspool: %s: %s in %d file(s) waiting for the recorder", st.Server, humanSize(st.Bytes), st.Files)
		}
		if st.Dropped > 0 {
			fmt.Fprintf(&b, "\nspool: %s: %d reports dropped because the spool was full (--spool-max), the last at %s",
				st.Server, st.Dropped, st.LastDrop.Local().Format(time.DateTime))
		}
	}
	return b.String()
}

func humanSize(n int64) string {
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/(1<<10), "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1<<10 {
			break
		}
		v, unit = v/(1<<10), u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

func recorderLine(ctx context.Context) string {
	cwd, _ := os.Getwd()
	ep, err := recorder.Discover(recorder.DiscoverOptions{Env: os.Getenv, Dir: cwd})
	if err != nil {
		return "recorder misconfigured: " + err.Error()
	}
	if ep == nil {
		state, err := recorder.DefaultStateDir()
		if err != nil {
			return "no recorder configured, and no state directory: " + err.Error()
		}
		return "no recorder configured: reports go to the journal " + journal.Dir(state)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := recorder.Ping(ctx, ep); err != nil {
		return fmt.Sprintf("recorder at %s (from %s) is not reachable: %v; reports wait in the spool", ep.URL, ep.Source, err)
	}
	return fmt.Sprintf("recorder reachable at %s (from %s)", ep.URL, ep.Source)
}

// logFlags are the flags of bir-proxy log.
type logFlags struct {
	o        logview.LogOptions
	outcomes string
	since    string
	stats    bool
}

func defineLogFlags(fs *flag.FlagSet) *logFlags {
	f := &logFlags{}
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

func runLog(ctx context.Context, c *cli, args []string) int {
	sc, _ := findSubcommand("log")
	opts, rest, code, ok := c.parseCommand(sc, args, false)
	if !ok {
		return code
	}
	f := opts.(*logFlags)
	o := f.o
	switch {
	case len(rest) > 0:
		return c.usageError("log", fmt.Errorf("unexpected argument %q", rest[0]))
	case o.Limit < 0:
		return c.usageError("log", fmt.Errorf("-n %d: want a count of 0 or more", o.Limit))
	case o.Show != "" && (o.Follow || o.JSON):
		return c.usageError("log", errors.New("--show prints one call; it does not go with --follow or --json"))
	case f.stats && (o.Show != "" || o.Follow || o.Limit != 0):
		return c.usageError("log", errors.New("--stats sums every call; it does not go with --show, --follow or -n"))
	}
	if f.outcomes != "" {
		for _, oc := range strings.Split(f.outcomes, ",") {
			oc = strings.TrimSpace(oc)
			if !slices.Contains(logview.Outcomes, oc) {
				return c.usageError("log", fmt.Errorf("--outcome %q: want one of %s", oc, strings.Join(logview.Outcomes, ", ")))
			}
			o.Outcomes = append(o.Outcomes, oc)
		}
	}
	if f.since != "" {
		t, err := logview.ParseSince(f.since, time.Now())
		if err != nil {
			return c.usageError("log", err)
		}
		o.Since = t
	}
	o.Notes = c.stderr
	o.Recorder = func() string { return waitingFor(ctx) }
	print := logview.PrintLog
	if f.stats {
		print = logview.PrintStats
	}
	if err := print(ctx, c.stdout, o); err != nil && ctx.Err() == nil {
		fmt.Fprintf(c.stderr, "bir-proxy log: %v\n", err)
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
