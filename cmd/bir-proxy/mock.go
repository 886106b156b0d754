package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/mockcmd"
	"github.com/bir-dev/bir-proxy/internal/cause"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/upstream"
)

// runMock is `bir-proxy mock`: its room is mockcmd. The live server of --fallback
// is started as verify starts one.
func runMock(ctx context.Context, c *cli, args []string) int {
	sc, _ := findSubcommand("mock")
	// The cassettes and flags, then -- and the live server's command (its own flags
	// are not the mock's).
	var command []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, command = args[:i], args[i+1:]
	}
	opts, names, code, ok := c.parseCommand(sc, args, true)
	if !ok {
		return code
	}
	f := opts.(*mockcmd.Flags)
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("proxy", "bir-proxy mock")
	o := mockcmd.Options{Stdin: os.Stdin, Stdout: c.stdout, Stderr: c.stderr, Flags: f, Cassettes: names, Command: command, Logger: logger}
	if len(command) > 0 {
		peerErr := termtext.NewWriter(c.stderr)
		defer peerErr.Flush()
		cmd := upstream.Command{
			Path:           command[0],
			Args:           command[1:],
			Env:            upstream.ChildEnv(os.Environ()),
			Name:           f.Server,
			Stderr:         io.Discard,
			Supervisor:     supervisor(),
			Logger:         logger,
			ExecSupervisor: execSupervisor(),
		}
		if cmd.Name == "" {
			cmd.Name = "server"
		}
		o.Dial = func(ctx context.Context) (upstream.Conn, error) {
			conn, err := cmd.Dial(ctx)
			if err != nil {
				reason, _ := cause.Start(cmd.Name, command, err)
				return nil, errors.New(strings.TrimPrefix(reason, "bir-proxy: "))
			}
			return conn, nil
		}
	}
	return mockcmd.Run(ctx, o)
}

// runMockEntry is the proxy with --mock CASSETTE, what wrap --mock writes into an
// entry: bir-proxy mock CASSETTE in place of the server, which is not started (its
// command stays in the entry for unwrap).
func runMockEntry(c *cli, f *proxyFlags) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("proxy", "bir-proxy mock", "server", f.server)
	return mockcmd.Run(ctx, mockcmd.Options{
		Stdin: os.Stdin, Stdout: c.stdout, Stderr: c.stderr, Logger: logger,
		Flags: &mockcmd.Flags{Latency: "none", Server: f.server}, Cassettes: []string{f.mock},
	})
}
