package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/bir-dev/bir-proxy/mcpconfig"
	"github.com/bir-dev/bir-proxy/redact"
)

const wrapUsage = `Usage: bir-proxy wrap [--config PATH] [--scope project|local|user] [--proxy-path PATH] [--dry-run] [NAME...]

Rewrites the named MCP server entries (all when none is named) so that the
host starts them through bir-proxy. Undo with bir-proxy unwrap.

`

const unwrapUsage = `Usage: bir-proxy unwrap [--config PATH] [--scope project|local|user] [--dry-run] [NAME...]

Restores the named entries (all when none is named) exactly as they were
before bir-proxy wrap.

`

const statusUsage = `Usage: bir-proxy status [--config PATH] [--scope project|local|user]

Lists every MCP server entry, wrapped or not, and whether a recorder is
reachable. With neither flag, every Claude Code scope that exists is listed.

`

// configCmd is what wrap, unwrap and status share: which file and which
// entries.
type configCmd struct {
	config    string
	scope     string
	dryRun    bool
	proxyPath string
	names     []string
	explicit  bool
}

// parseConfigCmd parses args; ok is false when the command should exit with
// code (after --help, or a usage error said on stderr).
func parseConfigCmd(name, usage string, args []string, stdout, stderr io.Writer) (c configCmd, code int, ok bool) {
	fs := flag.NewFlagSet("bir-proxy "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.config, "config", "", "the MCP config file (default: .mcp.json here, or ~/.claude.json for --scope local and user)")
	fs.StringVar(&c.scope, "scope", string(mcpconfig.ScopeProject), "Claude Code scope: project (.mcp.json), local (this project in ~/.claude.json) or user (~/.claude.json)")
	if name != "status" {
		fs.BoolVar(&c.dryRun, "dry-run", false, "print the change as a diff and write nothing")
	}
	if name == "wrap" {
		fs.StringVar(&c.proxyPath, "proxy-path", "", "the bir-proxy the host should run (default: this executable's absolute path)")
	}
	fs.Usage = func() {
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
	}

	// Names and flags may come in any order (`wrap github --dry-run`); the
	// flag package stops at the first name, so parse again after each one.
	rest := args
	for {
		err := fs.Parse(rest)
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return c, 0, false
		}
		if err != nil {
			fmt.Fprintf(stderr, "bir-proxy %s: %v (see bir-proxy %s --help)\n", name, err, name)
			return c, 2, false
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		if consumed := len(rest) - len(left); consumed > 0 && rest[consumed-1] == "--" {
			c.names = append(c.names, left...) // after "--" everything is a name
			break
		}
		c.names = append(c.names, left[0])
		rest = left[1:]
	}
	fs.Visit(func(f *flag.Flag) { c.explicit = c.explicit || f.Name == "scope" || f.Name == "config" })
	if name == "status" && len(c.names) > 0 {
		fmt.Fprintf(stderr, "bir-proxy status: unexpected argument %q (see bir-proxy status --help)\n", c.names[0])
		return c, 2, false
	}
	return c, 0, true
}

// location is the file and mcpServers object the flags point at.
func (c configCmd) location() (mcpconfig.Location, mcpconfig.Scope, error) {
	scope, err := mcpconfig.ParseScope(c.scope)
	if err != nil {
		return mcpconfig.Location{}, "", err
	}
	dir, err := projectDir()
	if err != nil {
		return mcpconfig.Location{}, "", err
	}
	if c.config != "" {
		loc := mcpconfig.Location{File: c.config}
		if scope == mcpconfig.ScopeLocal {
			loc.Project = dir
		}
		return loc, scope, nil
	}
	claudeJSON, err := claudeJSONPath()
	if err != nil {
		return mcpconfig.Location{}, "", err
	}
	return mcpconfig.Locate(scope, dir, claudeJSON), scope, nil
}

// projectDir is the working directory as Claude Code names it in
// ~/.claude.json: Node's process.cwd(), which has symlinks resolved.
func projectDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the project directory: %w", err)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return dir, nil
}

func claudeJSONPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil && os.Getenv("CLAUDE_CONFIG_DIR") == "" {
		return "", fmt.Errorf("finding ~/.claude.json: %w", err)
	}
	return mcpconfig.ClaudeJSON(os.Getenv("CLAUDE_CONFIG_DIR"), home), nil
}

// defaultProxyPath is the running executable, by the path it was started
// under when that is the same file: a package manager's stable symlink
// (/opt/homebrew/bin/bir-proxy) outlives the versioned file it points to,
// which is all os.Executable reports on Linux.
func defaultProxyPath(stderr io.Writer) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the bir-proxy executable (pass --proxy-path): %w", err)
	}
	path := exe
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		if abs, err := filepath.Abs(p); err == nil && sameFile(abs, exe) {
			path = abs
		}
	}
	if strings.Contains(path, string(filepath.Separator)+"go-build") {
		fmt.Fprintf(stderr, "warning: %s is a temporary build (go run?) that will be deleted; install bir-proxy or pass --proxy-path\n", path)
	}
	return path, nil
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

func runWrap(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, code, ok := parseConfigCmd("wrap", wrapUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	proxy := c.proxyPath
	if proxy == "" {
		var err error
		if proxy, err = defaultProxyPath(stderr); err != nil {
			fmt.Fprintf(stderr, "bir-proxy wrap: %v\n", err)
			return 1
		}
	}
	return c.edit(ctx, "wrap", stdout, stderr, func(d *mcpconfig.Document) (*mcpconfig.Change, error) {
		return d.Wrap(c.names, proxy)
	})
}

func runUnwrap(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, code, ok := parseConfigCmd("unwrap", unwrapUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	return c.edit(ctx, "unwrap", stdout, stderr, func(d *mcpconfig.Document) (*mcpconfig.Change, error) {
		return d.Unwrap(c.names)
	})
}

// edit loads the config, applies change, says what happened to each
// entry, and writes the file (or, with --dry-run, prints the diff).
func (c configCmd) edit(ctx context.Context, verb string, stdout, stderr io.Writer, change func(*mcpconfig.Document) (*mcpconfig.Change, error)) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "bir-proxy %s: %v\n", verb, err)
		return 1
	}
	loc, _, err := c.location()
	if err != nil {
		return fail(err)
	}
	doc, err := mcpconfig.Load(loc)
	if err != nil {
		return fail(err)
	}
	ch, err := change(doc)
	if err != nil {
		return fail(err)
	}

	done := verb + "ped" // wrapped, unwrapped
	if c.dryRun {
		done = "would " + verb
	}
	changed := 0
	for _, o := range ch.Outcomes {
		switch {
		case o.Changed:
			changed++
			fmt.Fprintf(stdout, "%s %s\n", done, o.Name)
		case o.Warn:
			fmt.Fprintf(stderr, "warning: %s: %s\n", o.Name, o.Note)
		default:
			fmt.Fprintf(stdout, "unchanged %s: %s\n", o.Name, o.Note)
		}
	}

	switch {
	case !ch.Changed():
		fmt.Fprintf(stdout, "%s: nothing to change\n", loc)
	case c.dryRun:
		fmt.Fprint(stdout, ch.Diff())
		fmt.Fprintf(stdout, "%s: dry run, nothing written\n", loc)
	default:
		if err := ctx.Err(); err != nil {
			return fail(fmt.Errorf("nothing written: %w", err))
		}
		backup, err := ch.Save()
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s: %s %d %s (previous version kept in %s); restart the host or reconnect its MCP servers to use %s\n",
			loc, verb+"ped", changed, plural(changed, "entry", "entries"), backup, plural(changed, "it", "them"))
	}
	return 0
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// statusTarget is one config status lists.
type statusTarget struct {
	scope mcpconfig.Scope
	loc   mcpconfig.Location
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer, recorderStatus func(ctx context.Context) string) int {
	c, code, ok := parseConfigCmd("status", statusUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	var targets []statusTarget
	if c.explicit {
		loc, scope, err := c.location()
		if err != nil {
			fmt.Fprintf(stderr, "bir-proxy status: %v\n", err)
			return 1
		}
		targets = append(targets, statusTarget{scope, loc})
	} else {
		dir, err := projectDir()
		if err != nil {
			fmt.Fprintf(stderr, "bir-proxy status: %v\n", err)
			return 1
		}
		claudeJSON, err := claudeJSONPath()
		if err != nil {
			fmt.Fprintf(stderr, "bir-proxy status: %v\n", err)
			return 1
		}
		for _, s := range []mcpconfig.Scope{mcpconfig.ScopeProject, mcpconfig.ScopeLocal, mcpconfig.ScopeUser} {
			targets = append(targets, statusTarget{s, mcpconfig.Locate(s, dir, claudeJSON)})
		}
	}

	status := 0
	listed := 0
	for _, t := range targets {
		doc, err := mcpconfig.Load(t.loc)
		switch {
		case err == nil:
		case !c.explicit && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, mcpconfig.ErrNoServers)):
			continue // a scope that is not in use
		default:
			fmt.Fprintf(stderr, "bir-proxy status: %v\n", err)
			status = 1
			continue
		}
		listed++
		fmt.Fprintf(stdout, "%s scope: %s\n", t.scope, t.loc)
		printServers(stdout, doc.Servers())
	}
	if listed == 0 && status == 0 {
		fmt.Fprintln(stdout, "no MCP servers found: there is no .mcp.json here and no servers in ~/.claude.json for this project or user")
	}
	fmt.Fprintln(stdout, recorderStatus(ctx))
	return status
}

func printServers(w io.Writer, servers []mcpconfig.Server) {
	if len(servers) == 0 {
		fmt.Fprintln(w, "  (no servers)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range servers {
		var state, what string
		switch s.Kind {
		case mcpconfig.KindWrapped:
			state, what = "wrapped", commandLine(s.Command)
			if s.ProxyName != "" && s.ProxyName != s.Name {
				what += fmt.Sprintf("  (reports as %q)", s.ProxyName)
			}
		case mcpconfig.KindWrappedRemote:
			state, what = "wrapped", fmt.Sprintf("%s  (remote, %s)", redact.URL(s.URL), s.Transport)
			if s.ProxyName != "" && s.ProxyName != s.Name {
				what += fmt.Sprintf("  (reports as %q)", s.ProxyName)
			}
		case mcpconfig.KindStdio:
			state, what = "not wrapped", commandLine(s.Command)
		case mcpconfig.KindRemote:
			state, what = "not wrapped", fmt.Sprintf("%s  (remote, %s)", redact.URL(s.URL), s.Transport)
			if s.Problem != "" {
				what += "  (cannot be wrapped: " + s.Problem + ")"
			}
		default:
			state, what = "not understood", s.Problem
		}
		if s.Name == mcpconfig.RecorderName {
			what += "  (the recorder's own server)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Name, state, what)
	}
	tw.Flush()
}

// commandLine shows argv the way a shell user would type it.
func commandLine(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.Join(q, " ")
}
