package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/cassettecmd"
)

type cassetteCmdFlags struct {
	from, to, out, server string
}

func defineCassetteCmdFlags(fs *flag.FlagSet) any {
	f := &cassetteCmdFlags{}
	fs.StringVar(&f.from, "from", "", "import: the recording's `FORMAT`, mcp-recorder or journal")
	fs.StringVar(&f.to, "to", "", "export: the `FORMAT` written, mcp-recorder")
	fs.StringVar(&f.out, "o", "", "the `FILE` written (import: the cassette; export: stdout when absent)")
	fs.StringVar(&f.server, "server", "", "import: the cassette's server name; from a journal, only that server's calls")
	return f
}

// runCassetteCmd is `bir-proxy cassette`: its room is cassettecmd.
func runCassetteCmd(_ context.Context, c *cli, args []string) int {
	sc, _ := findSubcommand("cassette")
	opts, names, code, ok := c.parseCommand(sc, args, true)
	if !ok {
		return code
	}
	f := opts.(*cassetteCmdFlags)
	return cassettecmd.Run(cassettecmd.Options{Stdout: c.stdout, Stderr: c.stderr,
		Logger: slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Args:   names, From: f.from, To: f.to, Out: f.out, Server: f.server})
}
