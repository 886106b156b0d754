package logview

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/recorder/recordertest"
	"github.com/bir-dev/bir-proxy/report"
)

// statsJSON runs PrintStats under JSON and decodes what it printed, checking it is
// the documented document and nothing more.
func statsJSON(t *testing.T, o LogOptions) []map[string]any {
	t.Helper()
	o.JSON = true
	var out bytes.Buffer
	if err := PrintStats(t.Context(), &out, o); err != nil {
		t.Fatalf("PrintStats: %v", err)
	}
	var doc map[string][]map[string]any
	dec := json.NewDecoder(&out)
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || len(doc) != 1 || doc["tools"] == nil || dec.More() {
		t.Fatalf("not one {\"tools\":[...]} document (%v): %s", err, out.Bytes())
	}
	for _, row := range doc["tools"] {
		if len(row) != 9 {
			t.Fatalf("a row with members other than the documented nine: %v", row)
		}
	}
	return doc["tools"]
}

// TestStatsFigures: on a journal written by a real journal Reporter (and a spool
// file), the figures per server and tool are exact: calls, errors (tool_error and
// rpc_error), nearest-rank p50/p95 of durationMs, p50/max of resultBytes over the
// reports that carry it, trimmed; rows most costly first; a waiting report counted
// and an acknowledged one not; --server and --since filter.
func TestStatsFigures(t *testing.T) {
	dir, spool := t.TempDir(), t.TempDir()
	r := rand.New(rand.NewPCG(3, 8))
	var search []report.Step
	// Durations 1..21 ms in a shuffled order; sizes 100..2000 for all but the
	// cancelled one (no answer: no resultBytes).
	for i, d := range r.Perm(21) {
		s := recordertest.SampleStep("search", i+1)
		s.DurationMs = float64(d + 1)
		switch {
		case d+1 == 21:
			s.Outcome, s.Result = report.OutcomeCancelled, nil
		default:
			s.ResultBytes = int64(d+1) * 100
		}
		if d+1 == 3 || d+1 == 4 {
			s.Outcome = report.OutcomeToolError
		}
		if d+1 == 5 {
			s.Outcome, s.Result, s.Error = report.OutcomeRPCError, nil, json.RawMessage(`{"code":1,"message":"x"}`)
		}
		search = append(search, s)
	}
	var files []report.Step
	for i, d := range []float64{9, 5, 7} {
		s := recordertest.SampleStep("get_file", 100+i)
		s.DurationMs, s.ResultBytes = d, 50_000
		files = append(files, s)
	}
	old := recordertest.SampleStep("get_file", 200)
	old.ReceivedAt = old.ReceivedAt.Add(-48 * time.Hour)
	old.DurationMs, old.ResultBytes = 1000, 1
	writeJournal(t, filepath.Join(dir, "github.jsonl"), "github", append(append(search, files...), old)...)

	// trimmed (set by --max-result-tokens, a later feature): counted when present.
	trimmed := recordertest.SampleStep("get_file", 300)
	trimmed.Server, trimmed.DurationMs, trimmed.ResultBytes = "github", 8, 50_000
	line := trimmed.AppendJSON(nil)
	line = append(append(line[:len(line)-1:len(line)-1], `,"trimmed":true}`...), '\n')
	f, err := os.OpenFile(filepath.Join(dir, "github.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(line)
	f.Close()

	long := recordertest.SampleStep("x", 1)
	long.ResultBytes = 10
	writeJournal(t, filepath.Join(dir, "a-server-name-longer-than-twelve.jsonl"), "a-server-name-longer-than-twelve", long)

	// The spool: seq 1 acknowledged (the recorder has it), seq 2 waiting.
	var sp []byte
	for seq := uint64(1); seq <= 2; seq++ {
		s := recordertest.SampleStep("spooled", int(seq))
		s.ProxyID, s.Server, s.Seq, s.DurationMs, s.ResultBytes = "0123456789abcdef0123456789abcdef", "github", seq, 2, 7
		sp = append(s.AppendJSON(sp), '\n')
	}
	sp = append(sp, `{"ack":1}`+"\n"...)
	if err := os.WriteFile(filepath.Join(spool, "github.0123456789abcdef0123456789abcdef.jsonl"), sp, 0o600); err != nil {
		t.Fatal(err)
	}

	rows := statsJSON(t, LogOptions{Dir: dir, SpoolDir: spool})
	got := make([]string, len(rows))
	for i, row := range rows {
		got[i] = fmt.Sprint(row["server"], " ", row["tool"], " calls=", row["calls"], " errors=", row["errors"],
			" p50=", row["p50Ms"], " p95=", row["p95Ms"], " bytesP50=", row["resultBytesP50"], " bytesMax=", row["resultBytesMax"],
			" trimmed=", row["trimmed"])
	}
	want := []string{
		// get_file: 5 reports, 200,001 bytes; durations 1000, 9, 5, 7, 8.
		"github get_file calls=5 errors=0 p50=8 p95=1000 bytesP50=50000 bytesMax=50000 trimmed=1",
		// search: 21 reports, 21,000 bytes over 20 of them; rank ceil(.5×21)=11,
		// ceil(.95×21)=20; sizes' rank ceil(.5×20)=10.
		"github search calls=21 errors=3 p50=11 p95=20 bytesP50=1000 bytesMax=2000 trimmed=0",
		"a-server-name-longer-than-twelve x calls=1 errors=0 p50=183.4 p95=183.4 bytesP50=10 bytesMax=10 trimmed=0",
		"github spooled calls=1 errors=0 p50=2 p95=2 bytesP50=7 bytesMax=7 trimmed=0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("stats:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Filters: --server, and --since drops the old report.
	since := recordertest.StepTime.Add(-time.Hour)
	rows = statsJSON(t, LogOptions{Dir: dir, Server: "github", Since: since})
	if len(rows) != 2 || rows[0]["tool"] != "get_file" || fmt.Sprint(rows[0]["calls"]) != "4" || fmt.Sprint(rows[0]["p95Ms"]) != "9" {
		t.Fatalf("--server github --since: %v", rows)
	}

	// The table: the server column as wide as the longest name, nothing clipped.
	var out bytes.Buffer
	if err := PrintStats(t.Context(), &out, LogOptions{Dir: dir, SpoolDir: spool}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "SERVER"+strings.Repeat(" ", len("a-server-name-longer-than-twelve")-len("SERVER")+2)+"TOOL") ||
		!strings.HasPrefix(lines[3], "a-server-name-longer-than-twelve  x ") || !strings.Contains(lines[1], "195.3 KiB") {
		t.Fatalf("table:\n%s", out.String())
	}

	// None matching: an empty list under JSON, the servers there are otherwise.
	if rows := statsJSON(t, LogOptions{Dir: dir, Server: "nosuch"}); len(rows) != 0 {
		t.Fatalf("--server nosuch: %v", rows)
	}
	err = PrintStats(t.Context(), &out, LogOptions{Dir: dir, Server: "nosuch"})
	if !errors.Is(err, ErrNoReports) || !strings.Contains(err.Error(), "github (26)") {
		t.Fatalf("--server nosuch: %v", err)
	}
}

// TestStatsSampleIsBounded: past MaxStatsSample reports of a tool its durations are
// a reservoir of that many, whose percentiles stay close to the whole's; past
// maxStatsTools pairs the rest share one (other) row; the values kept over all tools
// stay within the budget.
func TestStatsSampleIsBounded(t *testing.T) {
	acc := newStatsAcc()
	const n = 3 * MaxStatsSample
	r := rand.New(rand.NewPCG(1, 1))
	for _, d := range r.Perm(n) {
		acc.add(fmt.Appendf(nil, `{"server":"s","tool":"t","durationMs":%d,"resultBytes":%d}`, d+1, d+1))
	}
	one := acc.rows[statsKey{"s", "t"}]
	if len(one.dur.v) != MaxStatsSample || len(one.size.v) != MaxStatsSample || one.Calls != n {
		t.Fatalf("kept %d durations, %d sizes of %d calls; want %d", len(one.dur.v), len(one.size.v), one.Calls, MaxStatsSample)
	}
	rows := acc.result()
	// The whole's p50 is 150000, p95 285000: a uniform sample of 100k is within 1%.
	if p := rows[0].P50Ms; p < 0.99*n/2 || p > 1.01*n/2 {
		t.Errorf("sampled p50 %v, whole's %v", p, n/2)
	}
	if p := rows[0].P95Ms; p < 0.99*0.95*n || p > 1.01*0.95*n {
		t.Errorf("sampled p95 %v, whole's %v", p, 0.95*n)
	}
	if rows[0].ResultBytesMax != n {
		t.Errorf("max %d, want %d (exact, not sampled)", rows[0].ResultBytesMax, n)
	}

	for i := range 3 * maxStatsTools {
		acc.add(fmt.Appendf(nil, `{"server":"s","tool":"t%d","durationMs":1}`, i))
	}
	if len(acc.rows) != maxStatsTools || acc.rows[statsKey{otherTools, otherTools}] == nil {
		t.Fatalf("%d rows; want %d, one of them (other)", len(acc.rows), maxStatsTools)
	}
	kept := 0
	for _, row := range acc.rows {
		kept += len(row.dur.v)
	}
	if kept > statsSampleBudget || len(one.dur.v) != statsSampleBudget/maxStatsTools {
		t.Fatalf("%d durations kept in all (budget %d), %d of the first tool", kept, statsSampleBudget, len(one.dur.v))
	}
	if other := acc.rows[statsKey{otherTools, otherTools}]; other.Calls != 3*maxStatsTools-(maxStatsTools-2) {
		t.Fatalf("(other) counts %d calls", other.Calls)
	}
}
