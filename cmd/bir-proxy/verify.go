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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/authcmd"
	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/verifycmd"
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
	defineServerFlags(fs, p, "verify against the remote MCP server at URL instead of a command (${VAR} is expanded)")
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

// runVerify is `bir-proxy verify`: its room is verifycmd.
func runVerify(ctx context.Context, c *cli, args []string) int {
	defer startProfile()() // BIR_CPUPROFILE, BIR_MEMPROFILE: bir-bench -only verify -profile verify
	self, _ := findSubcommand("verify")
	fs := newFlagSet("bir-proxy verify")
	v := self.flags(fs).(*verifyFlags)
	// CASSETTE|DIR..., flags anywhere before --, then the command: `verify a.jsonl
	// cassettes/ --plan -- srv -x`. Without --, as before: one CASSETTE, flags, then
	// the command (`verify c.jsonl --plan srv -x`), or, with --url, every word a
	// cassette (`verify a.jsonl b.jsonl --url URL`).
	var cassettes, names []string
	var err error
	if i := slices.Index(args, "--"); i >= 0 {
		cassettes, err = parse(fs, args[:i], true)
		names = args[i+1:]
	} else {
		// Parsed on a second flag set first: a command's own flags are not verify's.
		fs2 := newFlagSet("bir-proxy verify")
		v2 := self.flags(fs2).(*verifyFlags)
		if words, err2 := parse(fs2, args, true); err2 == nil && v2.proxy.url != "" {
			v, cassettes = v2, words
		} else {
			names, err = parse(fs, args, false)
			if err == nil && !v.fromJournal && len(names) > 0 {
				cassettes = names[:1]
				names, err = parse(fs, names[1:], false)
			}
		}
	}
	switch {
	case errors.Is(err, errHelp):
		printCommandUsage(c.stdout, self)
		return 0
	case err != nil:
		return c.usageError("verify", err)
	case v.fromJournal && len(cassettes) > 0:
		return c.usageError("verify", errors.New("--from-journal reads the journal, not a cassette"))
	case !v.fromJournal && len(cassettes) == 0:
		return c.usageError("verify", errors.New("no cassette: bir-proxy verify CASSETTE|DIR [CASSETTE|DIR...] [flags] -- COMMAND [ARGS...]"))
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
	o := verifycmd.Options{
		Stdout: c.stdout, Stderr: c.stderr, Logger: logger,
		Config: verify.Config{
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
		},
		Cassettes: cassettes, Server: p.server, Update: v.update,
		JSON: v.json, JUnit: v.junit, AllowEmpty: v.allowEmpty,
		Color: isTerminal(c.stdout), Progress: isTerminal(c.stderr),
	}
	if v.fromJournal {
		open, err := journalSource(p, v.since)
		if err != nil {
			return c.usageError("verify", err)
		}
		o.Journal = open
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
	// The proxy's own way to a server (serverDial): the same start, remote and OAuth.
	o.Dial = func(server string) (func(context.Context) (upstream.Conn, error), func(), int, error) {
		q := *p
		q.server = server
		return q.serverDial(logger, peerErr, serverErr)
	}
	if v.concurrency == 1 && os.Getenv("GOMAXPROCS") == "" {
		// One call at a time: with a second P idle, every answer the session's reader
		// handed to the waiting call woke a second thread (futex wake, then sleep), a
		// quarter of verify's CPU per call (bir-bench -only verify -profile verify).
		runtime.GOMAXPROCS(1)
	}
	return verifycmd.Run(ctx, o)
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

// defineServerFlags defines the flags of a command that reaches a server as the proxy
// does (call, verify): --url with its transport, headers, timeout and OAuth, and the
// message cap and log level; urlUsage says what --url does for the command.
func defineServerFlags(fs *flag.FlagSet, p *proxyFlags, urlUsage string) {
	fs.StringVar(&p.url, "url", "", urlUsage)
	fs.StringVar(&p.transport, "transport", upstream.TransportAuto, "with --url: auto, http or sse")
	fs.Var((*repeated)(&p.headers), "header", "with --url: a header sent with every request, \"Name: value\" (repeatable; ${VAR} is expanded)")
	fs.Var((*repeated)(&p.headerFiles), "header-file", "with --url: a file of \"Name: value\" lines (repeatable)")
	fs.DurationVar(&p.connectTimeout, "connect-timeout", upstream.DefaultConnectTimeout, "with --url: how long to wait for a connection to the server")
	p.oauth = authcmd.DefineOAuthFlags(fs, true)
	fs.IntVar(&p.maxMessage, "max-message", 0, "largest message accepted, in bytes (default 256 MiB)")
	fs.StringVar(&p.logLevel, "log-level", envOr("BIR_LOG_LEVEL", "warn"), "debug, info, warn or error; at debug the server's stderr is shown too")
}
