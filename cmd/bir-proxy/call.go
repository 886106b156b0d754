package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/callcmd"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/mcpconfig"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/servername"
	"github.com/bir-dev/bir-proxy/verify"
)

// callFlags are `bir-proxy call`'s flags: the server is reached with the proxy's own
// (proxyFlags), as verify reaches it.
type callFlags struct {
	proxy    proxyFlags
	json     bool
	list     bool
	script   string
	args     string
	cassette string
	entry    string
	config   string
	timeout  time.Duration
}

func defineCallFlags(fs *flag.FlagSet) any {
	v := &callFlags{}
	p := &v.proxy
	fs.StringVar(&p.server, "server", "", "the server's name in reports (default: as the proxy names it)")
	defineServerFlags(fs, p, "call the remote MCP server at URL instead of a command (${VAR} is expanded)")
	fs.StringVar(&p.recorderURL, "recorder", "", "recorder URL (default: BIR_RECORDER_URL, then .bir/recorder.json)")
	fs.StringVar(&p.journal, "journal", "", "journal file used when no recorder is configured (default: the server's)")
	fs.BoolVar(&v.json, "json", false, "print the result object as the server sent it (--list: the tools)")
	fs.BoolVar(&v.list, "list", false, "print the server's tool names, one a line; no call is made")
	fs.StringVar(&v.script, "script", "", "run the steps of `FILE`: a JSON or YAML list of {\"tool\":...,\"arguments\":{...}} and {\"list_tools\":true} (YAML: *.yaml, *.yml, or not starting with [ or {)")
	fs.StringVar(&v.args, "args", "", "the call's arguments, a `JSON` object; key=value pairs go on top of it")
	fs.StringVar(&v.cassette, "cassette", "", "also record the calls in the cassette at `PATH` (bir-proxy verify reads it)")
	fs.StringVar(&v.entry, "entry", "", "the server of the host's MCP config entry `NAME` (wrapped or not), instead of -- COMMAND")
	fs.StringVar(&v.config, "config", "", "with --entry: the MCP config file to look in (default: Claude Code's scopes, as wrap)")
	fs.DurationVar(&v.timeout, "timeout", verify.DefaultCallTimeout, "how long the handshake, and each call, may take")
	return v
}

// parseCall parses call's arguments: flags and names in any order, then after "--"
// the server's command, whatever it holds.
func parseCall(fs *flag.FlagSet, args []string) (names, command []string, err error) {
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return nil, nil, err
		}
		left := fs.Args()
		if consumed := len(rest) - len(left); consumed > 0 && rest[consumed-1] == "--" {
			return names, left, nil
		}
		if len(left) == 0 {
			return names, nil, nil
		}
		names = append(names, left[0])
		rest = left[1:]
	}
}

// runCall is `bir-proxy call`: its room is callcmd.
func runCall(ctx context.Context, c *cli, args []string) int {
	self, _ := findSubcommand("call")
	fs := newFlagSet("bir-proxy call")
	v := self.flags(fs).(*callFlags)
	names, command, err := parseCall(fs, args)
	switch {
	case errors.Is(err, errHelp):
		printCommandUsage(c.stdout, self)
		return 0
	case err != nil:
		return c.usageError("call", withSuggestion(err, fs))
	}
	p := &v.proxy
	p.command = command
	level, err := parseLogLevel(p.logLevel)
	if err != nil {
		return c.usageError("call", err)
	}
	if v.entry != "" {
		if p.url != "" || len(p.command) > 0 {
			return c.usageError("call", errors.New("--entry names the server: give no --url or command with it"))
		}
		if err := v.fromEntry(); err != nil {
			fmt.Fprintf(c.stderr, "bir-proxy call: %s\n", termtext.Line(err.Error()))
			return 2
		}
	}
	switch {
	case v.config != "" && v.entry == "":
		return c.usageError("call", errors.New("--config goes with --entry"))
	case p.url != "" && len(p.command) > 0:
		return c.usageError("call", errors.New("give either --url or a server command, not both"))
	case p.url == "" && len(p.command) == 0:
		return c.usageError("call", errors.New("no server: give its command after --, or --url, or --entry"))
	case p.url == "" && (len(p.headers) > 0 || len(p.headerFiles) > 0):
		return c.usageError("call", errors.New("--header and --header-file go with --url"))
	}
	steps, err := v.steps(names)
	if err != nil {
		return c.usageError("call", err)
	}
	if p.server == "" {
		if p.url != "" {
			p.server = urlHost(p.url)
		} else {
			p.server = servername.Default(p.command)
		}
	}
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level})).With("proxy", "bir-proxy call")
	peerErr := termtext.NewWriter(c.stderr)
	defer peerErr.Flush()
	serverErr := io.Writer(io.Discard)
	if level <= slog.LevelDebug {
		serverErr = peerErr
	}
	prefix := "bir:call:" + strconv.Itoa(os.Getpid()) + ":"
	dial, closeAuth, code, err := p.serverDial(logger, peerErr, serverErr)
	if err != nil {
		fmt.Fprintf(c.stderr, "bir-proxy call: %s\n", termtext.Line(err.Error()))
		return code
	}
	defer closeAuth()
	o := callcmd.Options{Stdout: c.stdout, Stderr: c.stderr, Logger: logger, Dial: dial, IDPrefix: prefix,
		Timeout: v.timeout, Steps: steps, JSON: v.json, Cassette: v.cassette,
		Header: cassette.Header{Server: p.server}}
	if p.url != "" {
		o.Header.URL = redact.URL(p.url)
	} else {
		o.Header.Command = redact.CommandLine(p.command)
	}
	// Opened at the first call: a server that does not start, or --list, leaves no
	// journal behind (an empty one was made for a command not found).
	var rep *reporting
	o.Report = func(st report.Step) {
		if rep == nil {
			rep = openReporter(ctx, p, logger)
		}
		if s := rep.sink(); s != nil {
			s.Submit(st)
		}
	}
	defer func() {
		if rep != nil {
			rep.close()
		}
	}()
	return callcmd.Run(ctx, o)
}

// steps are what the command line asks: a call, the tool list, or a script's steps.
func (v *callFlags) steps(names []string) ([]callcmd.Step, error) {
	asked := 0
	for _, b := range []bool{v.list, v.script != "", len(names) > 0} {
		if b {
			asked++
		}
	}
	switch {
	case asked == 0:
		return nil, errors.New("no tool: bir-proxy call TOOL [key=value...] -- COMMAND (or --list, or --script FILE)")
	case asked > 1:
		return nil, errors.New("give one of a TOOL, --list or --script")
	case v.args != "" && len(names) == 0:
		return nil, errors.New("--args goes with a TOOL")
	case v.list:
		return []callcmd.Step{{ListTools: true}}, nil
	case v.script != "":
		return callcmd.ReadScript(v.script)
	}
	var base []byte
	if v.args != "" {
		base = []byte(v.args)
	}
	args, err := callcmd.Arguments(base, names[1:])
	if err != nil {
		return nil, err
	}
	return []callcmd.Step{{Tool: names[0], Arguments: args}}, nil
}

// fromEntry takes the server of the MCP config entry named by --entry: a wrapped
// entry's own command (what follows its "--") or URL, and its --server name.
func (v *callFlags) fromEntry() error {
	sel := mcpconfig.Selection{Config: v.config}
	ts, err := sel.Targets()
	if err != nil {
		return err
	}
	ls, _, err := sel.Load(ts, proxyArgsProblem)
	if len(ls) == 0 && err != nil {
		return err
	}
	for _, l := range ls {
		for _, s := range l.Doc.Servers() {
			if s.Name != v.entry {
				continue
			}
			p := &v.proxy
			if p.server == "" {
				p.server = s.ProxyName
			}
			if p.server == "" {
				p.server = s.Name
			}
			switch s.Kind {
			case mcpconfig.KindStdio, mcpconfig.KindWrapped:
				p.command = s.Command
			case mcpconfig.KindRemote, mcpconfig.KindWrappedRemote:
				p.url = s.URL
				if s.Transport != "" {
					p.transport = s.Transport
				}
			default:
				return fmt.Errorf("entry %q in %s: %s", s.Name, l.Loc, s.Problem)
			}
			return nil
		}
	}
	return fmt.Errorf("no MCP server entry %q in the host's config", v.entry)
}
