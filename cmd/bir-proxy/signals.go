package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/bir-dev/bir-proxy/upstream"
)

// catchSignals starts catching the signals the proxy answers. It runs first thing in
// proxy mode, before anything can write: SIGPIPE is caught, not ignored (an ignored
// signal would be inherited by the server), and until it is caught, the first log line
// to a host's stderr that has no reader kills the proxy — which it did, at start, in
// 29 runs of 30 while the handler was installed by a goroutine started after the
// server.
func catchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	return sigs
}

// stopOnSignal turns SIGINT/SIGTERM/SIGHUP into the immediate stop sequence (SPEC §6),
// calling stopReplay first and endSession once the server is stopped. A caught SIGPIPE needs nothing: a write to a closed host
// just fails and the session ends normally.
func stopOnSignal(ctx context.Context, sigs chan os.Signal, conn upstream.Conn, stopReplay, endSession func(), logger *slog.Logger) {
	defer signal.Stop(sigs)
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-sigs:
			if s == syscall.SIGPIPE {
				continue
			}
			logger.Info("stopping the server", "signal", s.String())
			// Before the server is stopped: its dispatches then end as cancelled.
			stopReplay()
			go func() {
				if t := conn.Capabilities().Terminator; t != nil {
					t.Terminate()
				} else {
					conn.Close()
				}
				// The server is stopped; the session ends now even if a pump is stuck
				// (a host that stopped reading): the relay waits a moment for what the
				// server sent last, and no more.
				endSession()
			}()
		}
	}
}
