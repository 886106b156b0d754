package verify

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/mcpdiff"
)

// Sinks is several sinks as one.
type Sinks []Sink

func (ss Sinks) Start(h *cassette.Header, total int, plan bool) {
	for _, s := range ss {
		s.Start(h, total, plan)
	}
}
func (ss Sinks) Call(r *CallResult) {
	for _, s := range ss {
		s.Call(r)
	}
}
func (ss Sinks) Done(sum *Summary) {
	for _, s := range ss {
		s.Done(sum)
	}
}
func (ss Sinks) Flush() {
	for _, s := range ss {
		flush(s)
	}
}

// flush writes out what a sink holds (Run does, however it ends).
func flush(s Sink) {
	if f, ok := s.(interface{ Flush() }); ok {
		f.Flush()
	}
}

// flushAfter is how long a result written by Table or JSON may wait before it is
// written out: a write per result was a syscall per call, a sixth of verify's own
// cost per call, and nobody reading the output tells 50 ms.
const flushAfter = 50 * time.Millisecond

// maxHeld bounds what is held before it is written out anyway.
const maxHeld = 64 << 10

// held is a sink's output, held by a lazyWriter made on first use.
type held struct{ lw *lazyWriter }

func (h *held) to(w io.Writer) io.Writer {
	if h.lw == nil {
		h.lw = &lazyWriter{w: w}
	}
	return h.lw
}

// Flush writes out what is held.
func (h *held) Flush() {
	if h.lw != nil {
		h.lw.Flush()
	}
}

// lazyWriter holds what is written to it for at most flushAfter (or maxHeld bytes).
type lazyWriter struct {
	w     io.Writer
	mu    sync.Mutex
	buf   []byte
	timer *time.Timer // armed while something is held
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	switch {
	case len(l.buf) >= maxHeld:
		l.flushLocked()
	case l.timer == nil:
		l.timer = time.AfterFunc(flushAfter, l.Flush)
	}
	return len(p), nil
}

func (l *lazyWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
}

func (l *lazyWriter) flushLocked() {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if len(l.buf) > 0 {
		_, _ = l.w.Write(l.buf) // stdout: a reader that went away is not verify's failure
		l.buf = l.buf[:0]
	}
	if cap(l.buf) > maxHeld {
		l.buf = nil
	}
}

// Table prints a row per call (tool, status, duration before → after, why), the
// unified diff of each changed call under its row, and a summary; Color colours
// statuses and diffs (a terminal).
type Table struct {
	W     io.Writer
	Color bool
	held
}

func (t *Table) out() io.Writer { return t.to(t.W) }

const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	cyan   = "\x1b[36m"
	dim    = "\x1b[2m"
	reset  = "\x1b[0m"
)

func (t *Table) paint(c, s string) string {
	if !t.Color {
		return s
	}
	return c + s + reset
}

func (t *Table) Start(h *cassette.Header, total int, plan bool) {
	what := "verifying"
	if plan {
		what = "plan for"
	}
	calls := plural(total, "recorded call", "recorded calls")
	if total < 0 {
		calls = "the recorded calls" // a stream's, as they are read
	}
	fmt.Fprintf(t.out(), "%s %s of %s (%s era)\n", what, calls, termtext.Line(h.Server), termtext.Line(string(h.Era)))
	if total != 0 { // no header over no row
		fmt.Fprintf(t.out(), "\n%5s  %-28s  %-14s  %-21s  %s\n", "#", "TOOL", "STATUS", "BEFORE → AFTER", "WHY")
	}
}

func statusColor(s mcpdiff.Status) string {
	switch {
	case s == mcpdiff.Same || s == WouldRun:
		return green
	case s.Finding():
		return red
	default:
		return yellow
	}
}

func (t *Table) Call(r *CallResult) {
	after := "-"
	if r.After > 0 {
		after = ms(r.After)
	}
	dur := ms(r.Before) + " → " + after
	// Everything a peer's bytes reach is printed escaped (termtext): a tool name, a
	// reason quoting the server's text or stderr, a diff of its answer carried ESC,
	// BEL and OSC 52 (a clipboard write) to the terminal as they were.
	tool := termtext.Line(r.Tool)
	if utf8.RuneCountInString(tool) > 28 {
		tool = string([]rune(tool)[:27]) + "…"
	}
	st := fmt.Sprintf("%-14s", r.Status)
	color := statusColor(r.Status)
	if r.Finding() {
		color = red // a definition drift beside a same answer
	}
	row := fmt.Sprintf("%5d  %-28s  %s  %-21s  %s", r.Seq, tool, t.paint(color, st), dur, oneLine(r.Reason))
	fmt.Fprintln(t.out(), strings.TrimRight(row, " "))
	if r.Diff != "" {
		for _, l := range strings.SplitAfter(strings.TrimSuffix(r.Diff, "\n"), "\n") {
			l = termtext.Line(strings.TrimSuffix(l, "\n"))
			switch {
			case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
				l = t.paint(dim, l)
			case strings.HasPrefix(l, "@@"):
				l = t.paint(cyan, l)
			case strings.HasPrefix(l, "+"):
				l = t.paint(green, l)
			case strings.HasPrefix(l, "-"):
				l = t.paint(red, l)
			}
			fmt.Fprintf(t.out(), "       %s\n", l)
		}
	}
}

func (t *Table) Done(s *Summary) {
	fmt.Fprintln(t.out())
	if l := s.Tools.Line(); l != "" {
		fmt.Fprintln(t.out(), l)
	}
	fmt.Fprintln(t.out(), summaryLine(s))
	if s.Unverified != "" {
		fmt.Fprintf(t.out(), "nothing was verified: %s\n", s.Unverified)
	}
	if s.Updated != "" {
		fmt.Fprintf(t.out(), "updated %s with the new answers (the previous one is %s)\n", termtext.Line(s.Updated), termtext.Line(cassette.Rotated(s.Updated, 1)))
	}
	t.Flush()
}

var order = []mcpdiff.Status{mcpdiff.Same, WouldRun, mcpdiff.Changed, mcpdiff.ErrorDrift, mcpdiff.SchemaDrift, DefinitionDrift, mcpdiff.MissingTool,
	mcpdiff.SlowDown, mcpdiff.NotRun, mcpdiff.Skipped, mcpdiff.NotReplayable}

func summaryLine(s *Summary) string {
	var parts []string
	for _, st := range order {
		if n := s.Counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	verdict := "nothing changed"
	switch {
	case s.Findings > 0:
		verdict = plural(s.Findings, "finding", "findings")
	case s.Verified == 0:
		// Not "nothing changed": nothing was looked at.
		verdict = "nothing verified"
	}
	if s.Plan {
		verdict = "plan only: nothing was run"
		if s.Verified == 0 {
			verdict += ", nor would be"
		}
	}
	counts := ""
	if len(parts) > 0 {
		counts = ": " + strings.Join(parts, ", ") // none for no call: "0 calls:  — …" was left
	}
	return fmt.Sprintf("%s%s — %s (%s)", plural(s.Total, "call", "calls"), counts, verdict, s.Elapsed.Round(time.Millisecond))
}

// oneLine is a reason for a table cell: every control character escaped, CR and LF
// included (they only became spaces: ESC, BEL went through).
func oneLine(s string) string { return termtext.Line(s) }

// JSON writes a JSON line per call and a last summary line. Cassette, when set,
// is added to each (several cassettes are verified in one output).
type JSON struct {
	W        io.Writer
	Cassette string
	held
}

func (j *JSON) out() io.Writer { return j.to(j.W) }

func (j *JSON) Start(*cassette.Header, int, bool) {}

func (j *JSON) Call(r *CallResult) {
	b := []byte(`{`)
	if j.Cassette != "" {
		b = append(jsonlex.AppendString(append(b, `"cassette":`...), j.Cassette), ',')
	}
	b = append(b, `"seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, `,"tool":`...)
	b = jsonlex.AppendString(b, r.Tool)
	b = append(b, `,"status":`...)
	b = jsonlex.AppendString(b, string(r.Status))
	if r.Reason != "" {
		b = append(b, `,"reason":`...)
		b = jsonlex.AppendString(b, r.Reason)
	}
	b = append(b, `,"beforeMs":`...)
	b = strconv.AppendFloat(b, float64(r.Before.Microseconds())/1000, 'f', -1, 64)
	if r.Ran && r.After > 0 {
		b = append(b, `,"afterMs":`...)
		b = strconv.AppendFloat(b, float64(r.After.Microseconds())/1000, 'f', -1, 64)
	}
	if len(r.DefinitionDrift) > 0 {
		b = append(b, `,"definitionDrift":[`...)
		for i, m := range r.DefinitionDrift {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonlex.AppendString(b, m)
		}
		b = append(b, ']')
	}
	if r.Diff != "" {
		b = append(b, `,"diff":`...)
		b = jsonlex.AppendString(b, r.Diff)
	}
	j.out().Write(append(b, '}', '\n'))
}

func (j *JSON) Done(s *Summary) {
	b := []byte(`{"summary":{`)
	if j.Cassette != "" {
		b = append(jsonlex.AppendString(append(b, `"cassette":`...), j.Cassette), ',')
	}
	b = append(b, `"server":`...)
	b = jsonlex.AppendString(b, s.Server)
	b = append(b, `,"calls":`...)
	b = strconv.AppendInt(b, int64(s.Total), 10)
	b = append(b, `,"findings":`...)
	b = strconv.AppendInt(b, int64(s.Findings), 10)
	b = append(b, `,"plan":`...)
	b = strconv.AppendBool(b, s.Plan)
	b = append(b, `,"verified":`...)
	b = strconv.AppendInt(b, int64(s.Verified), 10)
	if s.Unverified != "" {
		b = append(b, `,"unverified":`...)
		b = jsonlex.AppendString(b, s.Unverified)
	}
	for _, l := range []struct {
		key   string
		names []string
	}{{`,"toolsRemoved":[`, s.Tools.Removed}, {`,"toolsAdded":[`, s.Tools.Added}} {
		if len(l.names) == 0 {
			continue
		}
		b = append(b, l.key...)
		for i, n := range l.names {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonlex.AppendString(b, n)
		}
		b = append(b, ']')
	}
	b = append(b, `,"counts":{`...)
	n := 0
	for _, st := range order {
		if c := s.Counts[st]; c > 0 {
			if n > 0 {
				b = append(b, ',')
			}
			b = jsonlex.AppendString(b, string(st))
			b = append(b, ':')
			b = strconv.AppendInt(b, int64(c), 10)
			n++
		}
	}
	j.out().Write(append(b, "}}}\n"...))
	j.Flush()
}

// JUnit writes a JUnit XML report to Path: one testcase per call, a failure for each
// finding (its reason, and its diff as the body), skipped for the calls not run by
// choice. Cases go to a temporary file as they come (memory stays flat) and are put
// under their testsuite, whose counts are known only at the end, in Done.
type JUnit struct {
	Path string

	tmp    *os.File
	w      *bufio.Writer
	err    error
	server string
	// skipped counts the cases written skipped: a would_run call whose tool's
	// definition drifted is a failure, not one of them.
	skipped int
}

func (j *JUnit) Start(h *cassette.Header, _ int, _ bool) {
	j.server = h.Server
	j.tmp, j.err = os.CreateTemp(filepath.Dir(j.Path), ".junit-*")
	if j.err == nil {
		j.w = bufio.NewWriter(j.tmp)
	}
}

func (j *JUnit) Call(r *CallResult) {
	if j.w == nil {
		return
	}
	name := fmt.Sprintf("#%d %s", r.Seq, r.Tool)
	secs := r.After.Seconds()
	fmt.Fprintf(j.w, `  <testcase classname="%s" name="%s" time="%.3f">`, xmlEscape(j.server), xmlEscape(name), secs)
	switch {
	case r.Finding():
		typ := r.Status
		if !typ.Finding() {
			typ = DefinitionDrift // the call's own status is no finding; its tool's definition is
		}
		fmt.Fprintf(j.w, "\n    <failure type=\"%s\" message=\"%s\">%s</failure>\n  ", typ, xmlEscape(r.Reason), xmlEscape(r.Diff))
	case r.Status == mcpdiff.Skipped || r.Status == mcpdiff.NotReplayable || r.Status == WouldRun:
		j.skipped++
		fmt.Fprintf(j.w, "\n    <skipped message=\"%s: %s\"/>\n  ", r.Status, xmlEscape(r.Reason))
	}
	j.w.WriteString("</testcase>\n")
}

func (j *JUnit) Done(s *Summary) {
	if j.w == nil {
		return
	}
	defer os.Remove(j.tmp.Name())
	defer j.tmp.Close()
	if j.err = j.w.Flush(); j.err != nil {
		return
	}
	out, err := os.Create(j.Path)
	if err != nil {
		j.err = err
		return
	}
	defer out.Close()
	skipped := j.skipped
	fmt.Fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"bir-proxy verify %s\" tests=\"%d\" failures=\"%d\" skipped=\"%d\" time=\"%.3f\">\n",
		xmlEscape(s.Server), s.Total, s.Findings, skipped, s.Elapsed.Seconds())
	if _, j.err = j.tmp.Seek(0, 0); j.err != nil {
		return
	}
	if _, j.err = io.Copy(out, j.tmp); j.err != nil {
		return
	}
	_, j.err = out.WriteString("</testsuite>\n</testsuites>\n")
}

// Err is what went wrong writing the report.
func (j *JUnit) Err() error { return j.err }

// xmlEscape is s as XML text or attribute: control characters escaped as on a
// terminal (termtext: a report is read in a CI's page or a terminal), then XML's.
func xmlEscape(s string) string {
	var b strings.Builder
	for _, r := range termtext.Text(s) {
		switch {
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '&':
			b.WriteString("&amp;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\n' || r == '\t' || r == '\r':
			b.WriteRune(r)
		case r < 0x20 || r == 0xFFFE || r == 0xFFFF:
			b.WriteString("\uFFFD") // not allowed in XML 1.0 at all
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Progress writes a progress line (for a terminal's stderr) as calls come.
type Progress struct {
	W     io.Writer
	total int
	n     int
	last  time.Time
}

func (p *Progress) Start(_ *cassette.Header, total int, _ bool) { p.total = total }
func (p *Progress) Call(*CallResult) {
	p.n++
	if time.Since(p.last) < 100*time.Millisecond && (p.n < p.total || p.total < 0) {
		return
	}
	p.last = time.Now()
	if p.total < 0 { // a stream: its total is not known
		fmt.Fprintf(p.W, "\r\x1b[Kverify: %d calls", p.n)
		return
	}
	fmt.Fprintf(p.W, "\r\x1b[Kverify: %d/%d calls", p.n, p.total)
}
func (p *Progress) Done(*Summary) { fmt.Fprint(p.W, "\r\x1b[K") }
