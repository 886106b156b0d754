package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/mcpdiff"
	"github.com/bir-dev/bir-proxy/upstream"
	"github.com/bir-dev/bir-proxy/verify"
)

// verifyFlags are `bir-proxy verify`'s flags; the remote and OAuth ones are the
// proxy's own (proxyFlags), so a server is reached the same way.
type verifyFlags struct {
	proxy           proxyFlags
	concurrency     int
	allowIdempotent bool
	allowWrites     bool
	tools, skip     []string
	plan            bool
	json            bool
	junit           string
	maxSlowdown     string
	strict          bool
	ignore          []string
	update          bool
	timeout         time.Duration
	fromJournal     bool
	since           string
	allowEmpty      bool
}

func defineVerifyFlags(fs *flag.FlagSet) any {
	v := &verifyFlags{}
	p := &v.proxy
	fs.StringVar(&p.server, "server", "", "the server's name (default: the cassette's); with --from-journal, whose journal")
	fs.StringVar(&p.url, "url", "", "verify against the remote MCP server at URL instead of a command (${VAR} is expanded)")
	fs.StringVar(&p.transport, "transport", upstream.TransportAuto, "with --url: auto, http or sse")
	fs.Var((*repeated)(&p.headers), "header", "with --url: a header sent with every request, \"Name: value\" (repeatable; ${VAR} is expanded)")
	fs.Var((*repeated)(&p.headerFiles), "header-file", "with --url: a file of \"Name: value\" lines (repeatable)")
	fs.DurationVar(&p.connectTimeout, "connect-timeout", upstream.DefaultConnectTimeout, "with --url: how long to wait for a connection to the server")
	p.oauth = defineOAuthFlags(fs, true)
	fs.IntVar(&p.maxMessage, "max-message", 0, "largest message accepted, in bytes (default 256 MiB)")
	fs.StringVar(&p.logLevel, "log-level", envOr("BIR_LOG_LEVEL", "warn"), "debug, info, warn or error; at debug the server's stderr is shown too")
	fs.StringVar(&p.journal, "journal", "", "with --from-journal: the journal file (default: the server's)")
	fs.IntVar(&v.concurrency, "concurrency", 1, "calls in flight at most")
	fs.BoolVar(&v.allowIdempotent, "allow-idempotent", false, "also run tools annotated idempotentHint: true and destructiveHint: false")
	fs.BoolVar(&v.allowWrites, "allow-writes", false, "run every call, whatever its tool's annotations (it may change things: files, records, messages sent)")
	fs.Var((*repeated)(&v.tools), "tool", "only the calls of this tool (repeatable)")
	fs.Var((*repeated)(&v.skip), "skip-tool", "not the calls of this tool (repeatable)")
	fs.BoolVar(&v.plan, "plan", false, "say what would run and why, and run nothing (the server is only asked for its tools)")
	fs.BoolVar(&v.json, "json", false, "a JSON line per call and a summary line, instead of the table")
	fs.StringVar(&v.junit, "junit", "", "also write a JUnit XML report to `FILE`")
	fs.StringVar(&v.maxSlowdown, "max-slowdown", "", "flag a call that answers the same but this many times slower, e.g. 3x")
	fs.BoolVar(&v.strict, "strict", false, "compare volatile values too: timestamps, UUIDs, durations, the result's _meta")
	fs.Var((*repeated)(&v.ignore), "ignore", "a JSON `PATH` into the result not to compare, e.g. structuredContent.id or content[*].text.mtime (repeatable)")
	fs.BoolVar(&v.update, "update", false, "write the new answers into the cassette, accepting them (the old one is kept as CASSETTE.1)")
	fs.DurationVar(&v.timeout, "timeout", verify.DefaultCallTimeout, "how long one call may take")
	fs.BoolVar(&v.fromJournal, "from-journal", false, "replay the journal's calls instead of a cassette (those whose arguments lost nothing to redaction)")
	fs.StringVar(&v.since, "since", "", "with --from-journal: only calls this recent, e.g. 1h")
	fs.BoolVar(&v.allowEmpty, "allow-empty", false, "exit 0, not 4, when no call was verified (none recorded, or all skipped)")
	return v
}

const verifyAbout = `Replays the tool calls of a cassette (recorded with bir-proxy --cassette) on
the server started by COMMAND, or at --url, making the handshake the recorded
host made, and says what changed: same, changed, error_drift, schema_drift,
missing_tool, slower, not_run, skipped, not_replayable. Only calls of tools
annotated readOnlyHint: true in both the recorded and the current tools/list
run, unless --allow-idempotent or --allow-writes. A cassette holds the raw
arguments of every call, secrets included: keep it private.
Exit status: 0 nothing changed, 1 something did, 2 bad usage or an unreadable
cassette, 3 the server could not be started or reached, 4 nothing was verified
(no call recorded, or every call skipped or not replayable; --allow-empty
exits 0 instead).`

func runVerify(ctx context.Context, c *cli, args []string) int {
	defer startProfile()() // BIR_CPUPROFILE, BIR_MEMPROFILE: bir-bench -only verify -profile verify
	self, _ := findSubcommand("verify")
	fs := newFlagSet("bir-proxy verify")
	v := self.flags(fs).(*verifyFlags)
	// CASSETTE, then flags again, then the command: `verify c.jsonl --plan -- srv -x`.
	names, err := parse(fs, args, false)
	var cassettePath string
	if err == nil && !v.fromJournal {
		if len(names) == 0 {
			return c.usageError("verify", errors.New("no cassette: bir-proxy verify CASSETTE [flags] [--] COMMAND [ARGS...]"))
		}
		cassettePath = names[0]
		names, err = parse(fs, names[1:], false)
	}
	switch {
	case errors.Is(err, errHelp):
		printCommandUsage(c.stdout, self)
		return 0
	case err != nil:
		return c.usageError("verify", err)
	}
	p := &v.proxy
	p.command = names
	level, err := parseLogLevel(p.logLevel)
	if err != nil {
		return c.usageError("verify", err)
	}
	var slow float64
	if v.maxSlowdown != "" {
		slow, err = strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v.maxSlowdown), "x"), 64)
		if err != nil || slow <= 1 {
			return c.usageError("verify", fmt.Errorf("--max-slowdown %q: want a factor above 1, like 3x", v.maxSlowdown))
		}
	}
	switch {
	case p.url != "" && len(p.command) > 0:
		return c.usageError("verify", errors.New("give either --url or a server command, not both"))
	case p.url == "" && len(p.command) == 0:
		return c.usageError("verify", errors.New("no server: give its command after the cassette and flags, or --url"))
	case v.concurrency < 1:
		return c.usageError("verify", fmt.Errorf("--concurrency %d: want 1 or more", v.concurrency))
	case v.fromJournal && p.server == "":
		return c.usageError("verify", errors.New("--from-journal needs --server NAME: whose journal"))
	case v.fromJournal && v.update:
		return c.usageError("verify", errors.New("--update writes a cassette; the journal is not one"))
	case !v.fromJournal && v.since != "":
		return c.usageError("verify", errors.New("--since goes with --from-journal"))
	}
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level})).With("proxy", "bir-proxy verify")

	cfg := verify.Config{
		Concurrency:     v.concurrency,
		AllowIdempotent: v.allowIdempotent,
		AllowWrites:     v.allowWrites,
		Tools:           v.tools,
		SkipTools:       v.skip,
		Plan:            v.plan,
		Diff:            mcpdiff.Options{Strict: v.strict, Ignore: v.ignore},
		MaxSlowdown:     slow,
		CallTimeout:     v.timeout,
		IDPrefix:        "bir:verify:" + strconv.Itoa(os.Getpid()) + ":",
		Logger:          logger,
	}
	if v.fromJournal {
		open, err := journalSource(p, v.since)
		if err != nil {
			return c.usageError("verify", err)
		}
		cfg.Open, cfg.Redacted = open, true
	} else {
		cfg.Open = verify.FileSource(cassettePath)
		if v.update {
			cfg.Update = cassettePath
		}
	}
	if p.server == "" {
		p.server = "server"
		if src, err := cfg.Open(); err == nil {
			p.server = src.Header().Server
			src.Close()
		}
	}
	// What a server writes reaches the terminal escaped: its stderr (at debug), a
	// remote's stray event data, the OAuth prompts quoting its metadata, the errors
	// quoting its answers (ESC, BEL, OSC 52 went through as they were).
	peerErr := termtext.NewWriter(c.stderr)
	defer peerErr.Flush()
	serverErr := io.Writer(io.Discard)
	if level <= slog.LevelDebug {
		serverErr = peerErr
	}
	dial, closeAuth, code, err := p.serverDial(logger, peerErr, serverErr, cfg.IDPrefix)
	if err != nil {
		fmt.Fprintf(c.stderr, "bir-proxy verify: %s\n", termtext.Line(err.Error()))
		return code
	}
	defer closeAuth()
	cfg.Dial = dial

	var sinks verify.Sinks
	if v.json {
		sinks = append(sinks, &verify.JSON{W: c.stdout})
	} else {
		sinks = append(sinks, &verify.Table{W: c.stdout, Color: isTerminal(c.stdout)})
	}
	if isTerminal(c.stderr) && !v.plan {
		sinks = append(sinks, &verify.Progress{W: c.stderr})
	}
	var junit *verify.JUnit
	if v.junit != "" {
		junit = &verify.JUnit{Path: v.junit}
		sinks = append(sinks, junit)
	}
	if v.concurrency == 1 && os.Getenv("GOMAXPROCS") == "" {
		// One call at a time: with a second P idle, every answer the session's reader
		// handed to the waiting call woke a second thread (futex wake, then sleep), a
		// quarter of verify's CPU per call (bir-bench -only verify -profile verify).
		runtime.GOMAXPROCS(1)
	}
	sum, err := verify.Run(ctx, cfg, sinks)
	var inErr *verify.InputError
	var unErr *verify.UnreachableError
	switch {
	case errors.As(err, &inErr):
		fmt.Fprintf(c.stderr, "bir-proxy verify: %s\n", termtext.Line(err.Error()))
		return 2
	case errors.As(err, &unErr):
		fmt.Fprintf(c.stderr, "bir-proxy verify: %s\n", termtext.Line(err.Error()))
		return 3
	case err != nil:
		fmt.Fprintf(c.stderr, "bir-proxy verify: %s\n", termtext.Line(err.Error()))
		return 1
	}
	if junit != nil && junit.Err() != nil {
		fmt.Fprintf(c.stderr, "bir-proxy verify: writing %s: %v\n", v.junit, junit.Err())
		return 2
	}
	if sum.Findings > 0 {
		return 1
	}
	if sum.Verified == 0 && !v.allowEmpty {
		// A run that compared nothing is no pass: every call skipped (a server that
		// annotates no tool readOnlyHint) exited 0, a green CI that covered nothing.
		fmt.Fprintf(c.stderr, "bir-proxy verify: nothing was verified: %s (exit 4; --allow-empty exits 0)\n", sum.Unverified)
		return 4
	}
	return 0
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
