package wrapcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/statedir"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/mcpconfig"
)

// DefaultBackups is where wrap, unwrap and a restore keep the versions they
// replace: bir-proxy's state directory, never the project.
func DefaultBackups() (mcpconfig.Backups, error) {
	state, err := statedir.Dir()
	if err != nil {
		return mcpconfig.Backups{}, fmt.Errorf("no place for backups: %w", err)
	}
	return mcpconfig.Backups{Dir: filepath.Join(state, "backups")}, nil
}

// DefaultProxyPath is the running executable, by the path it was started under
// when that is the same file: a package manager's stable symlink
// (/opt/homebrew/bin/bir-proxy) outlives the versioned file it points to, which is
// all os.Executable reports on Linux.
func DefaultProxyPath(stderr io.Writer) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the bir-proxy executable (pass --proxy-path): %w", err)
	}
	path := exe
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		if abs, err := filepath.Abs(p); err == nil && mcpconfig.SameFile(abs, exe) {
			path = abs
		}
	}
	if strings.Contains(path, string(filepath.Separator)+"go-build") {
		fmt.Fprintf(stderr, "warning: %s is a temporary build (go run?) that will be deleted; install bir-proxy or pass --proxy-path\n", path)
	}
	return path, nil
}

// fileEdit is every change one command makes to one file: local and user
// scope share ~/.claude.json, and are written together, with one backup.
type fileEdit struct {
	file     string
	old, cur []byte
	parts    []mcpconfig.Loaded
	changed  int
}

// edit is wrap or unwrap: it loads every target, applies the change to the
// named entries, says what happened to each entry under its file and
// scope, and writes each file that changed (or, with --dry-run, prints the
// diff). Nothing is written when anything fails before the writes.
func (c *cmd) edit(ctx context.Context) int {
	fail := func(err error) int {
		fmt.Fprintf(c.Stderr, "bir-proxy %s: %v\n", c.verb, err)
		return 1
	}
	bs, bsErr := c.Backups()
	c.knowFiles(bs, bsErr)
	ts, err := c.sel.Targets()
	if err != nil {
		return fail(err)
	}
	ls, err := c.load(ts)
	if err != nil {
		return fail(err)
	}
	for _, err := range c.skipped {
		fmt.Fprintf(c.Stderr, "warning: %v; that file is left alone (--host or --config to act on it)\n", err)
	}
	if len(ls) == 0 {
		return fail(errors.New(noServersHere))
	}
	if err := checkNames(c.Names, ls); err != nil {
		return fail(err)
	}
	if bsErr != nil && !c.DryRun {
		return fail(bsErr)
	}

	var edits []*fileEdit
	for _, l := range ls {
		i := slices.IndexFunc(edits, func(e *fileEdit) bool { return e.file == l.Loc.File })
		if i < 0 {
			edits = append(edits, &fileEdit{file: l.Loc.File, old: l.Data, cur: l.Data})
			i = len(edits) - 1
		}
		edits[i].parts = append(edits[i].parts, l)
	}

	for _, e := range edits {
		// Which bir-proxy to write is asked only of a file that has something to
		// wrap: a shared file with everything wrapped must not be refused. The
		// probe's name is never written.
		proxy := "bir-proxy"
		if c.verb == "wrap" {
			probe, err := c.apply(e, proxy)
			if err != nil {
				return fail(err)
			}
			if probe.changed > 0 {
				var note string
				if proxy, note, err = c.proxyFor(ctx, e.file); err != nil {
					return fail(err)
				}
				if note != "" {
					fmt.Fprintln(c.Stdout, note)
				}
			}
		}
		res, err := c.apply(e, proxy)
		if err != nil {
			return fail(err)
		}
		e.cur, e.changed = res.cur, res.changed
		for _, p := range res.parts {
			fmt.Fprintf(c.Stdout, "%s: %s\n", p.label, p.loc)
			c.printOutcomes(p.label, p.outcomes)
		}
	}

	written := 0
	for _, e := range edits {
		ch := &mcpconfig.Change{Location: mcpconfig.Location{File: e.file}, Old: e.old, New: e.cur, Op: strings.Join(append([]string{c.verb}, c.Names...), " ")}
		switch {
		case !ch.Changed():
			fmt.Fprintf(c.Stdout, "%s: nothing to change\n", e.file)
		case c.DryRun:
			fmt.Fprint(c.Stdout, termtext.Text(ch.Diff())) // a comment of a JSONC file may hold anything
			fmt.Fprintf(c.Stdout, "%s: dry run, nothing written\n", e.file)
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
				fmt.Fprintf(c.Stdout, "%s: moved the backup an older bir-proxy left in the project to %s\n", saved.Moved, filepath.Dir(saved.Backup.Path))
			}
			fmt.Fprintf(c.Stdout, "%s: %s %d %s; the previous version is backup %s (bir-proxy unwrap --restore lists them)\n",
				e.file, c.verb+"ped", e.changed, plural(e.changed, "entry", "entries"), saved.Backup.ID)
		}
	}
	if written > 0 {
		fmt.Fprintln(c.Stdout, "restart the host or reconnect its MCP servers to use the change")
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
func (c *cmd) apply(e *fileEdit, proxy string) (applied, error) {
	res := applied{cur: e.old}
	for _, p := range e.parts {
		doc, err := c.parseDoc(p.Loc, res.cur)
		if err != nil {
			return res, err
		}
		names := c.Names
		if len(names) > 0 {
			names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !hasServer(doc, n) })
			if len(names) == 0 {
				continue // the names asked for are in another scope
			}
		}
		var ch *mcpconfig.Change
		if c.verb == "wrap" {
			ch, err = doc.WrapWith(names, proxy, c.entryFlags)
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
		res.parts = append(res.parts, appliedPart{p.Label(), doc.Location(), ch.Outcomes})
	}
	return res, nil
}

// checkNames fails when a name given on the command line is in none of the
// files: a typo must not pass for "nothing to change".
func checkNames(names []string, ls []mcpconfig.Loaded) error {
	for _, n := range names {
		if !slices.ContainsFunc(ls, func(l mcpconfig.Loaded) bool { return hasServer(l.Doc, n) }) {
			var where []string
			for _, l := range ls {
				where = append(where, l.Label()+" "+l.Loc.String())
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
func (c *cmd) printOutcomes(label string, outcomes []mcpconfig.Outcome) {
	done := c.verb + "ped" // wrapped, unwrapped
	if c.DryRun {
		done = "would " + c.verb
	}
	for _, o := range outcomes {
		// An entry's name and a note quoting the file are the file's words.
		name, note := termtext.Line(o.Name), termtext.Line(o.Note)
		switch {
		case o.Changed:
			fmt.Fprintf(c.Stdout, "  %s %s\n", done, name)
		case o.Warn:
			fmt.Fprintf(c.Stderr, "warning: %s: %s: %s\n", label, name, note)
		default:
			fmt.Fprintf(c.Stdout, "  unchanged %s: %s\n", name, note)
		}
	}
}

// proxyFor is the bir-proxy command to write into file, and a note saying
// why when it is not the default. A file git shares (a project's committed
// .mcp.json, a dotfiles repository) gets a command that runs on every
// machine: this machine's absolute path would be "Failed to connect" for a
// teammate.
func (c *cmd) proxyFor(ctx context.Context, file string) (proxy, note string, err error) {
	shared, how := mcpconfig.GitShared(ctx, file)
	if c.ProxyPath != "" {
		if shared && filepath.IsAbs(c.ProxyPath) {
			fmt.Fprintf(c.Stderr, "warning: %s is %s; the path %s is written as asked, and runs only where bir-proxy is at that path\n", file, how, c.ProxyPath)
		}
		return c.ProxyPath, "", nil
	}
	if !shared {
		proxy, err = DefaultProxyPath(c.Stderr)
		return proxy, "", err
	}
	if p, lerr := exec.LookPath("bir-proxy"); lerr == nil {
		return "bir-proxy", fmt.Sprintf("%s is %s: writing the command bir-proxy (here %s), which runs for everyone with bir-proxy on PATH", file, how, p), nil
	}
	self, _ := DefaultProxyPath(io.Discard)
	return "", "", fmt.Errorf("%s is %s, and this machine's path %s would not run for anyone else; nothing was written. "+
		"Put bir-proxy on PATH (e.g. go install github.com/bir-dev/bir-proxy/cmd/bir-proxy@latest) and run wrap again, "+
		"or pass --proxy-path bir-proxy (everyone then needs it on PATH), or --proxy-path %s to write this machine's path anyway", file, how, self, self)
}

// entryFlags are the proxy flags wrap gives the entry name: --cassette's, then
// --pin-tools', --read-only, --otlp-endpoint's, --otlp-capture,
// --max-result-tokens'.
func (c *cmd) entryFlags(name string) []string {
	out := c.cassetteFlags(name)
	if c.Mock != "" {
		// By an absolute path: the host starts servers from anywhere.
		m, err := filepath.Abs(c.Mock)
		if err != nil {
			m = c.Mock
		}
		out = append(out, "--mock", m)
	}
	if c.PinTools != "" {
		out = append(out, "--pin-tools", c.PinTools)
	}
	if c.ReadOnly {
		out = append(out, "--read-only")
	}
	if c.OTLP != "" {
		out = append(out, "--otlp-endpoint", c.OTLP)
	}
	if c.Capture {
		out = append(out, "--otlp-capture")
	}
	if c.MaxTokens != "" {
		out = append(out, "--max-result-tokens", c.MaxTokens)
	}
	return out
}

// cassetteFlags are the proxy flags wrap --cassette DIR gives the entry name: its own
// file in DIR, by an absolute path (the host starts servers from anywhere).
func (c *cmd) cassetteFlags(name string) []string {
	if c.Cassettes == "" {
		return nil
	}
	dir, err := filepath.Abs(c.Cassettes)
	if err != nil {
		dir = c.Cassettes
	}
	return []string{"--cassette", filepath.Join(dir, cassette.FileName(name))}
}
