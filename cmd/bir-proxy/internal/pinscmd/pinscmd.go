// Package pinscmd is `bir-proxy pins`: each server's pinned tools and how they stand
// (pins), approving a drift, starting again, and a tool's change as a diff.
package pinscmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"

	"github.com/bir-dev/bir-proxy/internal/udiff"
	"github.com/bir-dev/bir-proxy/pins"
)

// Options are the command's: what it was asked, and where it prints.
type Options struct {
	Stdout, Stderr io.Writer
	Store          pins.Store
	JSON           bool
	// Args are the words after `pins`: [SERVER], or approve SERVER [TOOL...], reset
	// SERVER, diff SERVER TOOL.
	Args []string
}

// Usage is the command's synopsis.
const Usage = "[SERVER] [--json]  |  pins approve SERVER [TOOL...]  |  pins reset SERVER  |  pins diff SERVER TOOL"

// About is the paragraph under its usage line.
const About = `Lists each server's tools as bir-proxy pinned them the first time it saw them
(--pin-tools, warn by default), with how each stands in the last listing a
proxy saw: pinned, changed (and where), new, removed, renamed. BYTES is the
tool's definition as sent: what it costs the model's context. approve makes
the current definitions the pins (every drifted tool when none is named);
running proxies take it at their next tools/list. reset forgets a server's
pins: its next listing is pinned again. diff shows a tool's change.`

// Run runs the command; it returns the exit status: 0, 1 when something failed, 2
// for a usage error.
func Run(o Options) int {
	args := o.Args
	sub := ""
	if len(args) > 0 {
		switch args[0] {
		case "approve", "reset", "diff":
			sub, args = args[0], args[1:]
		}
	}
	usage := func(msg string) int {
		fmt.Fprintf(o.Stderr, "bir-proxy pins: %s (see bir-proxy help pins)\n", msg)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(o.Stderr, "bir-proxy pins: %s\n", printable(err.Error()))
		return 1
	}
	switch sub {
	case "approve":
		if len(args) == 0 {
			return usage("approve needs a SERVER")
		}
		done, err := pins.ApproveTools(o.Store, args[0], args[1:])
		if err != nil {
			return fail(noPins(err, args[0]))
		}
		if len(done) == 0 {
			fmt.Fprintf(o.Stdout, "%s: nothing to approve\n", printable(args[0]))
			return 0
		}
		fmt.Fprintf(o.Stdout, "%s: approved %s\n", printable(args[0]), printable(strings.Join(done, ", ")))
		return 0
	case "reset":
		if len(args) != 1 {
			return usage("reset needs one SERVER")
		}
		if err := o.Store.Reset(args[0]); err != nil {
			return fail(noPins(err, args[0]))
		}
		fmt.Fprintf(o.Stdout, "%s: pins forgotten; its next tool list is pinned again\n", printable(args[0]))
		return 0
	case "diff":
		if len(args) != 2 {
			return usage("diff needs a SERVER and a TOOL")
		}
		return diff(o, args[0], args[1], fail)
	}
	if len(args) > 1 {
		return usage("one SERVER at most")
	}
	servers := args
	if len(servers) == 0 {
		var err error
		if servers, err = o.Store.Servers(); err != nil {
			return fail(err)
		}
	}
	var out []serverOut
	for _, s := range servers {
		f, err := o.Store.Load(s)
		if err != nil {
			return fail(noPins(err, s))
		}
		out = append(out, standing(f))
	}
	if o.JSON {
		b, _ := json.Marshal(struct {
			Servers []serverOut `json:"servers"`
		}{append([]serverOut{}, out...)})
		fmt.Fprintf(o.Stdout, "%s\n", b)
		return 0
	}
	if len(out) == 0 {
		fmt.Fprintf(o.Stdout, "no pins yet: a proxy pins a server's tools the first time it lists them (%s)\n", o.Store.Dir())
		return 0
	}
	table(o.Stdout, out)
	return 0
}

type serverOut struct {
	Server string        `json:"server"`
	Tools  []pins.Status `json:"tools"`
}

// standing is how a server's tools stand: the last listing seen against the pins
// (every pin as pinned when no listing was recorded).
func standing(f *pins.File) serverOut {
	so := serverOut{Server: f.Server}
	if f.Seen != nil {
		so.Tools = pins.Compare(f.Pinned, f.Seen.Tools, f.Seen.Complete)
	} else {
		for name, d := range f.Pinned {
			so.Tools = append(so.Tools, pins.Status{Name: name, Status: pins.StatusPinned, Bytes: d.Bytes})
		}
	}
	sort.SliceStable(so.Tools, func(i, j int) bool {
		if so.Tools[i].Bytes != so.Tools[j].Bytes {
			return so.Tools[i].Bytes > so.Tools[j].Bytes
		}
		return so.Tools[i].Name < so.Tools[j].Name
	})
	if so.Tools == nil {
		so.Tools = []pins.Status{}
	}
	return so
}

func table(w io.Writer, out []serverOut) {
	for i, s := range out {
		if i > 0 {
			fmt.Fprintln(w)
		}
		total := 0
		width := len("TOOL")
		for _, t := range s.Tools {
			width = max(width, min(len(printable(t.Name)), 40))
		}
		fmt.Fprintf(w, "%s\n  %-*s  %-8s  %8s  %s\n", printable(s.Server), width, "TOOL", "STATUS", "BYTES", "")
		for _, t := range s.Tools {
			if t.Status != pins.StatusRemoved {
				total += t.Bytes
			}
			note := ""
			switch {
			case len(t.Changed) > 0:
				note = strings.Join(t.Changed, ", ") + " changed"
			case t.From != "":
				note = "from " + t.From
			}
			fmt.Fprintf(w, "  %-*s  %-8s  %8d  %s\n", width, clip(printable(t.Name), 40), t.Status, t.Bytes, printable(note))
		}
		fmt.Fprintf(w, "  %-*s  %-8s  %8d\n", width, "total", "", total)
	}
}

// diff prints the pinned and the last seen definition of a tool, pretty-printed, as a
// unified diff.
func diff(o Options, server, tool string, fail func(error) int) int {
	f, err := o.Store.Load(server)
	if err != nil {
		return fail(noPins(err, server))
	}
	pinned, ok := f.Pinned[tool]
	var seen *pins.Def
	if f.Seen != nil {
		for i := range f.Seen.Tools {
			if f.Seen.Tools[i].Name == tool {
				seen = &f.Seen.Tools[i]
			}
		}
	}
	if !ok && seen == nil {
		return fail(fmt.Errorf("%q has no tool %q pinned or seen", server, tool))
	}
	render := func(d *pins.Def) ([]string, error) {
		if d == nil {
			return nil, nil
		}
		if d.Raw == "" {
			// Not the members' hashes (a Go map printed raw): which members differ
			// is what `pins` says.
			return nil, fmt.Errorf("the definition of %q is over 64 KiB and was not kept whole, only its members' hashes; bir-proxy pins says which members changed", tool)
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, []byte(d.Raw), "", "  "); err != nil {
			return strings.Split(d.Raw, "\n"), nil
		}
		return strings.Split(buf.String(), "\n"), nil
	}
	var a []string
	if ok {
		if a, err = render(&pinned); err != nil {
			return fail(err)
		}
	}
	b, err := render(seen)
	if err != nil {
		return fail(err)
	}
	for i := range a {
		a[i] = printable(a[i])
	}
	for i := range b {
		b[i] = printable(b[i])
	}
	d := udiff.Lines(a, b, "pinned "+tool, "seen "+tool)
	if d == "" {
		fmt.Fprintf(o.Stdout, "%s: %s is as pinned\n", printable(server), printable(tool))
		return 0
	}
	io.WriteString(o.Stdout, d)
	return 0
}

func noPins(err error, server string) error {
	if errors.Is(err, pins.ErrNoPins) {
		return fmt.Errorf("no pins for %q (a proxy pins a server's tools the first time it lists them)", server)
	}
	return err
}

// printable escapes what a terminal would act on: a server's tool names and
// definitions are its own words.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
