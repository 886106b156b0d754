package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/authcmd"
	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/callcmd"
	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/cassettecmd"
	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/logcmd"
	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/mockcmd"
	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/pinscmd"
	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/verifycmd"
	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/wrapcmd"
	"github.com/bir-dev/bir-proxy/mcpconfig"
)

// cli is what a subcommand runs with: where it prints, and the parts that
// ask the machine something, which tests replace.
type cli struct {
	stdout, stderr io.Writer
	// recorderStatus says in one line where this directory's reports go.
	recorderStatus func(ctx context.Context) string
	// proxyRuns runs `command --version` and returns what it printed, or
	// why it does not run.
	proxyRuns func(ctx context.Context, command string) (string, error)
	// backups is where wrap, unwrap and a restore keep the versions they
	// replace (see backups in wrap.go).
	backups func() (mcpconfig.Backups, error)
}

// subcommand is one of bir-proxy's commands other than running a server.
type subcommand struct {
	name     string
	synopsis string // what follows "bir-proxy NAME" in the usage line
	summary  string // one line for the overview
	about    string // the paragraph under the usage line
	// flags defines the command's flags on fs and returns where they land.
	flags func(fs *flag.FlagSet) any
	run   func(ctx context.Context, c *cli, args []string) int
}

// subcommands are listed in this order by `bir-proxy help`.
func subcommands() []subcommand {
	return []subcommand{
		{
			name: "wrap", synopsis: wrapcmd.WrapUsage,
			summary: "make the host start MCP servers through bir-proxy",
			about:   wrapcmd.WrapAbout,
			flags:   func(fs *flag.FlagSet) any { return defineConfigFlags(fs, "wrap") },
			run:     runWrap,
		},
		{
			name: "unwrap", synopsis: wrapcmd.UnwrapUsage,
			summary: "undo wrap; --restore lists and restores backups",
			about:   wrapcmd.UnwrapAbout,
			flags:   func(fs *flag.FlagSet) any { return defineConfigFlags(fs, "unwrap") },
			run:     runUnwrap,
		},
		{
			name: "status", synopsis: wrapcmd.StatusUsage,
			summary: "which servers are wrapped, and where reports go",
			about:   wrapcmd.StatusAbout,
			flags:   func(fs *flag.FlagSet) any { return defineConfigFlags(fs, "status") },
			run:     runStatus,
		},
		{
			name: "log", synopsis: logcmd.Usage,
			summary: "what was recorded: the journal and reports still waiting",
			about:   logcmd.About,
			flags:   func(fs *flag.FlagSet) any { return logcmd.DefineFlags(fs) },
			run:     runLog,
		},
		{
			name: "login", synopsis: authcmd.LoginUsage,
			summary: "sign in to a remote server (OAuth) ahead of time",
			about:   authcmd.LoginAbout,
			flags:   func(fs *flag.FlagSet) any { return authcmd.DefineFlags(fs, true) },
			run:     runLogin,
		},
		{
			name: "logout", synopsis: authcmd.LogoutUsage,
			summary: "delete the stored OAuth grant of a remote server",
			about:   authcmd.LogoutAbout,
			flags:   func(fs *flag.FlagSet) any { return authcmd.DefineFlags(fs, false) },
			run:     runLogout,
		},
		{
			name: "auth", synopsis: authcmd.AuthUsage,
			summary: "the stored OAuth grants (never their secrets)",
			about:   authcmd.AuthAbout,
			flags:   func(*flag.FlagSet) any { return nil },
			run:     runAuth,
		},
		{
			name: "completion", synopsis: "bash|zsh|fish",
			summary: "a shell completion script: commands, flags, server names",
			about: `Prints a completion script for the shell: bash (eval "$(bir-proxy completion bash)"
in ~/.bashrc), zsh (the same in ~/.zshrc) or fish (bir-proxy completion fish >
~/.config/fish/completions/bir-proxy.fish). It completes the commands and their
flags and, for wrap, unwrap and log --server, the server names of the MCP configs
wrap would use from the current directory (and, for log, of the journals).`,
			flags: func(*flag.FlagSet) any { return nil },
			run:   runCompletion,
		},
		{
			name: "verify", synopsis: verifycmd.Usage,
			summary: "replay recorded calls on a server and show what changed",
			about:   verifycmd.About,
			flags:   defineVerifyFlags,
			run:     runVerify,
		},
		{
			name: "call", synopsis: callcmd.Usage,
			summary: "call a server's tool from a terminal or a script",
			about:   callcmd.About,
			flags:   defineCallFlags,
			run:     runCall,
		},
		{
			name: "cassette", synopsis: cassettecmd.Usage,
			summary: "import a cassette from mcp-recorder or the journal; export one",
			about:   cassettecmd.About,
			flags:   defineCassetteCmdFlags,
			run:     runCassetteCmd,
		},
		{
			name: "mock", synopsis: mockcmd.Usage,
			summary: "an MCP server answering from cassettes",
			about:   mockcmd.About,
			flags:   func(fs *flag.FlagSet) any { return mockcmd.DefineFlags(fs) },
			run:     runMock,
		},
		{
			name: "pins", synopsis: pinscmd.Usage,
			summary: "each server's pinned tools, drift, and approving it",
			about:   pinscmd.About,
			flags: func(fs *flag.FlagSet) any {
				return fs.Bool("json", false, "print JSON: {\"servers\":[{\"server\",\"tools\":[...]}]}")
			},
			run: runPins,
		},
		{
			name: "help", synopsis: "[COMMAND]",
			summary: "this overview, or a command's flags",
			flags:   func(*flag.FlagSet) any { return nil },
			run:     runHelp,
		},
	}
}

func findSubcommand(name string) (subcommand, bool) {
	for _, sc := range subcommands() {
		if sc.name == name {
			return sc, true
		}
	}
	return subcommand{}, false
}

// newFlagSet returns a flag set that prints nothing while parsing: parse
// turns an error into one line on stderr (a host's log shows one clear
// line, not a page of usage, and stdout stays clean) and --help into the
// usage on stdout.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // flag calls it on every error; we decide what to print
	return fs
}

// errHelp is returned by parse for -h, -help and --help.
var errHelp = flag.ErrHelp

// parse parses args into fs. With interleaved, names and flags may come in
// any order (`wrap github --dry-run`): the flag package stops at the first
// name, so parsing goes on after each one; after "--" everything is a name.
func parse(fs *flag.FlagSet, args []string, interleaved bool) (names []string, err error) {
	if !interleaved {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return fs.Args(), nil
	}
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			return names, nil
		}
		if consumed := len(rest) - len(left); consumed > 0 && rest[consumed-1] == "--" {
			return append(names, left...), nil
		}
		names = append(names, left[0])
		rest = left[1:]
	}
}

// usageError says what was wrong with the command line in one line on
// stderr and returns the exit status for it, 2.
func (c *cli) usageError(cmd string, err error) int {
	msg := strings.TrimSpace(err.Error())
	if cmd == "" {
		fmt.Fprintf(c.stderr, "bir-proxy: %s (see bir-proxy --help)\n", msg)
	} else {
		fmt.Fprintf(c.stderr, "bir-proxy %s: %s (see bir-proxy help %s)\n", cmd, msg, cmd)
	}
	return 2
}

// parseCommand parses a subcommand's arguments. ok is false when the
// command should exit with code: after --help (the usage on stdout), or a
// usage error (one line on stderr).
func (c *cli) parseCommand(sc subcommand, args []string, interleaved bool) (opts any, names []string, code int, ok bool) {
	fs := newFlagSet("bir-proxy " + sc.name)
	opts = sc.flags(fs)
	names, err := parse(fs, args, interleaved)
	switch {
	case errors.Is(err, errHelp):
		printCommandUsage(c.stdout, sc)
		return nil, nil, 0, false
	case err != nil:
		return nil, nil, c.usageError(sc.name, withSuggestion(err, fs)), false
	}
	return opts, names, 0, true
}

func printCommandUsage(w io.Writer, sc subcommand) {
	fmt.Fprintf(w, "Usage: bir-proxy %s %s\n", sc.name, sc.synopsis)
	if sc.about != "" {
		fmt.Fprintf(w, "\n%s\n", sc.about)
	}
	fs := newFlagSet("bir-proxy " + sc.name)
	sc.flags(fs)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintln(w, "\nFlags:")
		printFlags(w, fs)
	}
}

const overview = `bir-proxy — a transparent MCP proxy that records every tool call.

Usage:
  bir-proxy [flags] COMMAND [ARGS...]   run COMMAND as the MCP server, relaying stdio
                                        (-- before a COMMAND that starts with - or is
                                        named like one of the commands below)
%s  bir-proxy --version

Examples:
  # In .mcp.json, in place of the server's own command:
  bir-proxy --server github npx -y @modelcontextprotocol/server-github
  # Put every server this project uses behind bir-proxy, and take it away:
  bir-proxy wrap
  bir-proxy unwrap
  # See what was recorded:
  bir-proxy log --follow

Flags, when running a server:
`

// printOverview is the usage of bir-proxy as a whole: the commands and the
// proxy's own flags.
func printOverview(w io.Writer) {
	var cmds strings.Builder
	for _, sc := range subcommands() {
		brief := map[string]string{"wrap": "[NAME...]", "unwrap": "[NAME...]", "help": "[COMMAND]", "login": "--url URL", "logout": "--url URL", "auth": "status", "completion": "bash|zsh|fish", "verify": "CASSETTE COMMAND", "call": "TOOL -- COMMAND", "cassette": "import|export", "pins": "[SERVER]"}[sc.name]
		fmt.Fprintf(&cmds, "  bir-proxy %-26s  %s\n", sc.name+" "+brief, sc.summary)
	}
	fmt.Fprintf(w, overview, cmds.String())
	fs := newFlagSet("bir-proxy")
	defineProxyFlags(fs)
	printFlags(w, fs)
}

func runHelp(_ context.Context, c *cli, args []string) int {
	self, _ := findSubcommand("help")
	_, args, code, ok := c.parseCommand(self, args, false)
	if !ok {
		return code
	}
	switch {
	case len(args) == 0:
		printOverview(c.stdout)
		return 0
	case len(args) > 1:
		return c.usageError("help", fmt.Errorf("one command at a time, got %q", args))
	}
	sc, ok := findSubcommand(args[0])
	if !ok {
		return c.usageError("help", fmt.Errorf("no command %q: the commands are wrap, unwrap, status, log, login, logout, auth, completion, verify, call, cassette, pins and help", args[0]))
	}
	printCommandUsage(c.stdout, sc)
	return 0
}
