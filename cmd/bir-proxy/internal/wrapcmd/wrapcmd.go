// Package wrapcmd is `bir-proxy wrap`, `unwrap` and `status`: which MCP server
// entries of which hosts' files are behind bir-proxy, putting them there and taking
// them away (mcpconfig reads, splices and backs up the files; mcpconfig.Selection
// says which files), and whether what the entries run runs.
package wrapcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/mcpconfig"
	"github.com/bir-dev/bir-proxy/pins"
)

// The commands' synopses and the paragraphs under their usage lines.
const (
	WrapUsage = "[flags] [NAME...]  |  wrap --mock CASSETTE NAME"
	WrapAbout = `Rewrites the named MCP server entries (all when none is named) so that the
host starts them through bir-proxy. With no --host, --scope or --config it
acts on every host's files that have servers for this directory and user:
Claude Code's (the nearest .mcp.json, this project in ~/.claude.json, and
~/.claude.json's own servers), Claude Desktop's, Cursor's (.cursor/mcp.json,
~/.cursor/mcp.json), Gemini CLI's (.gemini/settings.json,
~/.gemini/settings.json), VS Code's (.vscode/mcp.json) and Windsurf's;
--host NAME picks one. Comments in Gemini CLI's and VS Code's files stay as
they are. The previous version of each file is kept in bir-proxy's state
directory. Undo with bir-proxy unwrap. --mock CASSETTE NAME points the entry
NAME at bir-proxy mock CASSETTE instead (its server is not started; unwrap
puts it back).`

	UnwrapUsage = "[flags] [NAME...]  |  unwrap --restore [ID]"
	UnwrapAbout = `Restores the named entries (all when none is named) exactly as they were
before bir-proxy wrap, in the same files wrap acts on, and in any file in
this directory that bir-proxy wrapped with --config. With --restore it
lists the backups of those files instead, and with an ID (or the start of
one) puts that version back; the version it replaces is kept as a backup.`

	StatusUsage = "[--check] [--json] [--all] [--host NAME] [--config PATH] [--scope project|local|user]"
	StatusAbout = `Lists every MCP server entry, wrapped or not, host by host and scope by
scope (the files unwrap acts on), checks that the bir-proxy each wrapped
entry runs is there and runs, and says whether a recorder is reachable. An
entry whose bir-proxy arguments the proxy would refuse is BROKEN, with why.
--check starts each wrapped entry the way the host would (initialize, then
tools/list) and prints OK with its tool count, or the error the host would
get. --json prints it all as one JSON object (docs/wrap.md). Exit status 1
when a file cannot be read, an entry is broken, a wrapped entry's bir-proxy
does not run, or a check fails. The OpenTelemetry counts shown are those of
the servers in the files listed; --all shows every server's on this machine.`
)

// Flags are the flags of wrap, unwrap and status: which files and scopes, and what
// wrap writes into an entry.
type Flags struct {
	verb      string
	Config    string
	Host      string
	Scope     string
	DryRun    bool
	ProxyPath string
	Restore   bool
	Cassettes string        // wrap --cassette DIR
	PinTools  string        // wrap --pin-tools MODE
	ReadOnly  bool          // wrap --read-only
	OTLP      string        // wrap --otlp-endpoint URL
	Capture   bool          // wrap --otlp-capture
	MaxTokens string        // wrap --max-result-tokens N
	Mock      string        // wrap --mock CASSETTE
	Check     bool          // status --check
	JSON      bool          // status --json
	All       bool          // status --all
	Timeout   time.Duration // status --timeout
}

// Shared defines the flags wrap writes into an entry whose words are the proxy's.
type Shared struct {
	Pins   func(fs *flag.FlagSet, mode *string, readOnly *bool)
	Budget func(fs *flag.FlagSet, tokens *string)
}

// DefineFlags defines verb's flags (wrap, unwrap or status) on fs.
func DefineFlags(fs *flag.FlagSet, verb string, shared Shared) *Flags {
	c := &Flags{verb: verb}
	fs.StringVar(&c.Config, "config", "", "an MCP config file to use instead of the hosts' own (its host is known by its name, or given with --host)")
	fs.StringVar(&c.Host, "host", "", "only this host's files: claude-code, claude-desktop, cursor, gemini, vscode or windsurf; default: every host's files found for this directory and user")
	fs.StringVar(&c.Scope, "scope", "", "only this scope: project (the nearest .mcp.json, or the host's project file), local (this project in ~/.claude.json) or user (~/.claude.json, or the host's user file); without --host, Claude Code's; default: every scope that has servers")
	if verb != "status" {
		fs.BoolVar(&c.DryRun, "dry-run", false, "print the change as a diff and write nothing")
	}
	if verb == "wrap" {
		fs.StringVar(&c.ProxyPath, "proxy-path", "", "the bir-proxy the host should run (default: this executable's absolute path; bir-proxy from PATH in a file git shares)")
		fs.StringVar(&c.Mock, "mock", "", "point the one entry named at bir-proxy mock `CASSETTE`: the host gets the recorded answers, and the server is not started (--mock in the entry; unwrap restores it)")
		fs.StringVar(&c.Cassettes, "cassette", "", "each wrapped server also records a cassette for bir-proxy verify, `DIR`/NAME.jsonl: the arguments RAW, secrets included (see docs/cassette.md)")
		if shared.Pins != nil {
			shared.Pins(fs, &c.PinTools, &c.ReadOnly)
		}
		if shared.Budget != nil {
			shared.Budget(fs, &c.MaxTokens)
		}
		// Some hosts (Claude Code) give servers an environment without OTEL_*: the
		// endpoint must be in the entry's arguments (docs/otel.md).
		fs.StringVar(&c.OTLP, "otlp-endpoint", "", "each wrapped server exports its spans and metrics to the OTLP/HTTP collector at `URL` (--otlp-endpoint in the entry)")
		fs.BoolVar(&c.Capture, "otlp-capture", false, "with --otlp-endpoint: spans carry the calls' arguments and results, redacted (--otlp-capture in the entry)")
	}
	if verb == "status" {
		fs.BoolVar(&c.Check, "check", false, "start each wrapped entry as the host would (command, args, env) and send initialize and tools/list: OK with the number of tools, or the error the host would get")
		fs.BoolVar(&c.JSON, "json", false, `print JSON: {"entries":[{"host","file","scope","name","wrapped","broken","problem",...,"check"}]} (docs/wrap.md)`)
		fs.BoolVar(&c.All, "all", false, "show the OpenTelemetry counts of every server on this machine, not only of the servers in the files listed")
		fs.DurationVar(&c.Timeout, "timeout", DefaultCheckTimeout, "with --check: how long one entry has to start and answer")
	}
	if verb == "unwrap" {
		fs.BoolVar(&c.Restore, "restore", false, "list the backups of the config files; with an ID, put that version back")
	}
	return c
}

// Options are what Run runs with: the command line, where it prints, and the parts
// that ask the machine something, which tests replace.
type Options struct {
	Stdout, Stderr io.Writer
	Flags          *Flags
	Names          []string
	// Backups is where wrap, unwrap and a restore keep the versions they replace
	// (DefaultBackups).
	Backups func() (mcpconfig.Backups, error)
	// ProxyRuns runs `command --version` and returns what it printed, or why it
	// does not run (ProxyRuns).
	ProxyRuns func(ctx context.Context, command string) (string, error)
	// RecorderStatus says in lines where this directory's reports go
	// (RecorderStatus).
	RecorderStatus func(ctx context.Context) string
	// ProxyArgsProblem is the usage error the proxy would print for a wrapped
	// entry's arguments, nil when it would take them (mcpconfig.ProxyArgsCheck).
	ProxyArgsProblem mcpconfig.ProxyArgsCheck
	// CheckTokens reads wrap --max-result-tokens as the proxy will.
	CheckTokens func(string) error
	// Defaults is what status says of the defaults file, lines ending in newlines.
	Defaults func() string
}

// cmd is one run of wrap, unwrap or status.
type cmd struct {
	Options
	*Flags
	verb string
	sel  mcpconfig.Selection
	// skipped are other hosts' files load could not read, left alone.
	skipped []error
}

// Run runs wrap, unwrap or status (the verb Flags were defined for); it returns the
// exit status: 0, 1 when something failed, 2 for a usage error.
func Run(ctx context.Context, o Options) int {
	c := &cmd{Options: o, Flags: o.Flags, verb: o.Flags.verb}
	if code, ok := c.check(); !ok {
		return code
	}
	c.sel = mcpconfig.Selection{Config: c.Config, Host: c.Host, Scope: c.Scope, Lenient: c.verb != "status"}
	switch {
	case c.verb == "status":
		return c.status(ctx)
	case c.Restore:
		return c.restoreBackup()
	}
	return c.edit(ctx)
}

// usage says what was wrong with the command line in one line on stderr and
// returns the exit status for it, 2.
func (c *cmd) usage(err error) int {
	fmt.Fprintf(c.Stderr, "bir-proxy %s: %s (see bir-proxy help %s)\n", c.verb, strings.TrimSpace(err.Error()), c.verb)
	return 2
}

// check checks the flags together; ok is false when the command should exit with
// code.
func (c *cmd) check() (code int, ok bool) {
	if c.Capture && c.OTLP == "" {
		return c.usage(errors.New("--otlp-capture goes with --otlp-endpoint")), false
	}
	if c.CheckTokens != nil {
		if err := c.CheckTokens(c.MaxTokens); err != nil {
			return c.usage(err), false
		}
	}
	if c.PinTools != "" {
		if _, err := pins.ParseMode(c.PinTools); err != nil {
			return c.usage(fmt.Errorf("--pin-tools %q: %v", c.PinTools, err)), false
		}
	}
	if c.Scope != "" {
		if _, err := mcpconfig.ParseScope(c.Scope); err != nil {
			return c.usage(err), false
		}
	}
	if c.Host != "" {
		if _, err := mcpconfig.ParseHost(c.Host); err != nil {
			if errors.Is(err, mcpconfig.ErrUnsupportedFormat) {
				fmt.Fprintf(c.Stderr, "bir-proxy %s: %v\n", c.verb, err)
				return 1, false
			}
			return c.usage(err), false
		}
	}
	switch {
	case c.verb == "status" && len(c.Names) > 0:
		return c.usage(fmt.Errorf("unexpected argument %q", c.Names[0])), false
	case c.Restore && len(c.Names) > 1:
		return c.usage(errors.New("--restore takes one backup ID")), false
	case c.Mock != "" && len(c.Names) != 1:
		return c.usage(errors.New("--mock CASSETTE points one entry at the mock: name it (bir-proxy wrap --mock CASSETTE NAME)")), false
	case c.Mock != "" && c.Cassettes != "":
		return c.usage(errors.New("--mock answers from a cassette; --cassette records one: not both")), false
	case c.verb == "status" && c.Timeout <= 0:
		return c.usage(fmt.Errorf("--timeout %v: want a duration above 0", c.Timeout)), false
	}
	return 0, true
}

// knowFiles gives unwrap and status the files bir-proxy keeps backups of. Without a
// backup store there are none to add.
func (c *cmd) knowFiles(bs mcpconfig.Backups, err error) {
	if err != nil || c.verb == "wrap" {
		return
	}
	c.sel.Known, _ = bs.Files()
}

// load reads the targets, the wrapped entries' arguments checked against the
// proxy's flags.
func (c *cmd) load(ts []mcpconfig.Target) ([]mcpconfig.Loaded, error) {
	ls, skipped, err := c.sel.Load(ts, c.ProxyArgsProblem)
	c.skipped = skipped
	return ls, err
}

// parseDoc parses data as the file at loc, as load does.
func (c *cmd) parseDoc(loc mcpconfig.Location, data []byte) (*mcpconfig.Document, error) {
	return mcpconfig.ParseChecked(loc, data, c.ProxyArgsProblem)
}

const noServersHere = "no MCP servers found: none in the files of Claude Code (.mcp.json here or above, ~/.claude.json), Claude Desktop, Cursor (.cursor/mcp.json, ~/.cursor/mcp.json), " +
	"Gemini CLI (.gemini/settings.json, ~/.gemini/settings.json), VS Code (.vscode/mcp.json) or Windsurf for this directory or user (--config names another file)"

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
