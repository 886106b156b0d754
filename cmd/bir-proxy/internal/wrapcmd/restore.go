package wrapcmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/mcpconfig"
)

// restoreBackup is unwrap --restore: list the backups of the files in play,
// or put one back.
func (c *cmd) restoreBackup() int {
	fail := func(err error) int {
		fmt.Fprintf(c.Stderr, "bir-proxy unwrap --restore: %v\n", err)
		return 1
	}
	bs, err := c.Backups()
	if err != nil {
		return fail(err)
	}
	c.knowFiles(bs, nil)
	ts, err := c.sel.Targets()
	if err != nil {
		return fail(err)
	}
	// The files, not their servers: a restore is what mends a file that no
	// longer parses.
	var files []string
	for _, t := range ts {
		if !t.Found {
			continue
		}
		if _, err := os.Stat(t.Loc.File); err != nil {
			if !errors.Is(err, fs.ErrNotExist) || c.sel.Explicit() {
				return fail(err)
			}
			continue
		}
		if !slices.Contains(files, t.Loc.File) {
			files = append(files, t.Loc.File)
		}
	}
	if len(files) == 0 {
		return fail(errors.New("no MCP config file here: none of the hosts' files (.mcp.json, ~/.claude.json, .cursor/mcp.json, .gemini/settings.json, .vscode/mcp.json, ...) is here or above, or in your home"))
	}

	if len(c.Names) == 0 {
		for _, f := range files {
			list, err := bs.List(f)
			if err != nil {
				return fail(err)
			}
			if len(list) == 0 {
				fmt.Fprintf(c.Stdout, "%s: no backups\n", f)
				continue
			}
			fmt.Fprintf(c.Stdout, "%s: %d %s, oldest first (the oldest is always kept)\n", f, len(list), plural(len(list), "backup", "backups"))
			tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
			for _, bk := range list {
				fmt.Fprintf(tw, "  %s\t%s\t%d bytes", bk.ID, bk.Time.Local().Format("2006-01-02 15:04:05 MST"), bk.Size)
				if w := opWords(bk.Op); w != "" {
					fmt.Fprintf(tw, "\t%s", w)
				}
				fmt.Fprintln(tw)
			}
			tw.Flush()
		}
		fmt.Fprintf(c.Stdout, "put one back with: bir-proxy unwrap --restore ID (the start of an ID will do)\n")
		return 0
	}

	id := c.Names[0]
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
	ch.Op = "unwrap --restore " + bk.ID
	switch {
	case !ch.Changed():
		fmt.Fprintf(c.Stdout, "%s: already holds backup %s\n", bk.File, bk.ID)
	case c.DryRun:
		fmt.Fprint(c.Stdout, termtext.Text(ch.Diff())) // a comment of a JSONC file may hold anything
		fmt.Fprintf(c.Stdout, "%s: dry run, nothing written\n", bk.File)
	default:
		saved, err := ch.Save(bs)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(c.Stdout, "%s: restored backup %s (%s); the version it replaced is backup %s\n",
			bk.File, bk.ID, bk.Time.Local().Format("2006-01-02 15:04:05 MST"), saved.Backup.ID)
		fmt.Fprintln(c.Stdout, "restart the host or reconnect its MCP servers to use the change")
	}
	return 0
}

// opWords says which write a backup was taken before, as the listing's last
// column; "" for one an older bir-proxy kept, which did not say.
func opWords(op string) string {
	switch {
	case op == "":
		return ""
	case strings.HasPrefix(op, "kept "):
		return termtext.Line(op)
	}
	return "before " + termtext.Line(op)
}
