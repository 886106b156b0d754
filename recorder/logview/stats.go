package logview

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/statedir"
	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/report"
)

// Bounds of `bir-proxy log --stats`, which reads journals of any size a line at a time
// and keeps, per server and tool, counts and sums (exact) and a sample of the
// durations and result sizes (for the percentiles).
const (
	// MaxStatsSample is the most values of each kind (durations, result sizes) kept
	// per tool: up to it every value is kept and the percentiles are exact; past it
	// the sample is a uniform reservoir of that many (Algorithm R).
	MaxStatsSample = 100_000
	// statsSampleBudget bounds the values kept of each kind over all tools together
	// (16 MB of float64s each): with more than statsSampleBudget/MaxStatsSample
	// tools, each tool's reservoir shrinks to the budget's share (a uniform subset of
	// a uniform sample is one too).
	statsSampleBudget = 2_000_000
	// maxStatsTools bounds the rows, server and tool pairs: past it the reports of
	// further pairs are counted in one row named (other), so a journal of made-up
	// tool names costs no more than this many.
	maxStatsTools = 2000
)

// otherTools names the row that counts the pairs past maxStatsTools.
const otherTools = "(other)"

// ToolStats is one row of `bir-proxy log --stats --json`: the calls of one tool of
// one server. Percentiles are nearest-rank (the smallest value with at least p% of
// the values at or below it), over every value or, past MaxStatsSample calls, over a
// uniform sample of that many. The result-size figures are over the reports that
// carry resultBytes (0 when none does: reports written before it existed).
type ToolStats struct {
	Server         string  `json:"server"`
	Tool           string  `json:"tool"`
	Calls          int64   `json:"calls"`
	Errors         int64   `json:"errors"` // tool_error and rpc_error outcomes
	P50Ms          float64 `json:"p50Ms"`
	P95Ms          float64 `json:"p95Ms"`
	ResultBytesP50 int64   `json:"resultBytesP50"`
	ResultBytesMax int64   `json:"resultBytesMax"`
	Trimmed        int64   `json:"trimmed"` // reports with "trimmed": true

	totalBytes int64 // the sum of resultBytes: the first key of the order by cost
	sized      int64 // reports that carry resultBytes
}

// cost orders rows most costly first: by the bytes of results sent to the host
// (all of them), then by the time spent (calls × median duration), then by name.
func (a *ToolStats) cost(b *ToolStats) int {
	if c := cmp.Compare(b.totalBytes, a.totalBytes); c != 0 {
		return c
	}
	if c := cmp.Compare(float64(b.Calls)*b.P50Ms, float64(a.Calls)*a.P50Ms); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Tool, b.Tool))
}

// sample is a bounded sample of a stream of values: all of them up to its bound,
// then a uniform reservoir.
type sample struct {
	v    []float64
	seen int64
}

func (s *sample) add(x float64, bound int, r *rand.Rand) {
	s.seen++
	if len(s.v) < bound {
		s.v = append(s.v, x)
		return
	}
	if j := r.Int64N(s.seen); j < int64(bound) {
		s.v[j] = x
	}
}

// shrink keeps a uniform random subset of bound values.
func (s *sample) shrink(bound int, r *rand.Rand) {
	if len(s.v) <= bound {
		return
	}
	for i := 0; i < bound; i++ { // a partial Fisher-Yates shuffle
		j := i + r.IntN(len(s.v)-i)
		s.v[i], s.v[j] = s.v[j], s.v[i]
	}
	s.v = slices.Clip(s.v[:bound])
}

// percentile is the nearest-rank p-th percentile of the values (sorted in place); 0
// when there are none.
func (s *sample) percentile(p int) float64 {
	n := len(s.v)
	if n == 0 {
		return 0
	}
	slices.Sort(s.v)
	rank := (p*n + 99) / 100 // ceil(p/100 × n), at least 1 for p > 0
	return s.v[max(rank, 1)-1]
}

type statsKey struct{ server, tool string }

type toolAcc struct {
	ToolStats
	dur, size sample
}

// statsAcc gathers the rows, in bounded memory.
type statsAcc struct {
	rows  map[statsKey]*toolAcc
	bound int // each sample's bound now
	rng   *rand.Rand
}

func newStatsAcc() *statsAcc {
	// A fixed seed: the same journal gives the same figures.
	return &statsAcc{rows: make(map[statsKey]*toolAcc), bound: MaxStatsSample, rng: rand.New(rand.NewPCG(38, 38))}
}

func (a *statsAcc) row(server, tool string) *toolAcc {
	k := statsKey{server, tool}
	if t, ok := a.rows[k]; ok {
		return t
	}
	if len(a.rows) >= maxStatsTools-1 {
		k = statsKey{otherTools, otherTools}
		if t, ok := a.rows[k]; ok {
			return t
		}
	}
	t := &toolAcc{ToolStats: ToolStats{Server: k.server, Tool: k.tool}}
	a.rows[k] = t
	if b := min(MaxStatsSample, statsSampleBudget/len(a.rows)); b < a.bound {
		a.bound = b
		for _, r := range a.rows {
			r.dur.shrink(b, a.rng)
			r.size.shrink(b, a.rng)
		}
	}
	return t
}

// add counts one report line.
func (a *statsAcc) add(line []byte) {
	f := gjson.GetManyBytes(line, "server", "tool", "outcome", "durationMs", "resultBytes", "trimmed")
	t := a.row(f[0].String(), f[1].String())
	t.Calls++
	if o := f[2].String(); o == report.OutcomeToolError || o == report.OutcomeRPCError {
		t.Errors++
	}
	t.dur.add(f[3].Float(), a.bound, a.rng)
	if f[4].Type == gjson.Number {
		n := max(f[4].Int(), 0)
		t.sized++
		t.totalBytes += n
		t.ResultBytesMax = max(t.ResultBytesMax, n)
		t.size.add(float64(n), a.bound, a.rng)
	}
	if f[5].Type == gjson.True {
		t.Trimmed++
	}
}

// result is the rows, most costly first.
func (a *statsAcc) result() []*ToolStats {
	out := make([]*ToolStats, 0, len(a.rows))
	for _, t := range a.rows {
		t.P50Ms, t.P95Ms = t.dur.percentile(50), t.dur.percentile(95)
		t.ResultBytesP50 = int64(t.size.percentile(50))
		out = append(out, &t.ToolStats)
	}
	slices.SortFunc(out, (*ToolStats).cost)
	return out
}

// Stats reads the reports PrintLog would show (the journal, and the reports waiting
// in the spool; opts' filters apply, Follow, Limit and Show do not) a line at a time,
// and returns a row per server and tool, most costly first.
func Stats(ctx context.Context, opts LogOptions) ([]*ToolStats, error) {
	dir, spoolDir := opts.Dir, opts.SpoolDir
	if opts.Path == "" && dir == "" {
		state, err := statedir.Dir()
		if err != nil {
			return nil, err
		}
		dir = journal.Dir(state)
		if spoolDir == "" {
			spoolDir = recorder.SpoolDir(state)
		}
	}
	if opts.Path != "" {
		if _, err := os.Stat(opts.Path); err != nil {
			return nil, fmt.Errorf("no journal: %w", err)
		}
	}
	srcs, err := listSources(opts.Path, dir, spoolDir, nil)
	if err != nil {
		return nil, err
	}
	acc := newStatsAcc()
	var long, lines int
	seen := map[string]int{} // the servers with reports, for the message when none match
	each := func(line []byte) error {
		if lines++; lines%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if s := gjson.GetBytes(line, "server").String(); seen[s] > 0 || len(seen) < 100 {
			seen[s]++
		}
		if opts.match(line) {
			acc.add(line)
		}
		return nil
	}
	for _, s := range srcs {
		var acked map[uint64]bool
		if s.spool {
			// Acknowledged reports (the recorder has them) are not counted; their
			// marks follow them, so the marks are read first.
			acked = map[uint64]bool{}
			if _, err := scanLines(s.path, true, func(rec journal.Record) error {
				if rec.Kind == journal.KindAck {
					acked[rec.Ack] = true
				}
				return nil
			}); err != nil {
				return nil, err
			}
		}
		n, err := scanLines(s.path, s.spool, func(rec journal.Record) error {
			if rec.Kind != journal.KindReport || acked[gjson.GetBytes(rec.Line, "seq").Uint()] {
				return nil
			}
			return each(rec.Line)
		})
		long += n
		if err != nil {
			return nil, err
		}
	}
	if long > 0 && opts.Notes != nil {
		fmt.Fprintf(opts.Notes, "%d %s over %d MiB skipped\n", long, plural(long, "line", "lines"), journal.MaxLine>>20)
	}
	rows := acc.result()
	if len(rows) == 0 {
		return nil, noStats(seen, opts, dir, spoolDir)
	}
	return rows, nil
}

// noStats says, as noneMatch does, that no report matched and which servers have
// reports, from their counts.
func noStats(seen map[string]int, opts LogOptions, dir, spoolDir string) error {
	if len(seen) == 0 {
		where := "nothing in the journal (" + dir + ")"
		if spoolDir != "" {
			where += " and nothing waiting in the spool (" + spoolDir + ")"
		}
		return fmt.Errorf("%w yet: %s; reports appear once a wrapped server's tools are called", ErrNoReports, where)
	}
	var have []string
	for s, n := range seen {
		have = append(have, fmt.Sprintf("%s (%d)", printable(s), n))
	}
	slices.Sort(have)
	what := "match"
	if opts.Server != "" && seen[opts.Server] == 0 {
		what = fmt.Sprintf("for server %q", opts.Server)
	}
	return fmt.Errorf("%w %s; servers with reports: %s", ErrNoReports, what, strings.Join(have, ", "))
}

// scanLines calls fn with each whole line of the file at path (a journal.Reader's
// records: fn sees the reader's buffer, valid until it returns), and returns how many
// lines over journal.MaxLine it skipped. A file that is not there has none.
func scanLines(path string, spool bool, fn func(rec journal.Record) error) (long int, err error) {
	r := journal.NewReader(path, spool)
	defer r.Close()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return r.Long, nil // a line not yet ended is not read
		}
		if err != nil {
			return r.Long, err
		}
		if err := fn(rec); err != nil {
			return r.Long, err
		}
	}
}

// PrintStats prints Stats to w: a table, or with opts.JSON one JSON document
// {"tools":[{"server","tool","calls","errors","p50Ms","p95Ms","resultBytesP50",
// "resultBytesMax","trimmed"}]}, rows in the same order. Under JSON, no report
// matching is an empty list (said on Notes), not an error.
func PrintStats(ctx context.Context, w io.Writer, opts LogOptions) error {
	rows, err := Stats(ctx, opts)
	if err != nil && !(opts.JSON && errors.Is(err, ErrNoReports)) {
		return err
	}
	if opts.JSON {
		if err != nil && opts.Notes != nil {
			fmt.Fprintln(opts.Notes, err)
		}
		if rows == nil {
			rows = []*ToolStats{}
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(struct {
			Tools []*ToolStats `json:"tools"`
		}{rows}); err != nil {
			return err
		}
		_, err := w.Write(b.Bytes())
		return err
	}
	_, err = io.WriteString(w, statsTable(rows))
	return err
}

// statsTable is the rows as a table whose server and tool columns are as wide as
// their longest name: names are never cut, so two tools whose names share a long
// start stay apart.
func statsTable(rows []*ToolStats) string {
	sw, tw := len("SERVER"), len("TOOL")
	for _, r := range rows {
		sw = max(sw, utf8.RuneCountInString(printable(r.Server)))
		tw = max(tw, utf8.RuneCountInString(printable(r.Tool)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-*s  %7s  %6s  %8s  %8s  %10s  %10s  %12s  %7s\n",
		sw, "SERVER", tw, "TOOL", "CALLS", "ERRORS", "P50", "P95", "RESULT P50", "RESULT MAX", "RESULT TOTAL", "TRIMMED")
	for _, r := range rows {
		p50, mx, total := "-", "-", "-"
		if r.sized > 0 {
			p50, mx, total = shortBytes(r.ResultBytesP50), shortBytes(r.ResultBytesMax), shortBytes(r.totalBytes)
		}
		fmt.Fprintf(&b, "%-*s  %-*s  %7d  %6d  %8s  %8s  %10s  %10s  %12s  %7d\n",
			sw, printable(r.Server), tw, printable(r.Tool), r.Calls, r.Errors,
			shortDuration(r.P50Ms), shortDuration(r.P95Ms), p50, mx, total, r.Trimmed)
	}
	return b.String()
}

// shortBytes is a size for a person: bytes, then KiB, MiB, GiB to one decimal.
func shortBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + unit
}
