package logview

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
	"github.com/bir-dev/bir-proxy/report"
)

// openJournal opens a real journal-mode Reporter on path, so the viewer reads what the
// proxy writes rather than lines a test made up; it is closed when the test ends.
func openJournal(t *testing.T, path, server string) *recorder.Reporter {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	r, err := recorder.Open(t.Context(), recorder.Config{Server: server, JournalPath: path, Logger: log})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// writeJournal writes reports of the given tools to a journal through a Reporter.
func writeJournal(t *testing.T, path, server string, steps ...report.Step) {
	t.Helper()
	r := openJournal(t, path, server)
	for _, s := range steps {
		r.Submit(s)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestPrintLogTable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "github.jsonl")
	long := recordertest.SampleStep("search_code", 2)
	long.Args = json.RawMessage(`{"query": "a very long query that goes on and on and on well past sixty characters", "n": 1}`)
	slow := recordertest.SampleStep("create_issue", 3)
	slow.DurationMs, slow.Outcome = 2500, report.OutcomeToolError
	writeJournal(t, path, "github", recordertest.SampleStep("create_issue", 1), long, slow)

	var out bytes.Buffer
	if err := PrintLog(t.Context(), &out, LogOptions{Path: path}); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(rows) != 4 {
		t.Fatalf("want a header and 3 rows:\n%s", out.String())
	}
	for _, col := range []string{"ID", "TIME", "SERVER", "TOOL", "DURATION", "OUTCOME", "REPORT", "ARGS"} {
		if !strings.Contains(rows[0], col) {
			t.Errorf("header lacks %s: %q", col, rows[0])
		}
	}
	wantLocal := recordertest.StepTime.Local().Format("15:04")
	if !strings.Contains(rows[1], wantLocal) || !strings.Contains(rows[1], "github") ||
		!strings.Contains(rows[1], "create_issue") || !strings.Contains(rows[1], "183ms") ||
		!strings.Contains(rows[1], " ok ") || !strings.Contains(rows[1], " journal ") || !strings.Contains(rows[1], `{"i":1,"title":"issue <1>"}`) {
		t.Errorf("row 1: %q", rows[1])
	}
	args := rows[2][strings.Index(rows[2], "{"):]
	if !strings.HasSuffix(args, "…") || utf8.RuneCountInString(args) != argsWidth || strings.Contains(args, `": "`) {
		t.Errorf("long args not compacted and cut to %d: %q", argsWidth, args)
	}
	if !strings.Contains(rows[3], "2.5s") || !strings.Contains(rows[3], "tool_error") {
		t.Errorf("row 3: %q", rows[3])
	}
}

func TestPrintLogJSONFilterLimitAndDir(t *testing.T) {
	dir := t.TempDir()
	gh, lin := filepath.Join(dir, "github.jsonl"), filepath.Join(dir, "linear.jsonl")
	// Interleaved in time across the two files.
	writeJournal(t, gh, "github", recordertest.SampleStep("gh_a", 1), recordertest.SampleStep("gh_b", 3), recordertest.SampleStep("gh_c", 5))
	writeJournal(t, lin, "linear", recordertest.SampleStep("lin_a", 2), recordertest.SampleStep("lin_b", 4))

	var out bytes.Buffer
	if err := PrintLog(t.Context(), &out, LogOptions{Path: gh, JSON: true}); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(gh)
	if out.String() != string(want) {
		t.Errorf("--json printed\n%s\nwant the journal lines\n%s", out.String(), want)
	}

	tools := func(opts LogOptions) []string {
		t.Helper()
		var out bytes.Buffer
		opts.JSON = true
		if err := PrintLog(t.Context(), &out, opts); err != nil {
			t.Fatal(err)
		}
		var got []string
		for line := range strings.Lines(out.String()) {
			got = append(got, gjson.Get(line, "tool").String())
		}
		return got
	}
	check := func(name string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	check("dir, merged by time", tools(LogOptions{Dir: dir}), "gh_a", "lin_a", "gh_b", "lin_b", "gh_c")
	check("dir, limit", tools(LogOptions{Dir: dir, Limit: 2}), "lin_b", "gh_c")
	check("dir, server", tools(LogOptions{Dir: dir, Server: "linear"}), "lin_a", "lin_b")
	check("file, limit", tools(LogOptions{Path: gh, Limit: 1}), "gh_c")

	if err := PrintLog(t.Context(), io.Discard, LogOptions{Path: filepath.Join(dir, "none.jsonl")}); err == nil {
		t.Error("no error for a journal that does not exist")
	}
}

// --follow prints reports as they are appended, until its context ends.
func TestPrintLogFollow(t *testing.T) {
	ctx := testutil.Context(t)
	path := filepath.Join(t.TempDir(), "github.jsonl")
	writeJournal(t, path, "github", recordertest.SampleStep("before", 1))

	followCtx, stop := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- PrintLog(followCtx, pw, LogOptions{Path: path, Follow: true})
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("PrintLog ended early: %v", testutil.Recv(t, done, "PrintLog's error"))
		}
		return lines.Text()
	}
	if h := next(); !strings.HasPrefix(h, "ID ") {
		t.Fatalf("header: %q", h)
	}
	if row := next(); !strings.Contains(row, "before") {
		t.Fatalf("row: %q", row)
	}

	writer := openJournal(t, path, "github")
	writer.Submit(recordertest.SampleStep("after", 2))
	if row := next(); !strings.Contains(row, "after") {
		t.Fatalf("followed row: %q", row)
	}

	stop()
	go io.Copy(io.Discard, pr) // PrintLog may be mid-write when it notices
	if err := testutil.Recv(t, done, "PrintLog --follow to end with its context"); err != nil {
		t.Fatalf("PrintLog: %v", err)
	}
}

// spoolReports submits steps to a Reporter whose recorder is down, so they stay in
// the spool of state as a proxy leaves them.
func spoolReports(t *testing.T, state, server string, steps ...report.Step) string {
	t.Helper()
	ep, err := recorder.Discover(recorder.DiscoverOptions{Flag: "http://127.0.0.1:1", Env: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := recorder.Open(t.Context(), recorder.Config{Endpoint: ep, Server: server, StateDir: state, Logger: log})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	for _, s := range steps {
		r.Submit(s)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	r.Close(ctx) // the recorder is down: the reports stay spooled
	files, _ := filepath.Glob(filepath.Join(recorder.SpoolDir(state), "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("spool files: %v", files)
	}
	return files[0]
}

// TestPrintLogWaiting: reports in the spool show beside the journal's, marked
// waiting and for which recorder; one the recorder acknowledged does not.
func TestPrintLogWaiting(t *testing.T) {
	state := t.TempDir()
	writeJournal(t, journal.Path(state, "github"), "github", recordertest.SampleStep("in_journal", 1))
	spool := spoolReports(t, state, "linear", recordertest.SampleStep("delivered", 2), recordertest.SampleStep("waits_a", 3), recordertest.SampleStep("waits_b", 4))
	f, err := os.OpenFile(spool, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"ack":1}` + "\n")
	f.Close()

	opts := LogOptions{Dir: journal.Dir(state), SpoolDir: recorder.SpoolDir(state),
		Recorder: func() string { return "the recorder at http://127.0.0.1:1" }}
	var out bytes.Buffer
	if err := PrintLog(t.Context(), &out, opts); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(rows) != 5 {
		t.Fatalf("want a header, 3 rows and a footer:\n%s", out.String())
	}
	for i, want := range []string{"in_journal", "waits_a", "waits_b"} {
		where := " waiting "
		if i == 0 {
			where = " journal "
		}
		if !strings.Contains(rows[i+1], want) || !strings.Contains(rows[i+1], where) {
			t.Errorf("row %d: %q, want %s%s", i+1, rows[i+1], want, where)
		}
	}
	if !strings.Contains(rows[4], "2 reports are waiting in the spool ("+recorder.SpoolDir(state)+") for the recorder at http://127.0.0.1:1") {
		t.Errorf("footer: %q", rows[4])
	}

	out.Reset()
	var notes bytes.Buffer
	opts.JSON, opts.Notes = true, &notes
	if err := PrintLog(t.Context(), &out, opts); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || strings.HasPrefix(lines[0], `{"waiting"`) || !strings.HasPrefix(lines[1], `{"waiting":true,"proxyId":`) || !gjson.Valid(lines[2]) {
		t.Errorf("--json:\n%s", out.String())
	}
	if !strings.Contains(notes.String(), "2 reports are waiting") {
		t.Errorf("notes: %q", notes.String())
	}

	// A server with nothing says which servers have reports.
	opts.JSON, opts.Server = false, "nosuch"
	err = PrintLog(t.Context(), io.Discard, opts)
	if !errors.Is(err, ErrNoReports) || !strings.Contains(err.Error(), `for server "nosuch"; servers with reports: github (1), linear (2)`) {
		t.Errorf("--server nosuch: %v", err)
	}
	err = PrintLog(t.Context(), io.Discard, LogOptions{Dir: filepath.Join(state, "none"), SpoolDir: filepath.Join(state, "none2")})
	if !errors.Is(err, ErrNoReports) || !strings.Contains(err.Error(), "no reports yet") {
		t.Errorf("nothing at all: %v", err)
	}
}

func TestPrintLogFilters(t *testing.T) {
	dir := t.TempDir()
	steps := []report.Step{recordertest.SampleStep("create_issue", 1), recordertest.SampleStep("search", 2), recordertest.SampleStep("create_issue", 3), recordertest.SampleStep("search", 4)}
	steps[1].Outcome = report.OutcomeToolError
	steps[2].Outcome = report.OutcomeCancelled
	steps[3].Outcome = report.OutcomeUpstreamLost
	for i := range steps {
		steps[i].ReceivedAt = recordertest.StepTime.Add(time.Duration(i) * time.Hour)
	}
	writeJournal(t, filepath.Join(dir, "github.jsonl"), "github", steps...)
	seqs := func(o LogOptions) string {
		t.Helper()
		o.Dir, o.JSON = dir, true
		var out bytes.Buffer
		if err := PrintLog(t.Context(), &out, o); err != nil && !errors.Is(err, ErrNoReports) {
			t.Fatal(err)
		}
		var got []string
		for line := range strings.Lines(out.String()) {
			got = append(got, gjson.Get(line, "seq").String())
		}
		return strings.Join(got, ",")
	}
	for name, tc := range map[string]struct {
		o    LogOptions
		want string
	}{
		"tool":            {LogOptions{Tool: "create_issue"}, "1,3"},
		"outcome":         {LogOptions{Outcomes: []string{"ok", "cancelled"}}, "1,3"},
		"failed":          {LogOptions{Failed: true}, "2,4"},
		"since":           {LogOptions{Since: recordertest.StepTime.Add(90 * time.Minute)}, "3,4"},
		"tool and failed": {LogOptions{Tool: "search", Failed: true, Limit: 1}, "4"},
		"none":            {LogOptions{Tool: "nope"}, ""},
	} {
		if got := seqs(tc.o); got != tc.want {
			t.Errorf("%s: seqs %q, want %q", name, got, tc.want)
		}
	}
	err := PrintLog(t.Context(), io.Discard, LogOptions{Dir: dir, Tool: "nope"})
	if err == nil || !strings.Contains(err.Error(), "no reports match; servers with reports: github (4)") {
		t.Errorf("no match: %v", err)
	}
}

// TestShow prints one call readably: its facts, arguments indented, text content
// as text (JSON text as JSON), and the error of a failed call.
func TestShow(t *testing.T) {
	state := t.TempDir()
	ok := recordertest.SampleStep("create_issue", 1)
	ok.Result = json.RawMessage(`{"content":[{"type":"text","text":"line one\nline two \u001b[31mred\u001b[0m"},{"type":"text","text":"{\"number\":42}"},{"type":"image","data":"[clipped]","mimeType":"image/png"}],"structuredContent":{"number":42}}`)
	bad := recordertest.SampleStep("create_issue", 2)
	bad.Outcome, bad.Result = report.OutcomeRPCError, nil
	bad.Error = json.RawMessage(`{"code":-32602,"message":"bad title","data":{"field":"title"}}`)
	writeJournal(t, journal.Path(state, "github"), "github", ok, bad)
	spoolReports(t, state, "linear", recordertest.SampleStep("waits", 1))

	show := func(id string) (string, error) {
		var out bytes.Buffer
		err := PrintLog(t.Context(), &out, LogOptions{Dir: journal.Dir(state), SpoolDir: recorder.SpoolDir(state), Show: id,
			Recorder: func() string { return "the test recorder" }})
		return out.String(), err
	}
	var all bytes.Buffer
	PrintLog(t.Context(), &all, LogOptions{Dir: journal.Dir(state), SpoolDir: recorder.SpoolDir(state)})
	// The IDs by what each row holds: the table's order is by time, and two of
	// these share one.
	ids := make([]string, 4)
	for line := range strings.Lines(all.String()) {
		switch {
		case strings.Contains(line, "waits"):
			ids[3] = strings.Fields(line)[0]
		case strings.Contains(line, "rpc_error"):
			ids[2] = strings.Fields(line)[0]
		case strings.Contains(line, "create_issue"):
			ids[1] = strings.Fields(line)[0]
		}
	}
	if slices.Contains(ids[1:], "") {
		t.Fatalf("table:\n%s", all.String())
	}

	out, err := show(ids[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"call " + ids[1] + ", in the journal ",
		"  tool         create_issue\n", "  outcome      ok\n", "  callId       c-1\n", "  duration     183ms\n",
		"arguments:\n  {\n    \"i\": 1,\n    \"title\": \"issue <1>\"\n  }\n",
		"result:\n  text:\n    line one\n    line two \\x1b[31mred\\x1b[0m\n",
		"  text (JSON):\n    {\n      \"number\": 42\n    }\n",
		"  image:\n    {\n",
		"  structuredContent:\n    {\n      \"number\": 42\n    }\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out, _ = show(ids[2])
	if !strings.Contains(out, "error:\n  -32602 bad title\n  data:\n    {\n      \"field\": \"title\"\n    }\n") {
		t.Errorf("show of an error:\n%s", out)
	}
	out, _ = show(ids[3])
	if !strings.Contains(out, ", waiting in the spool ") || !strings.Contains(out, " for the test recorder\n") {
		t.Errorf("show of a waiting report:\n%s", out)
	}
	if _, err := show("1"); err == nil || !strings.Contains(err.Error(), "names 2 calls") {
		t.Errorf("an ambiguous seq: %v", err)
	}
	if _, err := show("zzzzzz:1"); !errors.Is(err, ErrNoReports) {
		t.Errorf("an unknown ID: %v", err)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 3, 10, 15, 30, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"90s":                  now.Add(-90 * time.Second),
		"2h":                   now.Add(-2 * time.Hour),
		"1h30m":                now.Add(-90 * time.Minute),
		"3d":                   now.AddDate(0, 0, -3),
		"1.5d":                 now.Add(-36 * time.Hour),
		"1w":                   now.AddDate(0, 0, -7),
		"2026-03-01":           time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		"2026-03-01 09:15":     time.Date(2026, 3, 1, 9, 15, 0, 0, time.UTC),
		"2026-03-01T09:15:07":  time.Date(2026, 3, 1, 9, 15, 7, 0, time.UTC),
		"2026-03-01T09:15:07Z": time.Date(2026, 3, 1, 9, 15, 7, 0, time.UTC),
		"09:30":                time.Date(2026, 3, 10, 9, 30, 0, 0, time.UTC),
	} {
		got, err := ParseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-2h", "3x", "2026-13-01", "25:00", "d"} {
		if _, err := ParseSince(bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseSince: any input is accepted or refused without a panic, and what is
// accepted as a duration back is never in the future.
func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"2h", "3d", "1.5w", "2026-03-01", "09:30", "2026-03-01T09:15:07Z", "99999999999d"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 10, 15, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSince(s, now)
		if err != nil {
			return
		}
		// A date or time may be ahead; a duration back never is.
		if !strings.ContainsAny(s, "-:T+") && got.After(now) {
			t.Fatalf("%q is %v, after now", s, got)
		}
	})
}

// TestShowTaskAndRounds: --show says a call became a task, with its last status, and
// how many rounds a multi round-trip call took (SPEC §3.5).
func TestShowTaskAndRounds(t *testing.T) {
	state := t.TempDir()
	task := recordertest.SampleStep("deploy", 1)
	task.TaskID, task.TaskStatus, task.Outcome = "t-7", "working", report.OutcomeTaskUnfinished
	rounds := recordertest.SampleStep("confirm", 2)
	rounds.Rounds = 3
	writeJournal(t, journal.Path(state, "github"), "github", task, rounds)
	show := func(id string) string {
		var out bytes.Buffer
		if err := PrintLog(t.Context(), &out, LogOptions{Dir: journal.Dir(state), Show: id}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if out := show("1"); !strings.Contains(out, "  outcome      task_unfinished\n") || !strings.Contains(out, "  task         t-7, last seen working\n") {
		t.Errorf("a task:\n%s", out)
	}
	if out := show("2"); !strings.Contains(out, "  rounds       3 (it asked for input 2 times and the host answered)\n") {
		t.Errorf("rounds:\n%s", out)
	}
}

// A peer's bytes reach the table and --show: valid JSON escapes ESC and BEL, but DEL,
// a C1 CSI (U+009B, a CSI to terminals that take C1) and a bidi override
// (U+202E) passed json.Compact and json.Indent raw, and a tool name's bidi override
// passed printable. They are escaped as verify's output is (internal/termtext).
func TestPrintLogEscapesControls(t *testing.T) {
	state := t.TempDir()
	st := recordertest.SampleStep("evil\u202etxt.exe", 1)
	st.Args = json.RawMessage("{\"q\":\"a\x7fb\u009b31mc\u202ed\"}")
	st.Result = json.RawMessage("{\"content\":[{\"type\":\"text\",\"text\":\"x\\u001b]52;c;eA==\\u0007 \u009b2J\"}],\"structuredContent\":{\"k\":\"\u009b\"}}")
	writeJournal(t, journal.Path(state, "s"), "s", st)
	var table, show bytes.Buffer
	if err := PrintLog(t.Context(), &table, LogOptions{Dir: journal.Dir(state)}); err != nil {
		t.Fatal(err)
	}
	id := strings.Fields(strings.Split(table.String(), "\n")[1])[0]
	if err := PrintLog(t.Context(), &show, LogOptions{Dir: journal.Dir(state), Show: id}); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"table": table.String(), "show": show.String()} {
		if strings.ContainsAny(out, "\x1b\x07\x7f\u009b\u202e") {
			t.Errorf("%s: a control character printed raw:\n%q", name, out)
		}
	}
	for _, want := range []string{`evil\u202etxt.exe`, `a\x7fb\u009b31mc\u202ed`} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %s:\n%s", want, table.String())
		}
	}
	for _, want := range []string{`x\x1b]52;c;eA==\x07 \u009b2J`, `"k": "\u009b"`} {
		if !strings.Contains(show.String(), want) {
			t.Errorf("--show lacks %s:\n%s", want, show.String())
		}
	}
}

// TestShowARunAndWideServerNames: --show with a run's id (or a unique start of it)
// lists that run's calls; the SERVER column is as wide as the longest name, so two
// names that share a start are both shown whole.
func TestShowARunAndWideServerNames(t *testing.T) {
	state := t.TempDir()
	writeJournal(t, journal.Path(state, "everything-old"), "everything-old",
		recordertest.SampleStep("first", 1), recordertest.SampleStep("second", 2))
	writeJournal(t, journal.Path(state, "everything-older"), "everything-older", recordertest.SampleStep("third", 1))
	opts := LogOptions{Dir: journal.Dir(state)}
	var all bytes.Buffer
	if err := PrintLog(t.Context(), &all, opts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(all.String(), " everything-old ") || !strings.Contains(all.String(), " everything-older ") {
		t.Errorf("server names cut:\n%s", all.String())
	}
	var run string
	for line := range strings.Lines(all.String()) {
		if strings.Contains(line, "first") {
			run, _, _ = strings.Cut(strings.Fields(line)[0], ":")
		}
	}
	for _, id := range []string{run, run[:len(run)-2]} {
		var out bytes.Buffer
		opts.Show = id
		if err := PrintLog(t.Context(), &out, opts); err != nil {
			t.Fatalf("--show %s: %v", id, err)
		}
		if !strings.Contains(out.String(), "first") || !strings.Contains(out.String(), "second") || strings.Contains(out.String(), "third") {
			t.Errorf("--show %s lists:\n%s", id, out.String())
		}
	}
	opts.Show = "zz-no-run"
	if err := PrintLog(t.Context(), io.Discard, opts); !errors.Is(err, ErrNoReports) {
		t.Errorf("an unknown run: %v", err)
	}
}

// TestShowTrimmed: --show says a call's result reached the host cut to the result
// budget, and where the whole answer is (docs/budget.md).
func TestShowTrimmed(t *testing.T) {
	state := t.TempDir()
	cut := recordertest.SampleStep("read", 1)
	cut.Trimmed, cut.Spill = true, "/state/bir-proxy/spill/a.json"
	lost := recordertest.SampleStep("read", 2)
	lost.Trimmed = true
	plain := recordertest.SampleStep("read", 3)
	writeJournal(t, journal.Path(state, "github"), "github", cut, lost, plain)
	show := func(id string) string {
		var out bytes.Buffer
		if err := PrintLog(t.Context(), &out, LogOptions{Dir: journal.Dir(state), Show: id}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if out := show("1"); !strings.Contains(out, "  trimmed      the host got this result cut to the result budget (--max-result-tokens); the whole answer is in /state/bir-proxy/spill/a.json\n") {
		t.Errorf("a cut result:\n%s", out)
	}
	if out := show("2"); !strings.Contains(out, "the whole answer could not be kept\n") {
		t.Errorf("a cut result not kept:\n%s", out)
	}
	if out := show("3"); strings.Contains(out, "trimmed") {
		t.Errorf("a whole result:\n%s", out)
	}
}
