package verifycmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/regular"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/verify"
)

// cassetteMagic starts every cassette's first line (cassette/format.go).
const cassetteMagic = `{"bir-cassette"`

// maxSkippedShown bounds the names the skipped line lists.
const maxSkippedShown = 8

// cassettes expands the names given: a folder is its cassettes (not hidden, *.jsonl,
// starting as a cassette does; not its subfolders; its cassettes' *.jsonl.lock files
// are passed over without a word), in name order; a file is itself,
// whatever it holds (an unreadable one is said so, exit 2). skipped is the one line
// saying what of the folders was left out, "" when nothing was.
func cassettes(names []string) (paths []string, skipped string) {
	var left []string
	nLeft := 0
	for _, n := range names {
		st, err := os.Stat(n)
		if err != nil || !st.IsDir() {
			if !slices.Contains(paths, n) {
				paths = append(paths, n)
			}
			continue
		}
		ents, err := os.ReadDir(n)
		if err != nil {
			paths = append(paths, n) // unreadable: said so when it is opened
			continue
		}
		for _, e := range ents {
			p := filepath.Join(n, e.Name())
			why := ""
			if base, ok := strings.CutSuffix(e.Name(), ".lock"); ok && strings.HasSuffix(base, ".jsonl") && !e.IsDir() {
				// A cassette's lock (cassette.Create): the folder's own, not worth a
				// word (twenty cassettes named twenty locks, hiding a stray file).
				continue
			}
			switch {
			case strings.HasPrefix(e.Name(), "."):
				why = "hidden"
			case e.IsDir():
				why = "a folder"
			case !strings.HasSuffix(e.Name(), ".jsonl"):
				why = "not *.jsonl"
			case !isCassette(p):
				why = "not a cassette"
			}
			if why == "" {
				if !slices.Contains(paths, p) {
					paths = append(paths, p)
				}
				continue
			}
			if nLeft++; len(left) < maxSkippedShown {
				left = append(left, termtext.Line(p)+" ("+why+")")
			}
		}
	}
	if nLeft == 0 {
		return paths, ""
	}
	line := "skipped " + plural(nLeft, "file", "files") + ": " + strings.Join(left, ", ")
	if nLeft > len(left) {
		line += ", and " + strconv.Itoa(nLeft-len(left)) + " more"
	}
	return paths, line
}

// isCassette says whether the file at p starts as a cassette.
func isCassette(p string) bool {
	// A FIFO named x.jsonl blocked open(2) for ever, waiting for a writer: opened
	// without blocking, and only a regular file is looked in.
	f, _, err := regular.Open(p)
	if errors.Is(err, regular.ErrNotRegular) {
		return false
	}
	if err != nil {
		return true // a cassette it cannot read: verify says why (exit 2)
	}
	defer f.Close()
	b := make([]byte, len(cassetteMagic))
	n, _ := io.ReadFull(f, b)
	return string(b[:n]) == cassetteMagic
}

// result is one cassette's outcome, for the total.
type result struct {
	path string
	code int
	sum  *verify.Summary
}

// severity orders exit statuses, worst last: a run that could not read its
// cassette (2) or reach its server (3) said nothing of the server; findings (1) are
// worse than a run that verified nothing (4).
func severity(code int) int {
	return map[int]int{0: 0, 4: 1, 1: 2, 3: 3, 2: 4}[code]
}

// runMany verifies each cassette on a server of its own, then prints the total; the
// exit status is the worst of theirs.
func (o *Options) runMany(ctx context.Context, paths []string) int {
	if len(paths) == 0 {
		fmt.Fprintf(o.Stderr, "bir-proxy verify: no cassette in %s\n", termtext.Line(strings.Join(o.Cassettes, ", ")))
		return 2
	}
	var parts []string
	defer func() {
		for _, p := range parts {
			os.Remove(p)
		}
	}()
	var results []result
	for i, p := range paths {
		if ctx.Err() != nil {
			break
		}
		if !o.JSON {
			if i > 0 {
				fmt.Fprintln(o.Stdout)
			}
			fmt.Fprintf(o.Stdout, "== %s ==\n", termtext.Line(p))
		}
		junit := ""
		if o.JUnit != "" {
			f, err := os.CreateTemp(filepath.Dir(o.JUnit), ".junit-part-*")
			if err == nil {
				junit = f.Name()
				parts = append(parts, junit)
				f.Close()
			}
		}
		code, sum := o.runOne(ctx, p, junit, p)
		results = append(results, result{path: p, code: code, sum: sum})
	}
	worst := 0
	for _, r := range results {
		if severity(r.code) > severity(worst) {
			worst = r.code
		}
	}
	if o.JUnit != "" {
		if err := mergeJUnit(o.JUnit, parts); err != nil {
			fmt.Fprintf(o.Stderr, "bir-proxy verify: writing %s: %v\n", termtext.Line(o.JUnit), err)
			worst = 2
		}
	}
	if o.JSON {
		o.Stdout.Write(totalJSON(results, worst))
	} else {
		fmt.Fprint(o.Stdout, totalTable(results, worst))
	}
	return worst
}

// outcome is a cassette's line in the total.
func outcome(r result) string {
	calls := ""
	if r.sum != nil {
		calls = plural(r.sum.Total, "call", "calls") + " — "
	}
	switch r.code {
	case 0:
		if r.sum != nil && r.sum.Verified == 0 {
			return calls + "nothing verified"
		}
		return calls + "nothing changed"
	case 1:
		if r.sum == nil {
			return "verify failed"
		}
		return calls + plural(r.sum.Findings, "finding", "findings")
	case 2:
		return calls + "could not be read (or bad usage)"
	case 3:
		return "the server could not be started or reached"
	default:
		return calls + "nothing verified"
	}
}

func totalTable(results []result, worst int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n== total ==\n")
	calls, findings := 0, 0
	byCode := map[int]int{}
	for _, r := range results {
		fmt.Fprintf(&b, "%s: %s (exit %d)\n", termtext.Line(r.path), outcome(r), r.code)
		if r.sum != nil {
			calls += r.sum.Total
			findings += r.sum.Findings
		}
		byCode[r.code]++
	}
	var parts []string
	for _, c := range []struct {
		code      int
		one, many string
	}{{0, "passed", "passed"}, {1, "with findings", "with findings"}, {4, "verified nothing", "verified nothing"},
		{3, "server unreachable", "servers unreachable"}, {2, "not read", "not read"}} {
		if n := byCode[c.code]; n > 0 {
			parts = append(parts, plural(n, c.one, c.many))
		}
	}
	fmt.Fprintf(&b, "%s, %s, %s: %s — exit %d\n", plural(len(results), "cassette", "cassettes"), plural(calls, "call", "calls"),
		plural(findings, "finding", "findings"), strings.Join(parts, ", "), worst)
	return b.String()
}

// totalJSON is --json's last line: {"total":{"cassettes":N,"calls":N,"findings":N,
// "exit":N,"results":[{"cassette":…,"exit":N,"calls":N,"findings":N},…]}}.
func totalJSON(results []result, worst int) []byte {
	calls, findings := 0, 0
	var rs []byte
	for i, r := range results {
		if i > 0 {
			rs = append(rs, ',')
		}
		rs = append(rs, `{"cassette":`...)
		rs = jsonlex.AppendString(rs, r.path)
		rs = append(rs, `,"exit":`...)
		rs = strconv.AppendInt(rs, int64(r.code), 10)
		if r.sum != nil {
			calls += r.sum.Total
			findings += r.sum.Findings
			rs = append(rs, `,"calls":`...)
			rs = strconv.AppendInt(rs, int64(r.sum.Total), 10)
			rs = append(rs, `,"findings":`...)
			rs = strconv.AppendInt(rs, int64(r.sum.Findings), 10)
		}
		rs = append(rs, '}')
	}
	return fmt.Appendf(nil, `{"total":{"cassettes":%d,"calls":%d,"findings":%d,"exit":%d,"results":[%s]}}`+"\n",
		len(results), calls, findings, worst, rs)
}

// JUnit reports as verify.JUnit writes them: the suites between these.
const (
	junitHead = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n"
	junitTail = "</testsuites>\n"
)

// mergeJUnit writes to dst a report of every suite in parts (one per cassette), each
// copied as it is, not read whole.
func mergeJUnit(dst string, parts []string) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	if _, err := io.WriteString(out, junitHead); err != nil {
		return err
	}
	for _, p := range parts {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		st, err := f.Stat()
		head := make([]byte, len(junitHead))
		if err == nil {
			_, err = io.ReadFull(f, head)
		}
		switch {
		case err != nil && st != nil && st.Size() == 0:
			f.Close()
			continue // a run that did not get as far as its report
		case err != nil:
			f.Close()
			return err
		case !bytes.Equal(head, []byte(junitHead)) || st.Size() < int64(len(junitHead)+len(junitTail)):
			f.Close()
			return fmt.Errorf("%s: not a report verify wrote", p)
		}
		_, err = io.CopyN(out, f, st.Size()-int64(len(junitHead)+len(junitTail)))
		f.Close()
		if err != nil {
			return err
		}
	}
	_, err = io.WriteString(out, junitTail)
	return err
}

// plural is n and the noun, in the singular for 1.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
