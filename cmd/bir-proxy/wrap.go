package main

import (
	"context"
	"flag"

	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/logcmd"
	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/wrapcmd"
)

// wrap, unwrap and status: their room is wrapcmd.

func runWrap(ctx context.Context, c *cli, args []string) int {
	return runConfigCmd(ctx, c, "wrap", args)
}

func runUnwrap(ctx context.Context, c *cli, args []string) int {
	return runConfigCmd(ctx, c, "unwrap", args)
}

func runStatus(ctx context.Context, c *cli, args []string) int {
	return runConfigCmd(ctx, c, "status", args)
}

func runConfigCmd(ctx context.Context, c *cli, verb string, args []string) int {
	sc, _ := findSubcommand(verb)
	opts, names, code, ok := c.parseCommand(sc, args, true)
	if !ok {
		return code
	}
	return wrapcmd.Run(ctx, wrapcmd.Options{
		Stdout: c.stdout, Stderr: c.stderr, Flags: opts.(*wrapcmd.Flags), Names: names,
		Backups: c.backups, ProxyRuns: c.proxyRuns, RecorderStatus: c.recorderStatus,
		ProxyArgsProblem: proxyArgsProblem,
		CheckTokens:      func(v string) error { _, err := resultTokens(v); return err },
		Defaults:         userConfigStatus,
	})
}

// defineConfigFlags defines the flags of wrap, unwrap or status; those wrap writes
// into an entry that are the proxy's own are worded as the proxy's.
func defineConfigFlags(fs *flag.FlagSet, verb string) *wrapcmd.Flags {
	return wrapcmd.DefineFlags(fs, verb, wrapcmd.Shared{
		Pins:   definePinFlags,
		Budget: func(fs *flag.FlagSet, s *string) { defineBudgetFlag(fs, s, false) },
	})
}

// What status and wrap ask of the machine (tests replace them in cli).
var (
	backups   = wrapcmd.DefaultBackups
	proxyRuns = wrapcmd.ProxyRuns
)

func recorderStatus(ctx context.Context) string { return wrapcmd.RecorderStatus(ctx, off()) }

// runLog is `bir-proxy log`: its room is logcmd.
func runLog(ctx context.Context, c *cli, args []string) int {
	sc, _ := findSubcommand("log")
	opts, rest, code, ok := c.parseCommand(sc, args, false)
	if !ok {
		return code
	}
	return logcmd.Run(ctx, logcmd.Options{Stdout: c.stdout, Stderr: c.stderr, Flags: opts.(*logcmd.Flags), Args: rest})
}
