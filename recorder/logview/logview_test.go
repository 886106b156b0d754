package logview

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
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
	for _, col := range []string{"TIME", "SERVER", "TOOL", "DURATION", "OUTCOME", "ARGS"} {
		if !strings.Contains(rows[0], col) {
			t.Errorf("header lacks %s: %q", col, rows[0])
		}
	}
	wantLocal := recordertest.StepTime.Local().Format("15:04")
	if !strings.Contains(rows[1], wantLocal) || !strings.Contains(rows[1], "github") ||
		!strings.Contains(rows[1], "create_issue") || !strings.Contains(rows[1], "183ms") ||
		!strings.Contains(rows[1], " ok ") || !strings.Contains(rows[1], `{"i":1,"title":"issue <1>"}`) {
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
	if h := next(); !strings.HasPrefix(h, "TIME") {
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
