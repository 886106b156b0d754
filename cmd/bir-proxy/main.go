// Command bir-proxy sits between an MCP host and an MCP server, relays every message
// unchanged, and records every tools/call. See README.md and docs/ARCHITECTURE.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/authcmd"
	"github.com/bir-dev/bir-proxy/internal/version"
	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/servername"
	"github.com/bir-dev/bir-proxy/toolpolicy"
	"github.com/bir-dev/bir-proxy/upstream"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == upstream.SuperviseArg {
		// syscall.Exit, not os.Exit: the supervisor has nothing to flush, and in a
		// race-detector build os.Exit sleeps a second first (GORACE atexit_sleep_ms),
		// which made the proxy's exit after a host closed stdin take over the two
		// seconds an SDK host waits before it sends SIGTERM.
		syscall.Exit(upstream.Supervise(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:]))
}

// run is the whole program; it returns the exit status.
func run(args []string) int {
	return runWith(&cli{stdout: os.Stdout, stderr: os.Stderr, recorderStatus: recorderStatus, proxyRuns: proxyRuns, backups: backups}, args)
}

// runWith runs a subcommand, or else the proxy, printing through c.
func runWith(c *cli, args []string) int {
	if len(args) > 0 {
		if sc, ok := findSubcommand(args[0]); ok {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return sc.run(ctx, c, args[1:])
		}
	}
	return runProxy(c, args)
}

type proxyFlags struct {
	server         string
	correlationKey string
	recorderURL    string
	allowRemote    bool
	journal        string
	journalMaxMB   int
	journalKeep    int
	spoolMax       sizeFlag
	maxMessage     int
	streamAt       int // BIR_STREAM_THRESHOLD, as relay.Options.StreamThreshold
	stopGrace      time.Duration
	noRevive       bool
	logLevel       string
	showVersion    bool
	command        []string

	// A remote upstream (--url) instead of a command.
	url            string // as given, ${VAR} references unexpanded
	transport      string
	headers        []string
	headerFiles    []string
	connectTimeout time.Duration
	oauth          *authcmd.OAuthFlags
	policy         *toolpolicy.Policy
	// maxResultTokens is --max-result-tokens as given; resultTokens its value.
	maxResultTokens string
	resultTokens    int
	otlp            *otlpFlags
	cassette        *cassetteFlags
	pinTools        string // --pin-tools, BIR_PIN_TOOLS (pins.go)
	readOnly        bool   // --read-only (pins.go)
	logFile         string // --log-file (logfile.go)
	cassetteDir     string // the configuration file's cassette-dir (userconfig.go)
	mock            string // --mock CASSETTE (wrap --mock): answer as bir-proxy mock does
}

// repeated is a flag that may be given many times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ", ") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// defineProxyFlags defines the flags of the proxy itself on fs. Every flag
// that takes a value must be one mcpconfig.TakesValue knows, or a wrapped
// entry using it would be misread (a test checks).
func defineProxyFlags(fs *flag.FlagSet) *proxyFlags {
	f := &proxyFlags{}
	fs.StringVar(&f.server, "server", "", "the server's name in reports and logs (default: the package or program the command runs; with --url, its host)")
	fs.StringVar(&f.correlationKey, "correlation-key", envOr("BIR_CORRELATION_KEY", "_bir_call_id"), "argument key the host hook adds to each tools/call (env BIR_CORRELATION_KEY)")
	fs.StringVar(&f.recorderURL, "recorder", "", "recorder URL (default: BIR_RECORDER_URL, then .bir/recorder.json)")
	fs.BoolVar(&f.allowRemote, "allow-remote-recorder", false, "allow a recorder that is not on a loopback address")
	fs.StringVar(&f.journal, "journal", "", "journal file used when no recorder is configured (default: $XDG_STATE_HOME/bir-proxy/journal/SERVER.jsonl)")
	fs.IntVar(&f.journalMaxMB, "journal-max-mb", journal.DefaultMaxBytes>>20, "size in MiB at which the journal is rotated to JOURNAL.1, JOURNAL.2, ...")
	fs.IntVar(&f.journalKeep, "journal-keep", journal.DefaultKeep, "rotated journal files kept besides the one being written (older ones are deleted)")
	f.spoolMax.n = recorder.DefaultSpoolMax
	fs.Var(&f.spoolMax, "spool-max", "most disk the reports waiting for a recorder that is down may take, per server, as a `SIZE` like 1GiB; past it the oldest are dropped")
	fs.IntVar(&f.maxMessage, "max-message", 0, "largest message accepted, in bytes (default 256 MiB)")
	fs.DurationVar(&f.stopGrace, "stop-grace", upstream.DefaultInputGrace, "how long the server has to exit after its stdin closes, before SIGTERM")
	fs.BoolVar(&f.noRevive, "no-revive", false, "when the server dies, end the session with its status instead of starting it again")
	fs.StringVar(&f.logLevel, "log-level", envOr("BIR_LOG_LEVEL", "info"), "debug, info, warn or error (env BIR_LOG_LEVEL)")
	fs.StringVar(&f.logFile, "log-file", "", "also append the proxy's stderr lines to `FILE` (0600; rotated at 10 MiB to FILE.1), for hosts that hide a server's stderr")
	fs.StringVar(&f.url, "url", "", "a remote MCP server's URL (Streamable HTTP or HTTP+SSE) instead of a command; ${VAR} is expanded")
	fs.StringVar(&f.transport, "transport", upstream.TransportAuto, "with --url: auto (Streamable HTTP, falling back to HTTP+SSE), http or sse")
	fs.Var((*repeated)(&f.headers), "header", "with --url: a header sent with every request, \"Name: value\" (repeatable; ${VAR} is expanded)")
	fs.Var((*repeated)(&f.headerFiles), "header-file", "with --url: a file of \"Name: value\" lines, for secrets kept out of the argument list (repeatable)")
	fs.DurationVar(&f.connectTimeout, "connect-timeout", upstream.DefaultConnectTimeout, "with --url: how long to wait for a connection to the server")
	f.oauth = authcmd.DefineOAuthFlags(fs, true)
	f.policy = definePolicyFlags(fs)
	defineBudgetFlag(fs, &f.maxResultTokens, true)
	definePinFlags(fs, &f.pinTools, &f.readOnly)
	f.otlp = defineOTLPFlags(fs)
	f.cassette = defineCassetteFlags(fs)
	fs.StringVar(&f.mock, "mock", "", "answer from the cassette `FILE` as bir-proxy mock FILE does, and do not start the server command (what bir-proxy wrap --mock writes; unwrap takes it away)")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	return f
}

// parseProxyFlags parses the proxy's command line; ok is false when the
// program should exit with code.
func parseProxyFlags(c *cli, args []string) (f *proxyFlags, code int, ok bool) {
	fs := newFlagSet("bir-proxy")
	f = defineProxyFlags(fs)
	cmd, err := parse(fs, args, false)
	switch {
	case errors.Is(err, errHelp):
		printOverview(c.stdout)
		return nil, 0, false
	case err != nil:
		return nil, c.usageError("", withSuggestion(err, fs)), false
	}
	if f.showVersion {
		fmt.Fprintf(c.stdout, "bir-proxy %s\n", version.Get())
		return nil, 0, false
	}
	applyUserConfig(fs, f, c.stderr)
	if _, err := parseLogLevel(f.logLevel); err != nil {
		set := false
		fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == "log-level" })
		if set {
			return nil, c.usageError("", err), false
		}
		// From BIR_LOG_LEVEL, which a host sets for every server at once: said,
		// but not worth refusing to start the server over.
		fmt.Fprintf(c.stderr, "bir-proxy: BIR_LOG_LEVEL %q is not a level (debug, info, warn or error); logging at info\n", f.logLevel)
		f.logLevel = "info"
	}
	var tokErr error
	f.resultTokens, tokErr = resultTokens(f.maxResultTokens)
	switch {
	case f.maxMessage < 0:
		return nil, c.usageError("", fmt.Errorf("--max-message %d: want a size in bytes, or 0 for the default", f.maxMessage)), false
	case f.stopGrace < 0:
		return nil, c.usageError("", fmt.Errorf("--stop-grace %v: want a duration of 0 or more", f.stopGrace)), false
	case f.spoolMax.n < recorder.MinSpoolMax:
		return nil, c.usageError("", fmt.Errorf("--spool-max %s is below the least it can be, %s", formatSize(f.spoolMax.n), formatSize(recorder.MinSpoolMax))), false
	case f.policy.Check() != nil:
		return nil, c.usageError("", f.policy.Check()), false
	case tokErr != nil:
		return nil, c.usageError("", tokErr), false
	case checkPinMode(&f.pinTools) != nil:
		return nil, c.usageError("", checkPinMode(&f.pinTools)), false
	}
	f.command = cmd
	if f.url != "" {
		if len(f.command) > 0 {
			return nil, c.usageError("", errors.New("give either --url or a server command, not both")), false
		}
		switch f.transport {
		case upstream.TransportAuto, upstream.TransportHTTP, upstream.TransportSSE:
		default:
			return nil, c.usageError("", fmt.Errorf("--transport %q: want auto, http or sse", f.transport)), false
		}
		if f.server == "" {
			f.server = urlHost(f.url)
		}
		f.cassetteFromDir()
		return f, 0, true
	}
	if len(f.headers) > 0 || len(f.headerFiles) > 0 {
		return nil, c.usageError("", errors.New("--header and --header-file go with --url")), false
	}
	if len(f.command) == 0 {
		return nil, c.usageError("", errors.New("no server command: give it after the flags, e.g. bir-proxy --server everything npx -y @modelcontextprotocol/server-everything (or give --url)")), false
	}
	if f.server == "" {
		f.server = servername.Default(f.command)
	}
	f.cassetteFromDir()
	return f, 0, true
}

// urlHost is the default server name of a remote upstream: its host name.
func urlHost(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "remote"
}

// remote builds the Dialer of a --url upstream: the URL and headers with ${VAR}
// expanded from the environment now, at start, so an unset variable stops the proxy
// with a message naming it rather than sending requests without their credentials.
func (f *proxyFlags) remote(logger *slog.Logger, notes io.Writer) (upstream.Remote, error) {
	lookup := os.LookupEnv
	u, err := upstream.Expand(f.url, "--url", lookup)
	if err != nil {
		return upstream.Remote{}, err
	}
	h := http.Header{}
	for _, line := range f.headers {
		if err := upstream.AddHeader(h, line, "", lookup); err != nil {
			return upstream.Remote{}, err
		}
	}
	for _, path := range f.headerFiles {
		if err := upstream.ReadHeaderFile(h, path, lookup); err != nil {
			return upstream.Remote{}, err
		}
	}
	return upstream.Remote{
		URL:            u,
		Transport:      f.transport,
		Header:         h,
		Name:           f.server,
		Logger:         logger,
		MaxMessage:     f.maxMessage,
		ConnectTimeout: f.connectTimeout,
		CloseGrace:     f.stopGrace,
		Stderr:         notes,
	}, nil
}

func runProxy(c *cli, args []string) int {
	sigs := catchSignals()
	if msg := unknownWord(args); msg != "" {
		code := c.usageError("", errors.New(msg))
		answerHost(os.Stdin, c.stdout, "bir-proxy: "+msg)
		return code
	}
	var said strings.Builder
	c2 := *c
	c2.stderr = io.MultiWriter(c.stderr, &said)
	f, code, ok := parseProxyFlags(&c2, args)
	if !ok {
		if code == 2 {
			// The host's requests get the usage error (a hand-written entry's typo).
			answerHost(os.Stdin, c.stdout, strings.TrimSpace(said.String()))
		}
		return code
	}
	if f.mock != "" {
		return runMockEntry(c, f)
	}
	if _, err := parseSwitch("BIR_OFF", os.Getenv("BIR_OFF")); err != nil {
		fmt.Fprintf(os.Stderr, "bir-proxy: %v\n", err)
		return 2
	}
	var err error
	if f.streamAt, err = streamThreshold(); err != nil {
		fmt.Fprintf(os.Stderr, "bir-proxy: %v\n", err)
		return 2
	}
	diag := newDiagWriter(os.Stderr)
	if f.logFile != "" {
		diag.addLogFile(f.logFile)
	}
	defer diag.Close(diagGrace)
	logger := newLogger(diag, f.logLevel, f.server)
	defer startProfile()()

	// The host's end of the session. Nothing but relayed messages may ever be written
	// to stdout; the logger above writes to stderr.
	hostIn, hostOut, restore := hostStdio(logger)
	defer restore()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	up, code, ok := f.openUpstream(ctx, logger, diag)
	if !ok {
		return code
	}
	defer up.closeAuth()
	return f.serve(ctx, stop, sigs, up, hostIn, hostOut, logger)
}

// supervisor is the program that runs the server for the proxy: bir-proxy itself
// (see upstream.Command.Supervisor), unless BIR_SUPERVISE=0.
func supervisor() string {
	if v, err := parseSwitch("BIR_SUPERVISE", envOr("BIR_SUPERVISE", "1")); err == nil && !v && !execSupervisor() {
		return ""
	}
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	return self
}

// execSupervisor says BIR_SUPERVISE=exec: the supervisor is started as bir-proxy
// __supervise even where it is forked from the proxy by default (linux/amd64).
func execSupervisor() bool {
	return strings.EqualFold(strings.TrimSpace(os.Getenv("BIR_SUPERVISE")), "exec")
}

// diagGrace bounds how long the proxy, at exit, waits for its last diagnostics to
// reach stderr.
const diagGrace = 200 * time.Millisecond

// exitStatus is the proxy's exit status once the session is over: the server
// process's own (SPEC §6), or 0 for an upstream that is not a process.
func exitStatus(conn upstream.Conn) int {
	if e := conn.Capabilities().Exiter; e != nil {
		return e.ExitCode()
	}
	return 0
}

// parseLogLevel reads a --log-level value. A misspelt level is an error:
// silently logging at info would hide exactly the debug output asked for.
func parseLogLevel(level string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return l, nil
}

// newLogger is the proxy's own log, on w (stderr); level was checked by
// parseProxyFlags.
func newLogger(w io.Writer, level, server string) *slog.Logger {
	l, _ := parseLogLevel(level)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})).With("proxy", "bir-proxy", "server", server)
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}
