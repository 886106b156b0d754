// Package mockcmd is `bir-proxy mock`: an MCP server on stdio answering from
// cassettes (package mock), and with --fallback a live server for what they do not
// hold, recorded with --cassette (docs/mock.md).
package mockcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/mock"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/upstream"
	"github.com/bir-dev/bir-proxy/verify"
)

// Usage is the command's synopsis.
const Usage = "CASSETTE [CASSETTE...] [--latency recorded|none] [--listen ADDR] [--fallback [--cassette FILE] -- COMMAND [ARGS...]]"

// About is the paragraph under its usage line.
const About = `Runs an MCP server on stdio that answers from cassettes (recorded with
bir-proxy --cassette): the recorded handshake, the recorded tools/list, and
each tools/call by its tool and the fingerprint of its arguments (repeated
identical calls get the recorded answers in order, then the last again).
A call no recording holds gets an error naming the nearest recorded calls;
with --fallback it goes to the live server started by COMMAND instead, and
--cassette FILE records those calls. Answers are the recorded bytes, with
the request's id. --listen serves Streamable HTTP instead of stdio, until
interrupted. Exit status: 0 when stdin ends, 2 bad usage or a cassette that
does not read.`

// Flags are the command's flags.
type Flags struct {
	Latency  string
	Fallback bool
	Cassette string
	Server   string
	Timeout  time.Duration
	Listen   string
}

// DefineFlags defines the command's flags on fs.
func DefineFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Latency, "latency", "none", "recorded: answer each call after its recorded duration; none: at once")
	fs.BoolVar(&f.Fallback, "fallback", false, "send the calls no cassette holds to the live server started by the COMMAND after --")
	fs.StringVar(&f.Cassette, "cassette", "", "with --fallback: record the live server's calls to this `FILE` (a cassette; the arguments RAW, secrets included)")
	fs.StringVar(&f.Server, "server", "", "the live server's name (default: the cassette's)")
	fs.StringVar(&f.Listen, "listen", "", "serve Streamable HTTP at `ADDR` (a loopback address, e.g. 127.0.0.1:8931; port 0 picks one, said on stderr) instead of stdio")
	fs.DurationVar(&f.Timeout, "timeout", verify.DefaultCallTimeout, "with --fallback: how long the live server's handshake, and each of its calls, may take")
	return f
}

// Options are what Run runs with.
type Options struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Flags          *Flags
	Cassettes      []string
	// Command is the live server's (after --); Dial starts it (the proxy's way: its
	// supervisor, environment, stderr).
	Command []string
	Dial    func(ctx context.Context) (upstream.Conn, error)
	Logger  *slog.Logger
}

// Run serves until stdin ends or ctx is done; it returns the exit status.
func Run(ctx context.Context, o Options) int {
	f := o.Flags
	usage := func(msg string) int {
		fmt.Fprintf(o.Stderr, "bir-proxy mock: %s (see bir-proxy help mock)\n", msg)
		return 2
	}
	switch {
	case len(o.Cassettes) == 0:
		return usage("no cassette: bir-proxy mock CASSETTE [CASSETTE...]")
	case f.Latency != "none" && f.Latency != "recorded":
		return usage(fmt.Sprintf("--latency %q: want recorded or none", f.Latency))
	case f.Fallback && len(o.Command) == 0:
		return usage("--fallback needs the live server's command after --")
	case !f.Fallback && len(o.Command) > 0:
		return usage("a command is only run with --fallback")
	case f.Cassette != "" && !f.Fallback:
		return usage("--cassette records the live server's calls: it goes with --fallback")
	}
	if f.Listen != "" {
		host, _, err := net.SplitHostPort(f.Listen)
		if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			// The recordings hold raw arguments, secrets included: not for the network.
			return usage(fmt.Sprintf("--listen %q: want a loopback address and a port, like 127.0.0.1:8931", f.Listen))
		}
	}
	if f.Cassette != "" {
		for _, c := range o.Cassettes {
			if same(c, f.Cassette) {
				// The writer would rotate it away (FILE.1) under the mock reading it.
				return usage("--cassette " + f.Cassette + " is a cassette being replayed: record to another file")
			}
		}
	}
	opts := mock.Options{Latency: f.Latency == "recorded"}
	hdr, err := firstHeader(o.Cassettes[0])
	if err != nil {
		fmt.Fprintf(o.Stderr, "bir-proxy mock: %s\n", termtext.Line(err.Error()))
		return 2
	}
	var live *lazyLive
	if f.Fallback {
		live = &lazyLive{ready: make(chan struct{})}
		opts.Fallback = live
		if f.Cassette != "" {
			live.rec = &recorder{}
			opts.Record = live.rec.call
		}
	}
	m, err := mock.Load(o.Cassettes, opts)
	if err != nil {
		fmt.Fprintf(o.Stderr, "bir-proxy mock: %s\n", termtext.Line(err.Error()))
		return 2
	}
	if live != nil {
		server := f.Server
		if server == "" {
			server = hdr.Server
		}
		liveCtx, cancel := context.WithCancel(ctx)
		go live.start(liveCtx, o, hdr, server)
		defer live.close(o.Logger)
		defer cancel() // first: a handshake still under way ends
	}
	if f.Listen != "" {
		return listen(ctx, o, m)
	}
	// Serve reads stdin on a goroutine of its own: a read of stdin does not end when
	// ctx does, and a host's SIGTERM with stdin still open left the mock running.
	served := make(chan error, 1)
	go func() { served <- m.Serve(ctx, o.Stdin, o.Stdout) }()
	err = nil
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(o.Stderr, "bir-proxy mock: %s\n", termtext.Line(err.Error()))
		return 1
	}
	return 0
}

// listen serves m over Streamable HTTP at --listen until ctx is done.
func listen(ctx context.Context, o Options, m *mock.Mock) int {
	ln, err := net.Listen("tcp", o.Flags.Listen)
	if err != nil {
		fmt.Fprintf(o.Stderr, "bir-proxy mock: %s\n", termtext.Line(err.Error()))
		return 1
	}
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(o.Stderr, "bir-proxy mock: listening on http://%s/mcp\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		err = <-done
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(o.Stderr, "bir-proxy mock: %s\n", termtext.Line(err.Error()))
		return 1
	}
	return 0
}

func same(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	if err1 == nil && err2 == nil {
		return os.SameFile(sa, sb)
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

func firstHeader(path string) (*cassette.Header, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	r, err := cassette.NewReader(fh, path)
	if err != nil {
		return nil, err
	}
	return r.Header(), nil
}

// lazyLive is the fallback: the live server, started when the mock starts (the host's
// handshake is answered from the recording meanwhile); a call no recording holds
// waits for it.
type lazyLive struct {
	ready chan struct{}
	live  *verify.Live
	err   error
	rec   *recorder
}

func (z *lazyLive) start(ctx context.Context, o Options, h *cassette.Header, server string) {
	defer close(z.ready)
	l, err := verify.DialLive(ctx, o.Dial, h, "bir:mock:"+strconv.Itoa(os.Getpid())+":", o.Flags.Timeout)
	if err != nil {
		z.err = err
		o.Logger.Warn("the live server did not start: calls no cassette holds get an error", "err", termtext.Line(err.Error()))
		return
	}
	z.live = l
	if z.rec != nil {
		nh := *h
		nh.Server, nh.Command, nh.URL, nh.RecordedAt, nh.Dropped = server, redact.CommandLine(o.Command), "", time.Time{}, 0
		if l.Tools != nil {
			nh.Tools = l.Tools
		}
		if l.InitializeResult != nil && h.Era != cassette.EraStateless {
			nh.InitializeResult = l.InitializeResult
		}
		w, err := cassette.Create(cassette.WriterOptions{Path: o.Flags.Cassette, Logger: o.Logger})
		if err != nil {
			o.Logger.Warn("the live server's calls are not recorded", "err", err)
			return
		}
		w.SetHeader(nh)
		z.rec.w = w
	}
}

func (z *lazyLive) Call(ctx context.Context, tool string, args []byte) ([]byte, []byte, error) {
	select {
	case <-z.ready:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if z.err != nil {
		return nil, nil, z.err
	}
	return z.live.Call(ctx, tool, args)
}

func (z *lazyLive) close(logger *slog.Logger) {
	<-z.ready // DialLive returns when ctx ends
	if z.live != nil {
		z.live.Close()
	}
	if z.rec != nil && z.rec.w != nil {
		if err := z.rec.w.Close(); err != nil {
			logger.Warn("the cassette", "err", err)
		}
	}
}

// recorder is the new calls' cassette: mock calls it one call at a time.
type recorder struct{ w *cassette.Writer }

func (r *recorder) call(c cassette.Recorded) {
	if r.w != nil {
		r.w.Call(c)
	}
}
