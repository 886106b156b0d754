// Package cassettecmd is `bir-proxy cassette`: cassettes made from other recordings
// (import: an mcp-recorder cassette, bir-proxy's own journal) and into them (export:
// an mcp-recorder cassette). What each direction keeps and loses: docs/cassette.md.
package cassettecmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/verify"
)

// Usage is the command's synopsis.
const Usage = "import --from mcp-recorder|journal FILE -o OUT  |  cassette export --to mcp-recorder CASSETTE [-o OUT]"

// About is the paragraph under its usage line.
const About = `import makes a cassette that bir-proxy verify replays from another recording:
an mcp-recorder cassette (its handshake, tools/list and tools/call
interactions), or a bir-proxy journal (the calls whose arguments lost nothing
to redaction; no handshake and no tools, so verify needs --allow-writes).
export writes a cassette as an mcp-recorder cassette (stdout without -o).
What each keeps and loses: docs/cassette.md. The files hold the calls'
arguments: they are written 0600.`

// Options are the command's.
type Options struct {
	Stdout, Stderr io.Writer
	Logger         *slog.Logger
	// Args are the words after `cassette`: import FILE, or export CASSETTE.
	Args     []string
	From, To string // --from, --to
	Out      string // -o
	Server   string // --server: the cassette's server name (import), whose calls (journal)
}

// Run runs the command; it returns the exit status: 0, 1 when it failed, 2 for a
// usage error.
func Run(o Options) int {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	usage := func(msg string) int {
		fmt.Fprintf(o.Stderr, "bir-proxy cassette: %s (see bir-proxy help cassette)\n", msg)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(o.Stderr, "bir-proxy cassette: %s\n", termtext.Line(err.Error()))
		return 1
	}
	if len(o.Args) == 0 {
		return usage("import or export?")
	}
	verb, args := o.Args[0], o.Args[1:]
	if len(args) != 1 {
		return usage(verb + " takes one FILE")
	}
	switch verb {
	case "import":
		if o.To != "" {
			return usage("--to goes with export")
		}
		if o.Out == "" || o.Out == "-" {
			return usage("import needs -o OUT: a cassette file")
		}
		var im *Imported
		var err error
		switch o.From {
		case "mcp-recorder":
			im, err = readMCPRecorder(args[0])
		case "journal":
			im, err = readJournal(args[0], o.Server, o.Logger)
		default:
			return usage("--from: want mcp-recorder or journal")
		}
		if err != nil {
			return fail(err)
		}
		if o.Server != "" {
			im.Header.Server = o.Server
		}
		if im.Header.Server == "" {
			im.Header.Server = strings.TrimSuffix(filepath.Base(args[0]), filepath.Ext(args[0]))
		}
		n, err := writeCassette(o.Out, im, o.Logger)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(o.Stderr, "bir-proxy cassette: %d calls written to %s%s\n", n, termtext.Line(o.Out), leftNote(im.Left))
		return 0
	case "export":
		if o.From != "" {
			return usage("--from goes with import")
		}
		if o.To != "mcp-recorder" {
			return usage("--to: want mcp-recorder")
		}
		return export(o, args[0], fail)
	}
	return usage(fmt.Sprintf("no %q: import or export", verb))
}

// leftNote says what an import left out, if anything: the most frequent kinds, at
// most maxLeftKinds of them, each name clipped, and a count of the rest. A file of
// 10,000 methods of their own names made a line naming each, over a megabyte
// (TestCassetteImportLeftNoteIsBounded).
func leftNote(left map[string]int) string {
	if len(left) == 0 {
		return ""
	}
	var ks []string
	for k := range left {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if left[ks[i]] != left[ks[j]] {
			return left[ks[i]] > left[ks[j]]
		}
		return ks[i] < ks[j]
	})
	var parts []string
	rest := 0
	for i, k := range ks {
		if i >= maxLeftKinds {
			rest += left[k]
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %s", left[k], clipName(k)))
	}
	if rest > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", rest))
	}
	return "; left out: " + termtext.Line(strings.Join(parts, ", "))
}

// maxLeftKinds bounds the kinds leftNote names; maxLeftName the bytes of each name.
const (
	maxLeftKinds = 8
	maxLeftName  = 64
)

// clipName is s cut to maxLeftName bytes, not within a UTF-8 sequence.
func clipName(s string) string {
	if len(s) <= maxLeftName {
		return s
	}
	n := maxLeftName
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func readMCPRecorder(path string) (*Imported, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxImport {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, maxImport>>20)
	}
	// Read at its size: a buffer grown by doubling was two more copies of the file.
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	im, err := ParseMCPRecorder(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return im, nil
}

// readJournal takes the host's calls of a journal file (of server, when given) whose
// arguments lost nothing to redaction or clipping: verify --from-journal's reading.
func readJournal(path, server string, log *slog.Logger) (*Imported, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	src, err := verify.JournalSource([]string{path}, server, time.Time{}, log)()
	if err != nil {
		return nil, err
	}
	defer src.Close()
	im := &Imported{Left: map[string]int{}}
	im.Header = *src.Header()
	for {
		c, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if c.Redacted {
			im.Left["calls with redacted or clipped arguments"]++
			continue
		}
		if im.Header.RecordedAt.IsZero() || c.StartedAt.Before(im.Header.RecordedAt) {
			im.Header.RecordedAt = c.StartedAt
		}
		im.Calls = append(im.Calls, cassette.Recorded{Tool: c.Tool, Arguments: c.Arguments, Outcome: c.Outcome,
			Result: c.Result, Error: c.Error, StartedAt: c.StartedAt, Duration: c.Duration()})
	}
	return im, nil
}

// writeCassette writes im with cassette.Writer (the proxy's: 0600, an older file at
// out rotated to out.1) and reads it back with the strict reader.
func writeCassette(out string, im *Imported, log *slog.Logger) (int, error) {
	if len(im.Calls) == 0 {
		return 0, errors.New("no tools/call to import: nothing written")
	}
	w, err := cassette.Create(cassette.WriterOptions{Path: out, Logger: log})
	if err != nil {
		return 0, err
	}
	w.SetHeader(im.Header)
	for _, r := range im.ToolsLists {
		w.ServerResult("tools/list", r)
	}
	for _, c := range im.Calls {
		w.Call(c)
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	if n := w.Dropped(); n > 0 {
		return 0, fmt.Errorf("%s: %d calls could not be written (not whole JSON, or too large)", out, n)
	}
	// What was written reads back whole, as verify reads it.
	f, err := os.Open(out)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r, err := cassette.NewReader(f, out)
	if err != nil {
		return 0, fmt.Errorf("the cassette written does not read: %w", err)
	}
	n := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("the cassette written does not read: %w", err)
		}
		n++
	}
	if n != len(im.Calls) {
		return 0, fmt.Errorf("%s holds %d calls of %d (another proxy records to it?)", out, n, len(im.Calls))
	}
	return n, nil
}

func export(o Options, path string, fail func(error) int) int {
	src, err := verify.FileSource(path)()
	if err != nil {
		return fail(err)
	}
	defer src.Close()
	out, calls, left, err := ExportMCPRecorder(src.Header(), func() (*cassette.Call, error) {
		c, err := src.Next()
		if err == io.EOF {
			return nil, errEnd
		}
		return c, err
	})
	if err != nil {
		return fail(err)
	}
	if o.Out == "" || o.Out == "-" {
		o.Stdout.Write(out)
	} else if err := writePrivate(o.Out, out); err != nil {
		return fail(err)
	}
	note := ""
	if left > 0 {
		note = fmt.Sprintf("; %d redacted or too large calls left out (they cannot be replayed)", left)
	}
	fmt.Fprintf(o.Stderr, "bir-proxy cassette: %d calls exported%s\n", calls, note)
	return 0
}

// writePrivate writes data to path, 0600; a symbolic link there is refused, never
// followed, as a cassette's path is.
func writePrivate(path string, data []byte) error {
	if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (a symbolic link is not followed)", path)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bir-export-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
