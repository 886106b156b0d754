package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/internal/cause"
	"github.com/bir-dev/bir-proxy/pins"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/replay"
	"github.com/bir-dev/bir-proxy/session"
	"github.com/bir-dev/bir-proxy/telemetry/mcpspans"
	"github.com/bir-dev/bir-proxy/upstream"
)

// upstreamSide is the server's end of a session, and what was opened with it.
type upstreamSide struct {
	conn     upstream.Conn
	reporter *reporting
	// ids makes the proxy's own requests' ids: one namespace for the relay, revive
	// and a remote session (upstream.OwnIDs), named by the reporter's proxy id.
	ids       *upstream.OwnIDs
	closeAuth func()
}

// openUpstream opens the reporter and the server's Conn: a remote session, or a
// command behind revive. ok is false when the proxy must exit with code instead.
func (f *proxyFlags) openUpstream(ctx context.Context, logger *slog.Logger, diag *diagWriter) (up *upstreamSide, code int, ok bool) {
	up = &upstreamSide{closeAuth: func() {}}
	if f.url != "" {
		// A remote server's Dial touches no network, so the reporter, whose proxy
		// id names the connection's own requests, comes first.
		r, err := f.remote(logger, diag)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bir-proxy: %v\n", err)
			return nil, 1, false
		}
		up.opened(openReporter(ctx, f, logger))
		r.Settled = up.reporter.settledTransport
		if up.closeAuth, err = f.withOAuth(&r, logger, diag); err != nil {
			fmt.Fprintf(os.Stderr, "bir-proxy: %v\n", err)
			up.reporter.close()
			return nil, 1, false
		}
		sessions, err := r.Sessions()
		var first upstream.Conn
		if err == nil {
			first, err = sessions.Dial(ctx)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bir-proxy: %v\n", err)
			up.closeAuth()
			up.reporter.close()
			return nil, 1, false
		}
		// A session the server ends (its 404, its event stream's end) is replaced
		// behind the same Conn, as a child that dies is: the session room holds the
		// host's messages, starts a new session with the host's handshake and
		// settles what the old one owed (docs/revive.md, RenewPolicy).
		up.conn = session.New(first, session.Options{
			Dialer:  sessions,
			Name:    f.server,
			IDs:     up.ids,
			Logger:  logger,
			Policy:  session.RenewPolicy(),
			Revived: up.reporter.learned,
		})
		return up, 0, true
	}
	dialer := upstream.Command{
		Path:       f.command[0],
		Args:       f.command[1:],
		Env:        upstream.ChildEnv(os.Environ()),
		Name:       f.server,
		Notes:      diag,
		Supervisor: supervisor(),
		MaxMessage: f.maxMessage,
		// Nothing records and nothing traces: no server message is kept once
		// forwarded, so each may be lent in place (tracing's bookkeeping reads them
		// later: a lent line would have been read over by then).
		Slab:       off() && !f.tracingConfigured(),
		Logger:     logger,
		InputGrace: f.stopGrace,

		ExecSupervisor: execSupervisor(), // BIR_SUPERVISE=exec: not forked
	}
	first, err := dialer.Dial(ctx)
	up.opened(openReporter(ctx, f, logger))
	switch {
	case err != nil:
		// A command that cannot start is not revived (a configuration to fix),
		// but the host is told why: each request it sends gets the reason, which
		// is what the host shows, and the proxy exits 127 or 126 as a shell would.
		reason, code := cause.Start(f.server, f.command, err)
		fmt.Fprintln(os.Stderr, reason)
		up.conn = &upstream.NoServer{Reason: reason, Code: code}
	case f.noRevive:
		// A server that exits before answering anything gets the host an error
		// with its exit status and last stderr lines. (With revival, a server that
		// never comes up is given up on, and revive says the same.)
		up.conn = session.New(first, session.Options{
			Name:   f.server,
			IDs:    up.ids,
			Logger: logger,
			Policy: session.Policy{NoRestart: true},
			Cause:  func(c upstream.Conn) string { return cause.Exit(f.server, f.command, c) },
		})
	default:
		// A server that dies while the host is connected is started again behind
		// the same Conn: the relay sees one upstream whose Read says, once, that
		// the server was replaced (docs/revive.md).
		up.conn = session.New(first, session.Options{
			Dialer:  dialer,
			Name:    f.server,
			IDs:     up.ids,
			Logger:  logger,
			Revived: up.reporter.learned,
		})
	}
	return up, 0, true
}

// opened records the reporter, whose proxy id names the own ids' namespace.
func (up *upstreamSide) opened(r *reporting) {
	up.reporter = r
	up.ids = upstream.NewOwnIDs("bir:" + r.proxyID() + ":")
}

// serve runs the session between the host and up until it ends, then ends
// everything it started, the server first, and returns the exit status.
func (f *proxyFlags) serve(ctx context.Context, stop context.CancelFunc, sigs chan os.Signal, up *upstreamSide,
	hostIn io.Reader, hostOut io.Writer, logger *slog.Logger) int {
	conn, reporter := up.conn, up.reporter
	// Signals are caught from the start (catchSignals): one that came while the
	// reporter opened is acted on now, on the Conn that will be stopped. The replay
	// executor, once there is one, is stopped before the server.
	var replaying atomic.Pointer[replay.Executor]
	go stopOnSignal(ctx, sigs, conn, func() {
		if ex := replaying.Load(); ex != nil {
			ex.Stop()
		}
	}, stop, logger)

	tracing, closeTracing := f.startTracing(logger, reporter.proxyID())
	if si := conn.Capabilities().SessionIdentifier; si != nil && tracing != nil {
		tracing.SessionID = si.SessionID // mcp.session.id, over HTTP
	}
	icOpts := intercept.Options{
		CorrelationKey: f.correlationKey,
		Sink:           reporter.sink(),
		Logger:         logger,
	}
	cas := f.cassette.open(f, off(), logger)
	f.cassette.options(&icOpts, cas)
	pinned := f.pinWatcher(off(), logger)
	if pinned != nil {
		pinned.OnDrift(reporter.drift) // into the journal, as `bir-proxy log` shows it
	}
	var spans *mcpspans.Spans
	if tracing != nil {
		// A tools/list span carries its answer's tool drift (docs/pins.md).
		tracing.ToolDrift = pinned != nil && pinned.Mode() != pins.ModeOff
		spans = mcpspans.New(*tracing)
		icOpts.Observer = spans
	}
	plugPins(pinned, f.policy, &icOpts, spans, f.server)
	ic := intercept.New(icOpts)
	longCut := plugBudget(f.policy, f.resultTokens, ic.Trimmed, logger)
	// Replay (SPEC §4) only with a recorder: not under BIR_OFF, not with the journal.
	var icpt relay.Interceptor = ic
	remote := reporter.remote()
	var gate *replay.Gate
	if remote != nil {
		gate = replay.NewGate(ic) // learns from the host's handshake when dispatches may go
		icpt = gate               // exposing the interceptor's capabilities (long calls stream)
	}

	r := relay.New(relay.Options{
		HostIn:          hostIn,
		HostOut:         hostOut,
		Upstream:        conn,
		Intercept:       icpt,
		IDs:             up.ids,
		MaxMessage:      f.maxMessage,
		Logger:          logger,
		Hooks:           relay.ToolPolicyCutting(f.policy, longCut),
		StreamThreshold: f.streamAt,
	})
	var ex *replay.Executor
	if remote != nil {
		// The host leaving is the proxy exiting (HostDone): dispatches in flight are
		// then cancelled, not reported lost when the server is stopped under them.
		ex = replay.Start(replay.Config{Recorder: remote, Upstream: r, Gate: gate, HostDone: r.HostDone(),
			Server: f.server, PID: os.Getpid(), Logger: logger})
		replaying.Store(ex)
	}
	err := r.Run(ctx)
	switch {
	case err == nil, errors.Is(err, relay.ErrUpstreamEnded), errors.Is(err, context.Canceled):
		// Canceled: a signal stopped the server, and said so.
	default:
		logger.Warn("session ended", "err", err)
	}
	// Whatever ended the session, the server is stopped and waited for: the proxy
	// never exits leaving it behind.
	conn.Close()
	if ex != nil {
		// After the server is gone no dispatch can wait on it; their results get the
		// same short grace as reports.
		graceCtx, cancel := context.WithTimeout(context.Background(), closeGrace)
		ex.Close(graceCtx)
		cancel()
	}
	ic.Close()
	closePins(pinned)
	closeCassette(cas, logger)
	closeTracing()
	reporter.close()
	return exitStatus(conn)
}
