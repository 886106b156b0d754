package recorder

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/report"
)

func journalConfig(t testing.TB, path string) Config {
	return Config{Server: "github", JournalPath: path, Logger: testLogger(t)}
}

func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("%s does not end with a newline", path)
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// With no recorder, reports are JSON lines in the journal, one a line, in the shape of
// SPEC §5, and nothing else is done.
func TestJournalLines(t *testing.T) {
	ctx := waitCtx(t)
	path := filepath.Join(t.TempDir(), "j", "github.jsonl")
	committed := newCounter()
	cfg := journalConfig(t, path)
	cfg.tuning.hooks.committed = committed.add
	r := open(t, cfg)
	if r.d != nil {
		t.Fatal("journal mode started delivery")
	}
	for i := 1; i <= 50; i++ {
		s := testStep("create_issue", i)
		if i == 7 {
			s.CallID = nil
			s.Args = json.RawMessage(`{"broken`) // a bug upstream of us must not cost the report
		}
		r.Submit(s)
	}
	// On disk before Close: a SIGKILL now would lose nothing.
	if err := committed.wait(ctx, 50); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if len(lines) != 50 {
		t.Fatalf("%d lines, want 50", len(lines))
	}
	for i, line := range lines {
		if !json.Valid(line) {
			t.Fatalf("line %d is not JSON: %s", i+1, line)
		}
		r := gjson.ParseBytes(line)
		if r.Get("seq").Int() != int64(i+1) || r.Get("proxyId").String() == "" || r.Get("server").String() != "github" {
			t.Errorf("line %d: %s", i+1, line)
		}
		for _, key := range []string{"callId", "dispatchId", "args", "argsFingerprint", "receivedAt", "startedAt", "endedAt", "durationMs", "outcome"} {
			if !r.Get(key).Exists() {
				t.Errorf("line %d has no %s", i+1, key)
			}
		}
		if ts := r.Get("startedAt").String(); !strings.HasSuffix(ts, "Z") {
			t.Errorf("startedAt %q is not UTC", ts)
		}
	}
	if got := gjson.GetBytes(lines[6], "callId").Raw; got != "null" {
		t.Errorf("absent callId written as %s, want null", got)
	}
	if got := gjson.GetBytes(lines[0], "args.title").String(); got != "issue <1>" || !bytes.Contains(lines[0], []byte("<1>")) {
		t.Errorf("args changed on the way: %s", lines[0])
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoGoroutines(t)

	if _, err := exec.LookPath("jq"); err != nil {
		t.Log("jq not installed; skipping the jq check")
		return
	}
	out, err := exec.Command("jq", "-r", `select(.outcome == "ok") | "\(.seq) \(.tool)"`, path).Output()
	if err != nil {
		t.Fatalf("jq: %v", err)
	}
	if got := strings.Count(string(out), " create_issue\n"); got != 50 {
		t.Errorf("jq read %d reports:\n%s", got, out)
	}
}

// Two proxies of one server append to the same journal: their lines interleave whole.
func TestJournalSharedByTwoProxies(t *testing.T) {
	ctx := waitCtx(t)
	path := filepath.Join(t.TempDir(), "github.jsonl")
	const n = 150
	big := strings.Repeat("x", 6000) // several lines per write, writes past a page
	sinks := []*Reporter{open(t, journalConfig(t, path)), open(t, journalConfig(t, path))}
	var wg sync.WaitGroup
	for _, r := range sinks {
		wg.Go(func() {
			for i := 1; i <= n; i++ {
				s := testStep("t", i)
				s.Args = json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, big))
				r.Submit(s)
			}
		})
	}
	wg.Wait()
	for _, r := range sinks {
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	seqs := map[string][]uint64{}
	for i, line := range readLines(t, path) {
		if !json.Valid(line) {
			t.Fatalf("line %d is not whole JSON (%d bytes)", i+1, len(line))
		}
		id := gjson.GetBytes(line, "proxyId").String()
		seqs[id] = append(seqs[id], gjson.GetBytes(line, "seq").Uint())
	}
	for _, r := range sinks {
		assertSeqSet(t, seqs[r.ProxyID()], n)
	}
}

// writeJournal writes reports of the given tools to a journal through a Reporter.
func writeJournal(t *testing.T, path, server string, steps ...report.Step) {
	t.Helper()
	cfg := journalConfig(t, path)
	cfg.Server = server
	r := open(t, cfg)
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
	long := testStep("search_code", 2)
	long.Args = json.RawMessage(`{"query": "a very long query that goes on and on and on well past sixty characters", "n": 1}`)
	slow := testStep("create_issue", 3)
	slow.DurationMs, slow.Outcome = 2500, report.OutcomeToolError
	writeJournal(t, path, "github", testStep("create_issue", 1), long, slow)

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
	wantLocal := baseTime.Local().Format("15:04")
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
	writeJournal(t, gh, "github", testStep("gh_a", 1), testStep("gh_b", 3), testStep("gh_c", 5))
	writeJournal(t, lin, "linear", testStep("lin_a", 2), testStep("lin_b", 4))

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
	ctx := waitCtx(t)
	path := filepath.Join(t.TempDir(), "github.jsonl")
	writeJournal(t, path, "github", testStep("before", 1))

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
			t.Fatalf("PrintLog ended early: %v", <-done)
		}
		return lines.Text()
	}
	if h := next(); !strings.HasPrefix(h, "TIME") {
		t.Fatalf("header: %q", h)
	}
	if row := next(); !strings.Contains(row, "before") {
		t.Fatalf("row: %q", row)
	}

	writer := open(t, journalConfig(t, path))
	writer.Submit(testStep("after", 2))
	if row := next(); !strings.Contains(row, "after") {
		t.Fatalf("followed row: %q", row)
	}

	stop()
	go io.Copy(io.Discard, pr) // PrintLog may be mid-write when it notices
	if err := <-done; err != nil {
		t.Fatalf("PrintLog: %v", err)
	}
}
