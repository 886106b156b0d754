package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/bir-dev/bir-proxy/internal/version"
	"github.com/bir-dev/bir-proxy/mcpconfig"
	"github.com/bir-dev/bir-proxy/pins"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/redact"
)

// configCmd is what wrap, unwrap and status share: which files and scopes,
// and which entries.
type configCmd struct {
	verb      string
	config    string
	host      string
	scope     string
	dryRun    bool
	proxyPath string
	restore   bool
	names     []string
	cassettes string        // wrap --cassette DIR (cassette.go)
	pinTools  string        // wrap --pin-tools MODE (pins.go)
	readOnly  bool          // wrap --read-only
	otlp      string        // wrap --otlp-endpoint URL
	capture   bool          // wrap --otlp-capture
	check     bool          // status --check
	json      bool          // status --json
	timeout   time.Duration // status --timeout
	maxTokens string        // wrap --max-result-tokens N
	// known are the files the backup store holds versions of, which plain
	// unwrap and status also look at when they are in this directory.
	known []string
	// skipped are other hosts' files load could not read, left alone.
	skipped []error
}

func defineConfigFlags(fs *flag.FlagSet, verb string) *configCmd {
	c := &configCmd{verb: verb}
	fs.StringVar(&c.config, "config", "", "an MCP config file to use instead of the hosts' own (its host is known by its name, or given with --host)")
	fs.StringVar(&c.host, "host", "", "only this host's files: claude-code, claude-desktop, cursor, gemini, vscode or windsurf; default: every host's files found for this directory and user")
	fs.StringVar(&c.scope, "scope", "", "only this scope: project (the nearest .mcp.json, or the host's project file), local (this project in ~/.claude.json) or user (~/.claude.json, or the host's user file); without --host, Claude Code's; default: every scope that has servers")
	if verb != "status" {
		fs.BoolVar(&c.dryRun, "dry-run", false, "print the change as a diff and write nothing")
	}
	if verb == "wrap" {
		fs.StringVar(&c.proxyPath, "proxy-path", "", "the bir-proxy the host should run (default: this executable's absolute path; bir-proxy from PATH in a file git shares)")
		defineWrapCassette(fs, c)
		definePinFlags(fs, &c.pinTools, &c.readOnly)
		defineBudgetFlag(fs, &c.maxTokens, false)
		// Some hosts (Claude Code) give servers an environment without OTEL_*: the
		// endpoint must be in the entry's arguments (docs/otel.md).
		fs.StringVar(&c.otlp, "otlp-endpoint", "", "each wrapped server exports its spans and metrics to the OTLP/HTTP collector at `URL` (--otlp-endpoint in the entry)")
		fs.BoolVar(&c.capture, "otlp-capture", false, "with --otlp-endpoint: spans carry the calls' arguments and results, redacted (--otlp-capture in the entry)")
	}
	if verb == "status" {
		fs.BoolVar(&c.check, "check", false, "start each wrapped entry as the host would (command, args, env) and send initialize and tools/list: OK with the number of tools, or the error the host would get")
		fs.BoolVar(&c.json, "json", false, `print JSON: {"entries":[{"host","file","scope","name","wrapped","broken","problem",...,"check"}]} (docs/wrap.md)`)
		fs.DurationVar(&c.timeout, "timeout", defaultCheckTimeout, "with --check: how long one entry has to start and answer")
	}
	if verb == "unwrap" {
		fs.BoolVar(&c.restore, "restore", false, "list the backups of the config files; with an ID, put that version back")
	}
	return c
}

// parseConfigCmd parses the arguments of wrap, unwrap or status.
func parseConfigCmd(c *cli, verb string, args []string) (*configCmd, int, bool) {
	sc, _ := findSubcommand(verb)
	opts, names, code, ok := c.parseCommand(sc, args, true)
	if !ok {
		return nil, code, false
	}
	cc := opts.(*configCmd)
	cc.names = names
	if cc.capture && cc.otlp == "" {
		return nil, c.usageError(verb, errors.New("--otlp-capture goes with --otlp-endpoint")), false
	}
	if _, err := resultTokens(cc.maxTokens); err != nil {
		return nil, c.usageError(verb, err), false
	}
	if cc.pinTools != "" {
		if _, err := pins.ParseMode(cc.pinTools); err != nil {
			return nil, c.usageError(verb, fmt.Errorf("--pin-tools %q: %v", cc.pinTools, err)), false
		}
	}
	if cc.scope != "" {
		if _, err := mcpconfig.ParseScope(cc.scope); err != nil {
			return nil, c.usageError(verb, err), false
		}
	}
	if cc.host != "" {
		if _, err := mcpconfig.ParseHost(cc.host); err != nil {
			if errors.Is(err, mcpconfig.ErrUnsupportedFormat) {
				fmt.Fprintf(c.stderr, "bir-proxy %s: %v\n", verb, err)
				return nil, 1, false
			}
			return nil, c.usageError(verb, err), false
		}
	}
	switch {
	case verb == "status" && len(names) > 0:
		return nil, c.usageError(verb, fmt.Errorf("unexpected argument %q", names[0])), false
	case cc.restore && len(names) > 1:
		return nil, c.usageError(verb, errors.New("--restore takes one backup ID")), false
	}
	return cc, 0, true
}

// target is one servers object a command acts on.
type target struct {
	host  mcpconfig.Host
	scope mcpconfig.Scope // "" for the top level of a --config file
	loc   mcpconfig.Location
	found bool   // false: there is no project file for the project scope
	dir   string // the project directory, for a project file not found
}

func (t target) label() string {
	return mcpconfig.File{Host: t.host, Scope: t.scope}.Label()
}

// explicit reports whether the flags name one file or scope, which must
// then exist; otherwise every file that has servers is used, as status
// lists them.
func (c *configCmd) explicit() bool { return c.config != "" || c.scope != "" }

// targets are the files and scopes the command acts on, as each host would
// find them from a session started in this directory: with --host, that
// host's; with --scope alone, Claude Code's; else every host's, and (for
// unwrap and status) the files in this directory that bir-proxy wrote
// before (c.known), such as a --config file.
func (c *configCmd) targets() ([]target, error) {
	dir, err := projectDir()
	if err != nil {
		return nil, err
	}
	scope := mcpconfig.Scope(c.scope)
	var host mcpconfig.Host
	if c.host != "" {
		if host, err = mcpconfig.ParseHost(c.host); err != nil {
			return nil, err
		}
	}
	if c.config != "" {
		if host == "" {
			host = mcpconfig.GuessHost(c.config)
		}
		t := target{host: host, loc: mcpconfig.Location{File: c.config, Host: host}, found: true}
		if scope == mcpconfig.ScopeLocal {
			t.scope, t.loc.Project = scope, dir
		} else if scope != "" {
			t.scope = scope
		}
		return []target{t}, nil
	}
	env, err := hostEnv(dir)
	if err != nil {
		return nil, err
	}
	hosts := mcpconfig.Hosts
	switch {
	case host != "":
		hosts = []mcpconfig.Host{host}
	case scope != "":
		hosts = []mcpconfig.Host{mcpconfig.HostClaudeCode}
	}
	var ts []target
	for _, h := range hosts {
		for _, f := range env.HostFiles(h, scope) {
			ts = append(ts, target{host: h, scope: f.Scope, loc: f.Loc, found: f.Found, dir: dir})
		}
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("%s has no %s scope", host.Name(), scope)
	}
	if host == "" && scope == "" {
		ts = append(ts, knownTargets(dir, c.known, ts)...)
	}
	return ts, nil
}

// knownTargets are the files of known (the backup store's) in dir or below
// it that no target names already: a file wrapped with --config is found
// again by a plain unwrap or status in the same project.
func knownTargets(dir string, known []string, ts []target) []target {
	var out []target
	for _, f := range known {
		rel, err := filepath.Rel(dir, f)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		if slices.ContainsFunc(ts, func(t target) bool { return sameFile(t.loc.File, f) }) {
			continue
		}
		h := mcpconfig.GuessHost(f)
		out = append(out, target{host: h, loc: mcpconfig.Location{File: f, Host: h}, found: true})
	}
	return out
}

// hostEnv is where the hosts' files are, from this process's environment.
func hostEnv(dir string) (mcpconfig.Env, error) {
	home, err := os.UserHomeDir()
	if err != nil && os.Getenv("CLAUDE_CONFIG_DIR") == "" {
		return mcpconfig.Env{}, fmt.Errorf("finding ~/.claude.json: %w", err)
	}
	return mcpconfig.Env{
		Dir: dir, Home: home, ClaudeConfigDir: os.Getenv("CLAUDE_CONFIG_DIR"),
		AppData: os.Getenv("APPDATA"), XDGConfigHome: os.Getenv("XDG_CONFIG_HOME"), GOOS: runtime.GOOS,
	}, nil
}

// loaded is a target whose file was read and has servers there.
type loaded struct {
	target
	data []byte
	doc  *mcpconfig.Document
}

// load reads the targets. A scope not in use (no file, no servers there) is
// skipped unless the flags named it; any other failure is an error.
func (c *configCmd) load(ts []target) ([]loaded, error) {
	var out []loaded
	var errs []error
	for _, t := range ts {
		if !t.found {
			if c.explicit() {
				rel, err := filepath.Rel(t.dir, t.loc.File)
				if err != nil {
					rel = t.loc.File
				}
				errs = append(errs, fmt.Errorf("no %s in %s or any directory above it", rel, t.dir))
			}
			continue
		}
		data, err := os.ReadFile(t.loc.File)
		if err == nil {
			var doc *mcpconfig.Document
			if doc, err = parseDoc(t.loc, data); err == nil {
				t.loc = doc.Location()
				out = append(out, loaded{t, data, doc})
				continue
			}
		} else {
			err = fmt.Errorf("reading MCP config: %w", err)
		}
		if !c.explicit() && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, mcpconfig.ErrNoServers)) {
			continue
		}
		if c.verb != "status" && !c.explicit() && c.host == "" && t.host != mcpconfig.HostClaudeCode {
			// Another host's file that does not parse must not stop a wrap
			// of the files that do (a stale ~/.cursor/mcp.json would block
			// every project); it is named and left alone. status reports it
			// as an error, which is its job.
			c.skipped = append(c.skipped, err)
			continue
		}
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
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

// knowFiles sets cc.known for unwrap and status: the files bir-proxy keeps
// backups of. Without a backup store there are none to add.
func (cc *configCmd) knowFiles(bs mcpconfig.Backups, err error) {
	if err != nil || cc.verb == "wrap" {
		return
	}
	cc.known, _ = bs.Files()
}

// backups is where wrap, unwrap and a restore keep the versions they
// replace: bir-proxy's state directory, never the project.
func backups() (mcpconfig.Backups, error) {
	state, err := recorder.DefaultStateDir()
	if err != nil {
		return mcpconfig.Backups{}, fmt.Errorf("no place for backups: %w", err)
	}
	return mcpconfig.Backups{Dir: filepath.Join(state, "backups")}, nil
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

func runWrap(ctx context.Context, c *cli, args []string) int {
	cc, code, ok := parseConfigCmd(c, "wrap", args)
	if !ok {
		return code
	}
	return cc.edit(ctx, c)
}

func runUnwrap(ctx context.Context, c *cli, args []string) int {
	cc, code, ok := parseConfigCmd(c, "unwrap", args)
	if !ok {
		return code
	}
	if cc.restore {
		return cc.restoreBackup(c)
	}
	return cc.edit(ctx, c)
}

// fileEdit is every change one command makes to one file: local and user
// scope share ~/.claude.json, and are written together, with one backup.
type fileEdit struct {
	file     string
	old, cur []byte
	parts    []loaded
	changed  int
}

// edit is wrap or unwrap: it loads every target, applies the change to the
// named entries, says what happened to each entry under its file and
// scope, and writes each file that changed (or, with --dry-run, prints the
// diff). Nothing is written when anything fails before the writes.
func (cc *configCmd) edit(ctx context.Context, c *cli) int {
	fail := func(err error) int {
		fmt.Fprintf(c.stderr, "bir-proxy %s: %v\n", cc.verb, err)
		return 1
	}
	bs, bsErr := c.backups()
	cc.knowFiles(bs, bsErr)
	ts, err := cc.targets()
	if err != nil {
		return fail(err)
	}
	ls, err := cc.load(ts)
	if err != nil {
		return fail(err)
	}
	for _, err := range cc.skipped {
		fmt.Fprintf(c.stderr, "warning: %v; that file is left alone (--host or --config to act on it)\n", err)
	}
	if len(ls) == 0 {
		return fail(errors.New(noServersHere))
	}
	if err := checkNames(cc.names, ls); err != nil {
		return fail(err)
	}
	if bsErr != nil && !cc.dryRun {
		return fail(bsErr)
	}

	var edits []*fileEdit
	for _, l := range ls {
		i := slices.IndexFunc(edits, func(e *fileEdit) bool { return e.file == l.loc.File })
		if i < 0 {
			edits = append(edits, &fileEdit{file: l.loc.File, old: l.data, cur: l.data})
			i = len(edits) - 1
		}
		edits[i].parts = append(edits[i].parts, l)
	}

	for _, e := range edits {
		// Which bir-proxy to write is asked only of a file that has something to
		// wrap: a shared file with everything wrapped must not be refused. The
		// probe's name is never written.
		proxy := "bir-proxy"
		if cc.verb == "wrap" {
			probe, err := cc.apply(e, proxy)
			if err != nil {
				return fail(err)
			}
			if probe.changed > 0 {
				var note string
				if proxy, note, err = cc.proxyFor(ctx, c, e.file); err != nil {
					return fail(err)
				}
				if note != "" {
					fmt.Fprintln(c.stdout, note)
				}
			}
		}
		res, err := cc.apply(e, proxy)
		if err != nil {
			return fail(err)
		}
		e.cur, e.changed = res.cur, res.changed
		for _, p := range res.parts {
			fmt.Fprintf(c.stdout, "%s: %s\n", p.label, p.loc)
			printOutcomes(c, cc, p.label, p.outcomes)
		}
	}

	written := 0
	for _, e := range edits {
		ch := &mcpconfig.Change{Location: mcpconfig.Location{File: e.file}, Old: e.old, New: e.cur}
		switch {
		case !ch.Changed():
			fmt.Fprintf(c.stdout, "%s: nothing to change\n", e.file)
		case cc.dryRun:
			fmt.Fprint(c.stdout, ch.Diff())
			fmt.Fprintf(c.stdout, "%s: dry run, nothing written\n", e.file)
		default:
			if err := ctx.Err(); err != nil {
				return fail(fmt.Errorf("nothing more written: %w", err))
			}
			saved, err := ch.Save(bs)
			if err != nil {
				return fail(err)
			}
			written++
			if saved.Moved != "" {
				fmt.Fprintf(c.stdout, "%s: moved the backup an older bir-proxy left in the project to %s\n", saved.Moved, filepath.Dir(saved.Backup.Path))
			}
			fmt.Fprintf(c.stdout, "%s: %s %d %s; the previous version is backup %s (bir-proxy unwrap --restore lists them)\n",
				e.file, cc.verb+"ped", e.changed, plural(e.changed, "entry", "entries"), saved.Backup.ID)
		}
	}
	if written > 0 {
		fmt.Fprintln(c.stdout, "restart the host or reconnect its MCP servers to use the change")
	}
	return 0
}

// applied is what wrap or unwrap would make of one file.
type applied struct {
	cur     []byte
	changed int
	parts   []appliedPart
}

type appliedPart struct {
	label    string
	loc      mcpconfig.Location
	outcomes []mcpconfig.Outcome
}

// apply runs the command's change over every scope of e's file in turn, each
// on the text the one before left, without writing or printing anything.
func (cc *configCmd) apply(e *fileEdit, proxy string) (applied, error) {
	res := applied{cur: e.old}
	for _, p := range e.parts {
		doc, err := parseDoc(p.loc, res.cur)
		if err != nil {
			return res, err
		}
		names := cc.names
		if len(names) > 0 {
			names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !hasServer(doc, n) })
			if len(names) == 0 {
				continue // the names asked for are in another scope
			}
		}
		var ch *mcpconfig.Change
		if cc.verb == "wrap" {
			ch, err = doc.WrapWith(names, proxy, cc.entryFlags)
		} else {
			ch, err = doc.Unwrap(names)
		}
		if err != nil {
			return res, err
		}
		res.cur = ch.New
		for _, o := range ch.Outcomes {
			if o.Changed {
				res.changed++
			}
		}
		res.parts = append(res.parts, appliedPart{p.label(), doc.Location(), ch.Outcomes})
	}
	return res, nil
}

const noServersHere = "no MCP servers found: none in the files of Claude Code (.mcp.json here or above, ~/.claude.json), Claude Desktop, Cursor (.cursor/mcp.json, ~/.cursor/mcp.json), " +
	"Gemini CLI (.gemini/settings.json, ~/.gemini/settings.json), VS Code (.vscode/mcp.json) or Windsurf for this directory or user (--config names another file)"

// checkNames fails when a name given on the command line is in none of the
// files: a typo must not pass for "nothing to change".
func checkNames(names []string, ls []loaded) error {
	for _, n := range names {
		if !slices.ContainsFunc(ls, func(l loaded) bool { return hasServer(l.doc, n) }) {
			var where []string
			for _, l := range ls {
				where = append(where, l.label()+" "+l.loc.String())
			}
			return fmt.Errorf("no server named %q in %s", n, strings.Join(where, ", "))
		}
	}
	return nil
}

func hasServer(d *mcpconfig.Document, name string) bool {
	return slices.ContainsFunc(d.Servers(), func(s mcpconfig.Server) bool { return s.Name == name })
}

// printOutcomes says what happened to each entry.
func printOutcomes(c *cli, cc *configCmd, label string, outcomes []mcpconfig.Outcome) {
	done := cc.verb + "ped" // wrapped, unwrapped
	if cc.dryRun {
		done = "would " + cc.verb
	}
	for _, o := range outcomes {
		switch {
		case o.Changed:
			fmt.Fprintf(c.stdout, "  %s %s\n", done, o.Name)
		case o.Warn:
			fmt.Fprintf(c.stderr, "warning: %s: %s: %s\n", label, o.Name, o.Note)
		default:
			fmt.Fprintf(c.stdout, "  unchanged %s: %s\n", o.Name, o.Note)
		}
	}
}

// proxyFor is the bir-proxy command to write into file, and a note saying
// why when it is not the default. A file git shares (a project's committed
// .mcp.json, a dotfiles repository) gets a command that runs on every
// machine: this machine's absolute path would be "Failed to connect" for a
// teammate.
func (cc *configCmd) proxyFor(ctx context.Context, c *cli, file string) (proxy, note string, err error) {
	shared, how := gitShared(ctx, file)
	if cc.proxyPath != "" {
		if shared && filepath.IsAbs(cc.proxyPath) {
			fmt.Fprintf(c.stderr, "warning: %s is %s; the path %s is written as asked, and runs only where bir-proxy is at that path\n", file, how, cc.proxyPath)
		}
		return cc.proxyPath, "", nil
	}
	if !shared {
		proxy, err = defaultProxyPath(c.stderr)
		return proxy, "", err
	}
	if p, lerr := exec.LookPath("bir-proxy"); lerr == nil {
		return "bir-proxy", fmt.Sprintf("%s is %s: writing the command bir-proxy (here %s), which runs for everyone with bir-proxy on PATH", file, how, p), nil
	}
	self, _ := defaultProxyPath(io.Discard)
	return "", "", fmt.Errorf("%s is %s, and this machine's path %s would not run for anyone else; nothing was written. "+
		"Put bir-proxy on PATH (e.g. go install github.com/bir-dev/bir-proxy/cmd/bir-proxy@latest) and run wrap again, "+
		"or pass --proxy-path bir-proxy (everyone then needs it on PATH), or --proxy-path %s to write this machine's path anyway", file, how, self, self)
}

// gitDeadline bounds the git command that asks whether a file is shared: a
// wrap must not hang on a repository on a dead network mount.
const gitDeadline = 5 * time.Second

// gitShared reports whether git shares file: it is tracked, or it is in a
// work tree and not ignored (the next `git add .` commits it). Without git,
// or outside a repository, it is not.
func gitShared(ctx context.Context, file string) (bool, string) {
	if real, err := filepath.EvalSymlinks(file); err == nil {
		file = real
	}
	ctx, cancel := context.WithTimeout(ctx, gitDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "-C", filepath.Dir(file), "status", "--porcelain", "--ignored", "--", filepath.Base(file))
	out, err := cmd.Output()
	if err != nil {
		return false, "" // not a repository, or no git
	}
	switch s := string(out); {
	case strings.HasPrefix(s, "!!"):
		return false, ""
	case strings.HasPrefix(s, "??"):
		return true, "in a git work tree and not ignored"
	default:
		return true, "tracked by git"
	}
}

// restoreBackup is unwrap --restore: list the backups of the files in play,
// or put one back.
func (cc *configCmd) restoreBackup(c *cli) int {
	fail := func(err error) int {
		fmt.Fprintf(c.stderr, "bir-proxy unwrap --restore: %v\n", err)
		return 1
	}
	bs, err := c.backups()
	if err != nil {
		return fail(err)
	}
	cc.knowFiles(bs, nil)
	ts, err := cc.targets()
	if err != nil {
		return fail(err)
	}
	// The files, not their servers: a restore is what mends a file that no
	// longer parses.
	var files []string
	for _, t := range ts {
		if !t.found {
			continue
		}
		if _, err := os.Stat(t.loc.File); err != nil {
			if !errors.Is(err, fs.ErrNotExist) || cc.explicit() {
				return fail(err)
			}
			continue
		}
		if !slices.Contains(files, t.loc.File) {
			files = append(files, t.loc.File)
		}
	}
	if len(files) == 0 {
		return fail(errors.New("no MCP config file here: none of the hosts' files (.mcp.json, ~/.claude.json, .cursor/mcp.json, .gemini/settings.json, .vscode/mcp.json, ...) is here or above, or in your home"))
	}

	if len(cc.names) == 0 {
		for _, f := range files {
			list, err := bs.List(f)
			if err != nil {
				return fail(err)
			}
			if len(list) == 0 {
				fmt.Fprintf(c.stdout, "%s: no backups\n", f)
				continue
			}
			fmt.Fprintf(c.stdout, "%s: %d %s, oldest first (the oldest is always kept)\n", f, len(list), plural(len(list), "backup", "backups"))
			tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
			for _, bk := range list {
				fmt.Fprintf(tw, "  %s\t%s\t%d bytes\n", bk.ID, bk.Time.Local().Format("2006-01-02 15:04:05 MST"), bk.Size)
			}
			tw.Flush()
		}
		fmt.Fprintf(c.stdout, "put one back with: bir-proxy unwrap --restore ID (the start of an ID will do)\n")
		return 0
	}

	id := cc.names[0]
	var found []mcpconfig.Backup
	for _, f := range files {
		bk, ok, err := bs.Find(f, id)
		if err != nil {
			return fail(err)
		}
		if ok {
			found = append(found, bk)
		}
	}
	switch len(found) {
	case 0:
		return fail(fmt.Errorf("no backup %q of %s (bir-proxy unwrap --restore lists them)", id, strings.Join(files, " or ")))
	case 1:
	default:
		return fail(fmt.Errorf("%q matches backups of %s and %s; give more of the ID, or --config or --scope", id, found[0].File, found[1].File))
	}
	bk := found[0]
	ch, err := mcpconfig.Restore(bk)
	if err != nil {
		return fail(err)
	}
	switch {
	case !ch.Changed():
		fmt.Fprintf(c.stdout, "%s: already holds backup %s\n", bk.File, bk.ID)
	case cc.dryRun:
		fmt.Fprint(c.stdout, ch.Diff())
		fmt.Fprintf(c.stdout, "%s: dry run, nothing written\n", bk.File)
	default:
		saved, err := ch.Save(bs)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(c.stdout, "%s: restored backup %s (%s); the version it replaced is backup %s\n",
			bk.File, bk.ID, bk.Time.Local().Format("2006-01-02 15:04:05 MST"), saved.Backup.ID)
		fmt.Fprintln(c.stdout, "restart the host or reconnect its MCP servers to use the change")
	}
	return 0
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func runStatus(ctx context.Context, c *cli, args []string) int {
	cc, code, ok := parseConfigCmd(c, "status", args)
	if !ok {
		return code
	}
	if cc.timeout <= 0 {
		return c.usageError("status", fmt.Errorf("--timeout %v: want a duration above 0", cc.timeout))
	}
	cc.knowFiles(c.backups())
	ts, err := cc.targets()
	if err != nil {
		fmt.Fprintf(c.stderr, "bir-proxy status: %v\n", err)
		return 1
	}
	status := 0
	var loadErrs []string
	ls, err := cc.load(ts)
	if err != nil {
		if !cc.json {
			fmt.Fprintf(c.stderr, "bir-proxy status: %v\n", err)
		}
		loadErrs = strings.Split(err.Error(), "\n")
		status = 1
	}
	checks := map[string]proxyCheck{}
	report := statusJSON{Entries: []statusEntry{}, Errors: loadErrs}
	for _, l := range ls {
		servers := l.doc.Servers()
		for _, s := range servers {
			if s.Kind == mcpconfig.KindWrapped || s.Kind == mcpconfig.KindWrappedRemote {
				if _, done := checks[s.ProxyCommand]; !done {
					v, err := c.proxyRuns(ctx, s.ProxyCommand)
					checks[s.ProxyCommand] = proxyCheck{v, err}
				}
			}
			if s.Broken != "" {
				status = 1
			}
		}
		var started map[int]entryCheck
		if cc.check {
			started = checkEntries(ctx, servers, cc.timeout)
			for _, ch := range started {
				if !ch.OK {
					status = 1
				}
			}
		}
		if cc.json {
			for i, s := range servers {
				report.Entries = append(report.Entries, newStatusEntry(l, s, checks, started, i))
			}
			continue
		}
		fmt.Fprintf(c.stdout, "%s: %s\n", l.label(), l.loc)
		printServers(c.stdout, servers, checks)
		if cc.check {
			printChecks(c.stdout, servers, started)
		}
	}
	cmds := make([]string, 0, len(checks))
	for cmd := range checks {
		cmds = append(cmds, cmd)
	}
	slices.Sort(cmds)
	for _, cmd := range cmds {
		ch := checks[cmd]
		if ch.err != nil {
			status = 1
		}
		report.Proxies = append(report.Proxies, statusProxy{Command: cmd, Runs: ch.err == nil, Version: ch.version, Error: errString(ch.err)})
	}
	if cc.json {
		report.Recorder = c.recorderStatus(ctx)
		report.Version = "bir-proxy " + version.Get().String()
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			fmt.Fprintf(c.stderr, "bir-proxy status: %v\n", err)
			return 1
		}
		return status
	}
	if len(ls) == 0 && status == 0 {
		fmt.Fprintln(c.stdout, noServersHere)
	}
	for _, cmd := range cmds {
		if ch := checks[cmd]; ch.err != nil {
			fmt.Fprintf(c.stdout, "the wrapped entries' %s does not run: %v; run bir-proxy wrap again, or fix the command\n", cmd, ch.err)
		} else {
			fmt.Fprintf(c.stdout, "the wrapped entries' %s runs: %s\n", cmd, ch.version)
		}
	}
	fmt.Fprint(c.stdout, userConfigStatus())
	fmt.Fprintln(c.stdout, c.recorderStatus(ctx))
	fmt.Fprint(c.stdout, otelStatus(time.Now()))
	// The same words as --version and the registration's version, so a recorder's
	// list of proxies and this line can be compared.
	fmt.Fprintf(c.stdout, "this bir-proxy: bir-proxy %s\n", version.Get())
	return status
}

// statusJSON is what status --json prints (docs/wrap.md, "status --json").
type statusJSON struct {
	Entries  []statusEntry `json:"entries"`
	Proxies  []statusProxy `json:"proxies,omitempty"`
	Errors   []string      `json:"errors,omitempty"`
	Recorder string        `json:"recorder"`
	Version  string        `json:"version"`
}

type statusEntry struct {
	Host      string      `json:"host"`
	File      string      `json:"file"`
	Scope     string      `json:"scope,omitempty"`
	Project   string      `json:"project,omitempty"`
	Name      string      `json:"name"`
	Kind      string      `json:"kind"`
	Wrapped   bool        `json:"wrapped"`
	Broken    bool        `json:"broken"`
	Problem   string      `json:"problem,omitempty"`
	Command   []string    `json:"command,omitempty"`
	Args      []string    `json:"args,omitempty"`
	URL       string      `json:"url,omitempty"`
	Transport string      `json:"transport,omitempty"`
	Server    string      `json:"server,omitempty"`
	Proxy     string      `json:"proxy,omitempty"`
	Policy    []string    `json:"policy,omitempty"`
	Check     *entryCheck `json:"check,omitempty"`
}

type statusProxy struct {
	Command string `json:"command"`
	Runs    bool   `json:"runs"`
	Version string `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
}

func newStatusEntry(l loaded, s mcpconfig.Server, checks map[string]proxyCheck, started map[int]entryCheck, i int) statusEntry {
	host := l.host
	if host == "" {
		host = mcpconfig.HostClaudeCode
	}
	e := statusEntry{
		Host: string(host), File: l.loc.File, Scope: string(l.scope), Project: l.loc.Project, Name: s.Name,
		Kind: strings.ReplaceAll(s.Kind.String(), " ", "-"), Problem: s.Problem, Command: redact.CommandLine(s.Command),
		Args:      redact.CommandLine(s.Args),
		Transport: s.Transport, Server: s.ProxyName, Proxy: s.ProxyCommand, Policy: s.Policy,
	}
	if s.URL != "" {
		e.URL = redact.URL(s.URL)
	}
	e.Wrapped = s.Kind == mcpconfig.KindWrapped || s.Kind == mcpconfig.KindWrappedRemote
	switch ch, ok := checks[s.ProxyCommand]; {
	case s.Broken != "":
		// Which argument is the server's command is not known.
		e.Broken, e.Problem, e.Command = true, s.Broken, nil
	case e.Wrapped && ok && ch.err != nil:
		e.Broken, e.Problem = true, s.ProxyCommand+" does not run: "+ch.err.Error()
	}
	if ch, ok := started[i]; ok {
		e.Check = &ch
	}
	return e
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// printChecks prints what status --check found for each wrapped entry.
func printChecks(w io.Writer, servers []mcpconfig.Server, started map[int]entryCheck) {
	if len(started) == 0 {
		return
	}
	fmt.Fprintln(w, "  started as the host would (initialize, tools/list):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, s := range servers {
		if ch, ok := started[i]; ok {
			fmt.Fprintf(tw, "    %s\t%s\n", s.Name, printableWord(ch.String()))
		}
	}
	tw.Flush()
}

type proxyCheck struct {
	version string
	err     error
}

// proxyDeadline bounds `bir-proxy --version`: a command that hangs is as
// broken as one that is missing.
const proxyDeadline = 5 * time.Second

// proxyRuns checks that command resolves (as the host would look it up: on
// PATH when it has no separator) and is a bir-proxy that runs, by running
// it with --version.
func proxyRuns(ctx context.Context, command string) (string, error) {
	path, err := exec.LookPath(command)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, proxyDeadline)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	v := strings.TrimSpace(string(out))
	if !strings.HasPrefix(v, "bir-proxy ") {
		return "", fmt.Errorf("%s --version printed %q, not a bir-proxy version", path, v)
	}
	return v, nil
}

func printServers(w io.Writer, servers []mcpconfig.Server, checks map[string]proxyCheck) {
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
		if s.Broken != "" {
			// The proxy's flags do not parse, so which argument is the server's
			// command is not known: the arguments as written, after why.
			state, what = "BROKEN", "("+printableWord(s.Broken)+")  "+commandLine(redact.CommandLine(append([]string{"bir-proxy"}, s.Args...)))
		}
		if len(s.Policy) > 0 {
			what += "  [" + strings.Join(s.Policy, " ") + "]"
		}
		if ch, ok := checks[s.ProxyCommand]; ok && ch.err != nil && state == "wrapped" {
			state = "BROKEN"
			what += "  (" + s.ProxyCommand + " does not run)"
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
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") || strings.ContainsFunc(a, unicode.IsControl) {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.Join(q, " ")
}
