// Package logview prints what bir-proxy recorded for `bir-proxy log`: the journal (the
// reports written when no recorder is configured) and the reports waiting in the spool
// for a recorder that did not answer, as a table, as JSON lines, or one call in full. It
// only reads files, so it lives apart from package recorder's HTTP delivery; all it takes
// from there is where the spool is (SpoolDir). Both the journal and the spool files
// (recorder/spool.go: report lines, then {"ack":SEQ} lines for the ones the recorder
// took) are read with package journal's Reader, which `bir-proxy verify` reads the
// journal with too; nothing here writes them.
package logview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/statedir"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/report"
)

// followEvery is how often PrintLog looks for new lines with Follow. Polling is fine
// here: this is a viewer a person runs, not the proxy.
const followEvery = 200 * time.Millisecond

// LogOptions says what PrintLog shows.
type LogOptions struct {
	Path string // one journal file; when empty, every *.jsonl in Dir
	Dir  string // when Path and Dir are empty, the default journal directory
	// SpoolDir holds the reports waiting for a recorder. When Path and Dir are empty
	// and SpoolDir is too, it is the default spool directory; with Path or Dir set, an
	// empty SpoolDir means no spool is read.
	SpoolDir string

	Server   string    // only this server's reports
	Tool     string    // only calls of this tool
	Outcomes []string  // only these outcomes (report.Outcome*)
	Failed   bool      // only calls that failed (FailedOutcomes)
	Since    time.Time // only calls received at or after this

	Follow bool   // keep printing new reports until ctx is done
	JSON   bool   // print each report as its JSON line instead of a table row
	Limit  int    // only the last Limit reports (0: all) before following
	Show   string // print the one call with this ID (see ID) in full; a run's id (or its start): its calls

	run string // the run --show named: only its calls (runOf)

	// Recorder, when set, says which recorder the waiting reports wait for; it is
	// called only when some are shown (it may take a moment: a reachability check).
	Recorder func() string
	// Notes receives what is said about the reports rather than the reports
	// themselves (none match, some are waiting, under JSON); nil: discarded.
	Notes io.Writer
}

// FailedOutcomes are the outcomes --failed shows: the call did not do what was
// asked. A cancelled call was stopped by the host, and an input_required round
// waits for the user; neither is a failure.
var FailedOutcomes = []string{report.OutcomeToolError, report.OutcomeRPCError, report.OutcomeUpstreamLost, report.OutcomeTimeout}

// Outcomes are the outcomes a report can have (SPEC §5).
var Outcomes = []string{report.OutcomeOK, report.OutcomeToolError, report.OutcomeRPCError, report.OutcomeCancelled,
	report.OutcomeUpstreamLost, report.OutcomeInputRequired, report.OutcomeTimeout, report.OutcomeTaskUnfinished}

// ErrNoReports is returned (wrapped, with what there is instead) when no report
// matches.
var ErrNoReports = errors.New("no reports")

// record is one report line (or a record that is not a call: a tool's drift, kind)
// and where it is.
type record struct {
	line []byte
	kind journal.Kind // KindReport or KindDrift
	// waiting: in the spool and not acknowledged by a recorder. delivered: in the spool
	// and acknowledged (shown only by Show: the recorder has it).
	waiting, delivered bool
	path               string
}

// ID is how the table and Show name a call: the first 6 characters of its proxyId
// (one run of a proxy) and its seq in that run.
func ID(proxyID string, seq uint64) string {
	if len(proxyID) > 6 {
		proxyID = proxyID[:6]
	}
	return proxyID + ":" + strconv.FormatUint(seq, 10)
}

func (r record) id() string {
	return ID(gjson.GetBytes(r.line, "proxyId").String(), gjson.GetBytes(r.line, "seq").Uint())
}

// PrintLog prints reports to w for `bir-proxy log`: a table (an ID, local time,
// server, tool, duration, outcome, where the report is, a one-line excerpt of the
// arguments) or the JSON lines themselves. Reports of several files are merged by the
// time the call was received.
func PrintLog(ctx context.Context, w io.Writer, opts LogOptions) error {
	dir, spoolDir := opts.Dir, opts.SpoolDir
	if opts.Path == "" && dir == "" {
		state, err := statedir.Dir()
		if err != nil {
			return err
		}
		dir = journal.Dir(state)
		if spoolDir == "" {
			spoolDir = recorder.SpoolDir(state)
		}
	}
	notes := opts.Notes
	if notes == nil {
		notes = io.Discard
	}
	if !opts.Follow && opts.Path != "" {
		if _, err := os.Stat(opts.Path); err != nil {
			return fmt.Errorf("no journal: %w", err)
		}
	}
	srcs, err := listSources(opts.Path, dir, spoolDir, nil)
	if err != nil {
		return err
	}
	limit := opts.Limit
	if opts.Show != "" {
		limit = 0 // the call asked for may be anywhere
	}
	all, err := readAll(srcs, limit, opts.match)
	if err != nil {
		return err
	}
	if opts.Show != "" {
		run, ok := runOf(opts.Show)
		if !ok && !strings.Contains(opts.Show, ":") {
			// Digits: a call's seq, unless no call has it and a run's id starts so.
			if err := show(w, all, opts); !errors.Is(err, ErrNoReports) || len(runsWithPrefix(all, opts.Show)) == 0 {
				return err
			}
			run, ok = opts.Show, true
		}
		if ok {
			// A run's id (or a prefix of it): its calls, as the table shows them.
			ids := runsWithPrefix(all, run)
			switch len(ids) {
			case 0:
				return fmt.Errorf("%w with ID %q (the first column of bir-proxy log, before the colon: a run)", ErrNoReports, opts.Show)
			case 1:
			default:
				return fmt.Errorf("%q is the start of %d runs' ids (%s); give more of it", opts.Show, len(ids), strings.Join(ids, ", "))
			}
			opts.run = ids[0]
			opts.Show = ""
			opts.Limit = 0
		} else {
			return show(w, all, opts)
		}
	}

	var shown []record
	for _, r := range all {
		if !r.delivered && opts.match(r.line) {
			shown = append(shown, r)
		}
	}
	slices.SortStableFunc(shown, func(a, b record) int { return receivedAt(a.line).Compare(receivedAt(b.line)) })
	if opts.Limit > 0 && len(shown) > opts.Limit {
		shown = shown[len(shown)-opts.Limit:]
	}
	if len(shown) == 0 {
		err := noneMatch(all, opts, dir, spoolDir)
		if !opts.Follow {
			return err
		}
		fmt.Fprintf(notes, "%v; waiting for new ones\n", err)
	}

	p := &logPrinter{w: w, opts: opts, serverW: len("SERVER")}
	for _, r := range shown {
		// As wide as the longest name shown (everything-old and everything-older
		// were both everything-… at a fixed width), up to maxServerWidth.
		p.serverW = max(p.serverW, min(utf8.RuneCountInString(printable(gjson.GetBytes(r.line, "server").String())), maxServerWidth))
	}
	if len(shown) > 0 {
		if err := p.header(); err != nil {
			return err
		}
	}
	waiting := 0
	for _, r := range shown {
		if r.waiting {
			waiting++
		}
		if err := p.print(r); err != nil {
			return err
		}
	}
	if waiting > 0 {
		what := "a recorder that has not answered"
		if opts.Recorder != nil {
			what = opts.Recorder()
		}
		out := w
		if opts.JSON || opts.Follow {
			out = notes // stdout stays JSON lines; a footer would end up mid-stream
		}
		fmt.Fprintf(out, "%d %s waiting in the spool (%s) for %s; the proxy that wrote %s, or the next run of its server, delivers %s when the recorder answers\n",
			waiting, plural(waiting, "report is", "reports are"), spoolDir, what, plural(waiting, "it", "them"), plural(waiting, "it", "them"))
	}
	if !opts.Follow {
		return nil
	}

	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if opts.Path == "" {
			// Files of servers (and runs) that start while we follow.
			if srcs, err = listSources("", dir, spoolDir, srcs); err != nil {
				return err
			}
		}
		for _, s := range srcs {
			if s.rotated {
				continue // read once: the live file's source follows across a rotation
			}
			recs, _, err := s.readNew()
			if err != nil {
				return err
			}
			for _, rec := range recs {
				r := record{line: rec.Line, kind: rec.Kind, waiting: s.spool, path: s.path}
				if !opts.match(rec.Line) {
					continue
				}
				if !p.headed {
					if err := p.header(); err != nil {
						return err
					}
				}
				if err := p.print(r); err != nil {
					return err
				}
			}
		}
	}
}

// runOf says an ID given to --show names a run (its proxyId, or the start of it)
// rather than one call: no ":seq", and not a bare seq.
func runOf(id string) (string, bool) {
	if id == "" || strings.Contains(id, ":") || strings.Trim(id, "0123456789") == "" {
		return "", false
	}
	return id, true
}

// runsWithPrefix are the runs (proxyIds) of all whose id starts with prefix, sorted.
func runsWithPrefix(all []record, prefix string) []string {
	seen := map[string]bool{}
	for _, r := range all {
		if r.kind != journal.KindReport {
			continue
		}
		if id := gjson.GetBytes(r.line, "proxyId").String(); strings.HasPrefix(id, prefix) {
			seen[id] = true
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// match reports whether a report line passes the filters.
func (o LogOptions) match(line []byte) bool {
	r := gjson.ParseBytes(line)
	if r.Get("record").String() == journal.RecordDrift {
		// A tool's drift from its pin: shown among the calls, by its server and
		// tool and time; not a call of a run, and it has no outcome.
		return o.run == "" && len(o.Outcomes) == 0 && !o.Failed &&
			(o.Server == "" || r.Get("server").String() == o.Server) &&
			(o.Tool == "" || r.Get("drift.tool").String() == o.Tool) &&
			(o.Since.IsZero() || !receivedAt(line).Before(o.Since))
	}
	if o.run != "" && r.Get("proxyId").String() != o.run {
		return false
	}
	if o.Server != "" && r.Get("server").String() != o.Server {
		return false
	}
	if o.Tool != "" && r.Get("tool").String() != o.Tool {
		return false
	}
	outcome := r.Get("outcome").String()
	if len(o.Outcomes) > 0 && !slices.Contains(o.Outcomes, outcome) {
		return false
	}
	if o.Failed && !slices.Contains(FailedOutcomes, outcome) {
		return false
	}
	if !o.Since.IsZero() && receivedAt(line).Before(o.Since) {
		return false
	}
	return true
}

// receivedAt is when a call was received (a report of before receivedAt: when it
// started), or when a drift record's drift was seen.
func receivedAt(line []byte) time.Time {
	f := gjson.GetManyBytes(line, "receivedAt", "startedAt", "at")
	for _, t := range f {
		if t.Exists() {
			return t.Time()
		}
	}
	return time.Time{}
}

// noneMatch says that no report matched and what there is instead: which servers
// have reports, or that there are none at all.
func noneMatch(all []record, opts LogOptions, dir, spoolDir string) error {
	count := map[string]int{}
	var names []string
	for _, r := range all {
		if r.delivered || r.kind != journal.KindReport {
			continue
		}
		s := printable(gjson.GetBytes(r.line, "server").String())
		if count[s] == 0 {
			names = append(names, s)
		}
		count[s]++
	}
	if len(names) == 0 {
		where := "nothing in the journal (" + dir + ")"
		if spoolDir != "" {
			where += " and nothing waiting in the spool (" + spoolDir + ")"
		}
		return fmt.Errorf("%w yet: %s; reports appear once a wrapped server's tools are called", ErrNoReports, where)
	}
	slices.Sort(names)
	var have []string
	for _, n := range names {
		have = append(have, fmt.Sprintf("%s (%d)", n, count[n]))
	}
	what := "match"
	if opts.Server != "" && count[opts.Server] == 0 {
		what = fmt.Sprintf("for server %q", opts.Server)
	}
	return fmt.Errorf("%w %s; servers with reports: %s", ErrNoReports, what, strings.Join(have, ", "))
}

// source is a journal or spool file being read (journal.Reader: how far its whole
// lines have been read, in which file; a journal is rotated to path.1, path.2, ... under
// a follower).
type source struct {
	path    string
	spool   bool
	rotated bool // an older file of a journal (path.N): read at the start only
	r       *journal.Reader
}

func newSource(path string, spool, rotated bool) *source {
	return &source{path: path, spool: spool, rotated: rotated, r: journal.NewReader(path, spool)}
}

// rotatedKept bounds how many rotated files of one journal are looked for.
const rotatedKept = 1000

// withRotated returns the sources for a journal at path: its rotated files, oldest
// first, then path itself.
func withRotated(path string) []*source {
	var out []*source
	for n := 1; n <= rotatedKept; n++ {
		p := journal.Rotated(path, n)
		if _, err := os.Stat(p); err != nil {
			break
		}
		out = append([]*source{newSource(p, false, true)}, out...)
	}
	return append(out, newSource(path, false, false))
}

// listSources lists the journal and spool files, keeping those of have (and where
// they were read to).
func listSources(path, dir, spoolDir string, have []*source) ([]*source, error) {
	if path != "" {
		if len(have) > 0 {
			return have, nil
		}
		return withRotated(path), nil
	}
	out := have
	for _, d := range []struct {
		dir   string
		spool bool
	}{{dir, false}, {spoolDir, true}} {
		if d.dir == "" {
			continue
		}
		des, err := os.ReadDir(d.dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", d.dir, err)
		}
		for _, de := range des {
			// A spool file is named only once its owner holds it; ".new" is one being
			// created.
			if !de.Type().IsRegular() || !strings.HasSuffix(de.Name(), ".jsonl") {
				continue
			}
			p := filepath.Join(d.dir, de.Name())
			if slices.ContainsFunc(out, func(s *source) bool { return s.path == p }) {
				continue
			}
			if d.spool {
				out = append(out, newSource(p, true, false))
			} else if have == nil {
				out = append(out, withRotated(p)...)
			} else {
				out = append(out, newSource(p, false, false)) // a journal begun while we follow
			}
		}
	}
	return out, nil
}

// readAll reads every source from its start: journal reports, and spool reports
// marked waiting or delivered by the done marks after them. With limit > 0 a journal
// file is read from its end, for its last limit reports that match: `log -n 5` on a
// 100 MB journal reads a block or two, not all of it into memory.
func readAll(srcs []*source, limit int, match func([]byte) bool) ([]record, error) {
	var out []record
	for _, s := range srcs {
		if limit > 0 && !s.spool {
			lines, err := s.tail(limit, match)
			if err != nil {
				return nil, err
			}
			for _, line := range lines {
				out = append(out, record{line: line, kind: journal.Classify(line).Kind, path: s.path})
			}
			continue
		}
		recs, acks, err := s.readNew()
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			line := rec.Line
			r := record{line: line, kind: rec.Kind, path: s.path}
			if s.spool {
				r.delivered = slices.Contains(acks, gjson.GetBytes(line, "seq").Uint())
				r.waiting = !r.delivered
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// readNew returns the reports (and drift records) and done marks in lines completed
// since the last call; the records' lines are their own. A line still being written is
// left for the next call.
func (s *source) readNew() (recs []journal.Record, acks []uint64, err error) {
	for {
		rec, err := s.r.Next()
		if err == io.EOF {
			return recs, acks, nil
		}
		if err != nil {
			return recs, acks, err
		}
		switch rec.Kind {
		case journal.KindAck:
			acks = append(acks, rec.Ack)
		case journal.KindReport, journal.KindDrift:
			rec.Line = bytes.Clone(rec.Line)
			recs = append(recs, rec)
		}
	}
}

// tail returns the last want reports that match in the whole lines of the source's
// file, oldest first, reading it backwards; following then starts at the end of its
// whole lines (a line still being written is left for it).
func (s *source) tail(want int, match func([]byte) bool) ([][]byte, error) {
	return s.r.Tail(want, func(rec journal.Record) bool { return match(rec.Line) })
}

type logPrinter struct {
	w       io.Writer
	opts    LogOptions
	headed  bool
	serverW int // the SERVER column's width
}

const (
	idWidth        = 11
	argsWidth      = 60
	maxServerWidth = 40
	toolWidth      = 24
)

func (p *logPrinter) header() error {
	p.headed = true
	if p.opts.JSON {
		return nil
	}
	_, err := fmt.Fprintf(p.w, "%-*s  %-12s  %-*s  %-*s  %8s  %-14s  %-7s  %s\n",
		idWidth, "ID", "TIME", p.serverW, "SERVER", toolWidth, "TOOL", "DURATION", "OUTCOME", "REPORT", "ARGS")
	return err
}

// waitingMark is the member put first in a waiting report's JSON line, so that a
// script tells it from one in the journal.
const waitingMark = `"waiting":true`

func (p *logPrinter) print(r record) error {
	if p.opts.JSON {
		line := r.line
		if r.waiting && len(line) > 1 && line[0] == '{' {
			sep := ","
			if bytes.TrimSpace(line[1:])[0] == '}' {
				sep = ""
			}
			line = slices.Concat([]byte("{"+waitingMark+sep), line[1:])
		}
		_, err := p.w.Write(append(line[:len(line):len(line)], '\n'))
		return err
	}
	_, err := io.WriteString(p.w, tableRow(r, time.Now(), p.serverW))
	return err
}

func tableRow(rec record, now time.Time, serverW int) string {
	r := gjson.ParseBytes(rec.line)
	if rec.kind == journal.KindDrift {
		return driftRow(r, now, serverW)
	}
	where := "journal"
	if rec.waiting {
		where = "waiting"
	}
	return fmt.Sprintf("%-*s  %-12s  %-*s  %-*s  %8s  %-14s  %-7s  %s\n",
		idWidth, printable(rec.id()), // never cut: it is what --show is given
		shortTime(receivedAt(rec.line), now),
		serverW, clip(printable(r.Get("server").String()), serverW),
		toolWidth, clip(printable(r.Get("tool").String()), toolWidth),
		shortDuration(r.Get("durationMs").Float()),
		clip(printable(r.Get("outcome").String()), 14),
		where,
		oneLineArgs(r.Get("args").Raw))
}

// driftRow is a drift record's row: no ID or duration (it is not a call), "drift:"
// and the pins' status as its outcome, and what changed where the arguments go.
func driftRow(r gjson.Result, now time.Time, serverW int) string {
	d := r.Get("drift")
	var what string
	switch d.Get("status").String() {
	case "changed":
		var names []string
		for _, c := range d.Get("changed").Array() {
			names = append(names, c.String())
		}
		what = "changed: " + strings.Join(names, ", ")
	case "renamed":
		what = "renamed from " + d.Get("from").String()
	case "new":
		what = "not pinned"
	}
	if what != "" {
		what += " (bir-proxy pins diff)"
	}
	return fmt.Sprintf("%-*s  %-12s  %-*s  %-*s  %8s  %-14s  %-7s  %s\n",
		idWidth, "-",
		shortTime(r.Get("at").Time(), now),
		serverW, clip(printable(r.Get("server").String()), serverW),
		toolWidth, clip(printable(d.Get("tool").String()), toolWidth),
		"-",
		clip(printable("drift: "+d.Get("status").String()), 14),
		"journal",
		clip(printable(what), argsWidth))
}

// show prints the call named opts.Show in full: its facts, then its arguments and
// result (or error) indented, with text content printed as text.
func show(w io.Writer, all []record, opts LogOptions) error {
	want := opts.Show
	var found []record
	for _, r := range all {
		if r.kind != journal.KindReport {
			continue // a drift record has no call ID
		}
		if opts.Server != "" && gjson.GetBytes(r.line, "server").String() != opts.Server {
			continue
		}
		pid := gjson.GetBytes(r.line, "proxyId").String()
		seq := strconv.FormatUint(gjson.GetBytes(r.line, "seq").Uint(), 10)
		prefix, s, ok := strings.Cut(want, ":")
		if !ok {
			prefix, s = "", want // a bare seq: enough when one run has it
		}
		if s == seq && strings.HasPrefix(pid, prefix) {
			found = append(found, r)
		}
	}
	switch len(found) {
	case 0:
		return fmt.Errorf("%w with ID %q (the first column of bir-proxy log)", ErrNoReports, want)
	case 1:
	default:
		var ids []string
		for _, r := range found {
			ids = append(ids, r.id())
		}
		return fmt.Errorf("%q names %d calls (%s); give the whole ID", want, len(found), strings.Join(ids, ", "))
	}
	rec := found[0]
	r := gjson.ParseBytes(rec.line)
	var b strings.Builder
	where := "in the journal " + rec.path
	switch {
	case rec.waiting:
		what := "a recorder that has not answered"
		if opts.Recorder != nil {
			what = opts.Recorder()
		}
		where = "waiting in the spool " + rec.path + " for " + what
	case rec.delivered:
		where = "delivered to the recorder (still in the spool " + rec.path + ")"
	}
	fmt.Fprintf(&b, "call %s, %s\n", rec.id(), where)
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "  %-12s %s\n", name, printable(value))
		}
	}
	field("server", r.Get("server").String())
	field("tool", r.Get("tool").String())
	field("outcome", r.Get("outcome").String())
	field("callId", r.Get("callId").String())
	field("dispatchId", r.Get("dispatchId").String())
	if id := r.Get("taskId").String(); id != "" {
		// SPEC §3.5: the call became a task, and ended (or not) with it.
		field("task", id+", last seen "+r.Get("taskStatus").String())
	}
	if r.Get("trimmed").Bool() {
		// The result budget (docs/budget.md): the report has the server's result.
		where := "the whole answer could not be kept"
		if p := r.Get("spill").String(); p != "" {
			where = "the whole answer is in " + p
		}
		field("trimmed", "the host got this result cut to the result budget (--max-result-tokens); "+where)
	}
	if n := r.Get("rounds").Int(); n > 1 {
		field("rounds", fmt.Sprintf("%d (it asked for input %s and the host answered)", n, plural(int(n-1), "once", fmt.Sprintf("%d times", n-1))))
	}
	for _, k := range []string{"receivedAt", "startedAt", "endedAt"} {
		if t := r.Get(k).Time(); !t.IsZero() {
			field(strings.TrimSuffix(k, "At"), t.Local().Format("2006-01-02 15:04:05.000 MST"))
		}
	}
	field("duration", shortDuration(r.Get("durationMs").Float()))
	field("fingerprint", r.Get("argsFingerprint").String())
	field("proxyId", r.Get("proxyId").String())
	field("seq", r.Get("seq").String())

	clipped := func(k string) string {
		if r.Get(k).Bool() {
			return " (clipped to fit the report)"
		}
		return ""
	}
	fmt.Fprintf(&b, "arguments%s:\n", clipped("argsClipped"))
	b.WriteString(indentJSON(r.Get("args").Raw, "  "))
	if res := r.Get("result"); res.Exists() {
		fmt.Fprintf(&b, "result%s:\n", clipped("resultClipped"))
		b.WriteString(readableResult(res))
	}
	if e := r.Get("error"); e.Exists() && e.Type != gjson.Null {
		b.WriteString("error:\n")
		if e.Get("message").Exists() {
			fmt.Fprintf(&b, "  %s %s\n", e.Get("code").Raw, printableText(e.Get("message").String(), "  "))
			if d := e.Get("data"); d.Exists() {
				b.WriteString("  data:\n" + indentJSON(d.Raw, "    "))
			}
		} else {
			b.WriteString(indentJSON(e.Raw, "  "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// readableResult prints an MCP tool result: text content as text, other content and
// structured content as indented JSON, isError said in words.
func readableResult(res gjson.Result) string {
	content := res.Get("content")
	if !res.IsObject() || !content.IsArray() {
		return indentJSON(res.Raw, "  ")
	}
	var b strings.Builder
	if res.Get("isError").Bool() {
		b.WriteString("  (the tool reported an error: isError is true)\n")
	}
	content.ForEach(func(_, c gjson.Result) bool {
		if c.Get("type").String() == "text" && c.Get("text").Type == gjson.String {
			text := c.Get("text").String()
			if t := strings.TrimSpace(text); len(t) > 1 && (t[0] == '{' || t[0] == '[') && gjson.Valid(t) {
				b.WriteString("  text (JSON):\n" + indentJSON(t, "    "))
			} else {
				b.WriteString("  text:\n    " + printableText(text, "    ") + "\n")
			}
			return true
		}
		b.WriteString("  " + printable(c.Get("type").String()) + ":\n" + indentJSON(c.Raw, "    "))
		return true
	})
	res.ForEach(func(k, v gjson.Result) bool {
		switch k.String() {
		case "content", "isError":
		default:
			b.WriteString("  " + printable(k.String()) + ":\n" + indentJSON(v.Raw, "    "))
		}
		return true
	})
	return b.String()
}

// indentJSON is raw indented under prefix, one line per member. JSON escapes C0
// controls but not DEL, C1 controls (U+009B is a CSI) or bidi overrides: the lines are
// escaped as verify's output is (termtext), and stay valid JSON.
func indentJSON(raw, prefix string) string {
	if raw == "" {
		return prefix + "(none)\n"
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(raw), prefix, "  "); err != nil {
		return prefix + printable(raw) + "\n"
	}
	return prefix + termtext.Text(buf.String()) + "\n"
}

// printableText is text for a terminal: its lines indented under prefix, other
// control characters (escape sequences) escaped (termtext: \x1b).
func printableText(s, prefix string) string {
	var b strings.Builder
	for i, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if i > 0 {
			b.WriteString("\n" + prefix)
		}
		b.WriteString(termtext.Text(strings.TrimSuffix(line, "\r")))
	}
	return b.String()
}

func shortTime(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	t, now = t.Local(), now.Local()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("Jan 02 15:04")
}

func shortDuration(ms float64) string {
	switch {
	case ms < 0:
		return "-"
	case ms < 10:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0fms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1fs", ms/1000)
	}
	d := time.Duration(ms * float64(time.Millisecond)).Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// oneLineArgs is the arguments as compact JSON, cut to fit the column. JSON escapes
// C0 controls, not DEL, C1 controls or bidi overrides: escaped too (termtext).
func oneLineArgs(raw string) string {
	if raw == "" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(raw)); err != nil {
		return clip(printable(raw), argsWidth)
	}
	return clip(termtext.Line(buf.String()), argsWidth)
}

func clip(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	runes := []rune(s)
	return string(runes[:width-1]) + "…"
}

// printable keeps a decoded name from carrying terminal escape sequences: every
// control character escaped, as verify's output is (termtext: \x1b, \u202e).
func printable(s string) string { return termtext.Line(s) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
