package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// The session a host has with the fixture server (testdata/verifyserver): the
// handshake, then one call of each tool (in order; answers may come in any).
var sessionLines = []string{
	`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"test-host","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"ann", "_bir_call_id":"c1"}}}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lookup","arguments":{"key":"k"}}}`,
	`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"divide","arguments":{"a":1,"b":4}}}`,
	`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"legacy","arguments":{}}}`,
	`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"search","arguments":{"query":"q"}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mkdir","arguments":{"path":"/x"}}}`,
	`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"write_note","arguments":{"text":"hi"}}}`,
}

const statelessMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"v2-host","version":"0.0.1"},"io.modelcontextprotocol/clientCapabilities":{}}`

var statelessLines = []string{
	`{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":` + statelessMeta + `}}`,
	`{"method":"tools/list","params":{"_meta":` + statelessMeta + `},"jsonrpc":"2.0","id":1}`,
	`{"method":"tools/call","params":{"name":"greet","arguments":{"name":"héllo"},"_meta":` + statelessMeta + `},"jsonrpc":"2.0","id":2}`,
	`{"method":"tools/call","params":{"name":"divide","arguments":{"a":3,"b":2},"_meta":` + statelessMeta + `},"jsonrpc":"2.0","id":3}`,
}

type verifyWorld struct {
	t      *testing.T
	bp, vs string
	dir    string
}

func newVerifyWorld(t *testing.T) *verifyWorld {
	_, _ = isolate(t)
	return &verifyWorld{t: t, bp: testutil.Build(t, "./cmd/bir-proxy"), vs: testutil.Build(t, "./testdata/verifyserver"), dir: t.TempDir()}
}

// record runs a host session through bir-proxy --cassette in front of the fixture and
// returns the cassette's path. Every request of lines with an id is answered before
// stdin closes.
func (w *verifyWorld) record(name string, lines []string, serverArgs ...string) string {
	w.t.Helper()
	path := filepath.Join(w.dir, "cassettes", name+".jsonl")
	args := append([]string{"--cassette", path, "--", w.vs}, serverArgs...)
	p := testutil.Start(w.t, exec.Command(w.bp, args...))
	p.Send(lines...)
	want := 0
	for _, l := range lines {
		if strings.Contains(l, `"id"`) {
			want++
		}
	}
	for range want {
		p.ReadLine()
	}
	p.Stdin.Close()
	if code := p.ExitCode(); code != 0 {
		w.t.Fatalf("the recording proxy exited %d: %s", code, p.Stderr.String())
	}
	return path
}

// verify runs bir-proxy verify and returns its exit code, stdout and stderr.
func (w *verifyWorld) verify(args ...string) (int, string, string) {
	w.t.Helper()
	p := testutil.Start(w.t, exec.Command(w.bp, append([]string{"verify"}, args...)...))
	p.Stdin.Close()
	out := p.ReadRest()
	return p.ExitCode(), string(out), p.Stderr.String()
}

// statuses reads verify --json's lines: tool → status, and the summary.
func statuses(t *testing.T, out string) (map[string]string, map[string]any) {
	t.Helper()
	st := map[string]string{}
	var sum map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", l, err)
		}
		if s, ok := m["summary"]; ok {
			sum = s.(map[string]any)
			continue
		}
		st[m["tool"].(string)] = m["status"].(string)
	}
	return st, sum
}

func TestVerifyCassetteIsRawAndPrivate(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("cassette %v %v, want mode 0600", st.Mode(), err)
	}
	if st, _ := os.Stat(filepath.Dir(path)); st.Mode().Perm() != 0o700 {
		t.Errorf("folder mode %v, want 0700", st.Mode().Perm())
	}
	f, _ := os.Open(path)
	defer f.Close()
	r, err := cassette.NewReader(f, path)
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header()
	if h.Era != "session" || h.ProtocolVersion != "2025-06-18" || h.Server != "verifyserver" || !strings.HasSuffix(h.Command[0], "verifyserver") ||
		string(h.Initialize) != `{"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"test-host","version":"1"}}` {
		t.Errorf("header %+v", h)
	}
	if !bytes.Contains(h.Tools, []byte(`{"name":"write_note","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}},"annotations":{"readOnlyHint":false,"destructiveHint":true}}`)) {
		t.Errorf("tools %s", h.Tools)
	}
	args := map[string]string{}
	for {
		c, err := r.Next()
		if err != nil {
			break
		}
		args[c.Tool] = string(c.Arguments)
	}
	if len(args) != 7 || args["greet"] != `{"name":"ann"}` || args["divide"] != `{"a":1,"b":4}` {
		t.Errorf("arguments %q (the correlation key removed with its separator, nothing else)", args)
	}
}

func TestVerifySameServerNothingChanged(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	code, out, errs := w.verify(path, "--", w.vs)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"greet", "same", "5 same, 2 skipped", "nothing changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	// lookup answers with the time and a random UUID: ignored by default, not with --strict.
	code, out, _ = w.verify(path, "--strict", "--json", "--tool", "lookup", "--", w.vs)
	if st, _ := statuses(t, out); code != 1 || st["lookup"] != "changed" {
		t.Errorf("--strict: exit %d, %v", code, st)
	}
	code, out, _ = w.verify(path, "--strict", "--json", "--tool", "lookup", "--ignore", "content[0].text.at", "--ignore", "content[*].text.id", "--", w.vs)
	if st, _ := statuses(t, out); code != 0 || st["lookup"] != "same" {
		t.Errorf("--strict --ignore: exit %d, %v", code, st)
	}
}

func TestVerifyFindsExactlyTheDrift(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	want := map[string]string{"greet": "changed", "lookup": "same", "divide": "error_drift", "legacy": "missing_tool",
		"search": "schema_drift", "mkdir": "skipped", "write_note": "skipped"}

	code, out, errs := w.verify(path, "--", w.vs, "--drift")
	if code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, s := range []string{`-      "text": "hello ann"`, `+      "text": "howdy ann"`, "division is broken", `the server no longer lists "legacy"`, "inputSchema changed", "4 findings"} {
		if !strings.Contains(out, s) {
			t.Errorf("the table lacks %q:\n%s", s, out)
		}
	}

	junit := filepath.Join(w.dir, "report.xml")
	code, out, _ = w.verify(path, "--json", "--junit", junit, "--", w.vs, "--drift")
	st, sum := statuses(t, out)
	if code != 1 || !mapsEqual(st, want) || sum["findings"] != 4.0 {
		t.Errorf("--json: exit %d, %v, summary %v", code, st, sum)
	}
	var x struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Skipped  int `xml:"skipped,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	b, err := os.ReadFile(junit)
	if err != nil || xml.Unmarshal(b, &x) != nil || len(x.Suites) != 1 {
		t.Fatalf("junit: %v\n%s", err, b)
	}
	s := x.Suites[0]
	var failed []string
	for _, c := range s.Cases {
		if c.Failure != nil {
			failed = append(failed, strings.Fields(c.Name)[1])
		}
	}
	slices.Sort(failed)
	if s.Tests != 7 || s.Failures != 4 || s.Skipped != 2 || strings.Join(failed, ",") != "divide,greet,legacy,search" {
		t.Errorf("junit: %d tests, %d failures (%v), %d skipped\n%s", s.Tests, s.Failures, failed, s.Skipped, b)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestVerifySafeByDefault(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	notes := filepath.Join(w.dir, "notes.txt")
	log := filepath.Join(w.dir, "server.log")

	code, out, _ := w.verify(path, "--json", "--", w.vs, "--notes", notes)
	if st, _ := statuses(t, out); code != 0 || st["write_note"] != "skipped" || st["mkdir"] != "skipped" {
		t.Errorf("default: exit %d %v", code, st)
	}
	if _, err := os.Stat(notes); err == nil {
		t.Error("write_note ran without --allow-writes")
	}
	code, out, _ = w.verify(path, "--json", "--allow-idempotent", "--", w.vs, "--notes", notes)
	if st, _ := statuses(t, out); code != 0 || st["write_note"] != "skipped" || st["mkdir"] != "same" {
		t.Errorf("--allow-idempotent: exit %d %v", code, st)
	}
	code, out, _ = w.verify(path, "--json", "--allow-writes", "--", w.vs, "--notes", notes)
	if st, _ := statuses(t, out); code != 0 || st["write_note"] != "same" {
		t.Errorf("--allow-writes: exit %d %v", code, st)
	}
	if b, _ := os.ReadFile(notes); string(b) != "hi\n" {
		t.Errorf("notes %q, want the write_note call made once", b)
	}
	code, out, _ = w.verify(path, "--json", "--skip-tool", "greet", "--tool", "greet", "--tool", "divide", "--", w.vs)
	if st, _ := statuses(t, out); code != 0 || st["greet"] != "skipped" || st["divide"] != "same" || st["lookup"] != "skipped" {
		t.Errorf("--tool/--skip-tool: exit %d %v", code, st)
	}

	// --plan asks for the tools and calls none; what tools/list alone shows (a tool
	// gone, a schema changed) is found all the same.
	code, out, _ = w.verify(path, "--plan", "--allow-writes", "--", w.vs, "--log", log, "--drift")
	b, _ := os.ReadFile(log)
	if code != 1 || strings.Contains(string(b), "tools/call") || !strings.Contains(string(b), "tools/list") {
		t.Errorf("--plan: exit %d, the server saw:\n%s", code, b)
	}
	for _, s := range []string{"would_run", "--allow-writes", "missing_tool", "inputSchema changed; would run", "nothing was run"} {
		if !strings.Contains(out, s) {
			t.Errorf("--plan's table lacks %q:\n%s", s, out)
		}
	}
}

func TestVerifyStatelessEra(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("stateless", statelessLines)
	log := filepath.Join(w.dir, "server.log")
	code, out, errs := w.verify(path, "--json", "--", w.vs, "--log", log)
	st, _ := statuses(t, out)
	if code != 0 || st["greet"] != "same" || st["divide"] != "same" {
		t.Fatalf("exit %d %v\n%s", code, st, errs)
	}
	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if strings.Contains(string(b), `"initialize"`) || !strings.Contains(lines[0], `"server/discover"`) {
		t.Errorf("not the stateless era's handshake:\n%s", b)
	}
	calls := 0
	for _, l := range lines {
		if strings.Contains(l, `"tools/`) {
			if !strings.Contains(l, `"_meta":`+statelessMeta) {
				t.Errorf("a request without the recorded _meta: %s", l)
			}
			calls++
		}
	}
	if calls != 3 {
		t.Errorf("%d tools/ requests, want a list and two calls:\n%s", calls, b)
	}
}

func TestVerifySessionEraHandshake(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	log := filepath.Join(w.dir, "server.log")
	if code, out, errs := w.verify(path, "--", w.vs, "--log", log); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// The host's initialize, byte for byte but for the id, then initialized.
	if want := `{"jsonrpc":"2.0","id":"bir:verify:`; !strings.HasPrefix(lines[0], want) ||
		!strings.HasSuffix(lines[0], `,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"test-host","version":"1"}}}`) ||
		lines[1] != `{"jsonrpc":"2.0","method":"notifications/initialized"}` {
		t.Errorf("handshake:\n%s", b)
	}
	// A server now speaking another version: the session cannot be made again.
	code, _, errs := w.verify(path, "--", w.vs, "--version", "2024-11-05")
	if code != 3 || !strings.Contains(errs, `2024-11-05`) {
		t.Errorf("version mismatch: exit %d, %s", code, errs)
	}
}

func TestVerifyServerCrashAndStartFailure(t *testing.T) {
	w := newVerifyWorld(t)
	lines := append(slices.Clone(sessionLines[:3]),
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"a"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"crash","arguments":{}}}`,
	)
	path := w.record("crash", lines)
	// Appending calls after the crash: the recording is in end order, so write them
	// in by hand, as a longer session would have.
	b, _ := os.ReadFile(path)
	b = bytes.Replace(b, []byte(`{"end":true,"calls":2}`+"\n"), nil, 1)
	for i := 3; i <= 5; i++ {
		b = append(b, fmt.Sprintf(`{"seq":%d,"tool":"greet","arguments":{"name":"b"},"outcome":"ok","result":{"content":[{"type":"text","text":"hello b"}]},"startedAt":"2026-01-01T00:00:00Z","durationMs":1}`+"\n", i)...)
	}
	os.WriteFile(path, b, 0o600)
	code, out, _ := w.verify(path, "--json", "--", w.vs, "--crash")
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var notRun int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		json.Unmarshal([]byte(l), &m)
		if m["status"] == "not_run" {
			notRun++
			if r, _ := m["reason"].(string); !strings.Contains(r, "exited with status 3") || !strings.Contains(r, "crashing as asked") {
				t.Errorf("not_run without the server's exit and stderr: %s", l)
			}
		}
	}
	if notRun != 4 {
		t.Errorf("%d calls not run, want the crash and the three after it:\n%s", notRun, out)
	}

	code, _, errs := w.verify(path, "--", w.vs, "--fail-start")
	if code != 3 || !strings.Contains(errs, "cannot open the database") {
		t.Errorf("a server that cannot start: exit %d, %s", code, errs)
	}
	code, _, errs = w.verify(path, "--", filepath.Join(w.dir, "no-such-server"))
	if code != 3 || !strings.Contains(errs, "cannot start") {
		t.Errorf("a command that is not there: exit %d, %s", code, errs)
	}
}

func TestVerifyBadCassetteRunsNothing(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	b, _ := os.ReadFile(path)
	log := filepath.Join(w.dir, "server.log")
	for name, text := range map[string]string{
		"truncated": string(b[:len(b)-40]),
		"foreign":   `{"jsonrpc":"2.0","id":1}` + "\n",
		"version":   `{"bir-cassette":99}` + "\n",
		"bad line":  strings.Replace(string(b), `{"seq":3,`, `{"seq":3,,`, 1),
	} {
		p := filepath.Join(w.dir, name+".jsonl")
		os.WriteFile(p, []byte(text), 0o600)
		code, out, errs := w.verify(p, "--", w.vs, "--log", log)
		if code != 2 || !strings.Contains(errs, "line ") || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %s", name, code, out, errs)
		}
		if _, err := os.Stat(log); err == nil {
			t.Errorf("%s: the server was started", name)
		}
	}
	for _, args := range [][]string{{}, {path}, {path, "--concurrency", "0", w.vs}, {path, "--max-slowdown", "fast", w.vs}, {path, "--url", "http://x", w.vs}} {
		if code, _, _ := w.verify(args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

func TestVerifyConcurrencyKeepsOrderAndUpdateAccepts(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	_, one, _ := w.verify(path, "--json", "--allow-writes", "--", w.vs, "--drift")
	_, four, _ := w.verify(path, "--json", "--allow-writes", "--concurrency", "4", "--", w.vs, "--drift")
	strip := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["seq"] != nil {
				out = append(out, fmt.Sprint(m["seq"], m["tool"], m["status"]))
			}
		}
		return out
	}
	if !slices.Equal(strip(one), strip(four)) || len(strip(one)) != 7 {
		t.Errorf("--concurrency 4 changed the results or their order:\n%v\n%v", strip(one), strip(four))
	}
	// --update accepts the new answers: greet's changed text is then the same.
	if code, out, errs := w.verify(path, "--update", "--tool", "greet", "--", w.vs, "--drift"); code != 1 || !strings.Contains(out, "updated") {
		t.Fatalf("--update: exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(cassette.Rotated(path, 1)); err != nil {
		t.Errorf("the old cassette was not kept: %v", err)
	}
	code, out, _ := w.verify(path, "--json", "--", w.vs, "--drift")
	st, _ := statuses(t, out)
	if code != 1 || st["greet"] != "same" || st["divide"] != "error_drift" || st["search"] != "same" {
		t.Errorf("after --update: exit %d %v (greet accepted; search's schema taken from the server)", code, st)
	}
}

func TestVerifyFromJournal(t *testing.T) {
	w := newVerifyWorld(t)
	lines := append(slices.Clone(sessionLines[:3]),
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"ann"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"greet","arguments":{"name":"bob","password":"hunter2"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"divide","arguments":{"a":1,"b":8}}}`,
	)
	// Recorded only as the journal records it (no --cassette): XDG_STATE_HOME is the
	// test's (isolate).
	p := testutil.Start(t, exec.Command(w.bp, "--server", "fx", "--", w.vs))
	p.Send(lines...)
	for range 5 {
		p.ReadLine()
	}
	p.Stdin.Close()
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("proxy exit %d", code)
	}
	log := filepath.Join(w.dir, "server.log")
	// The journal keeps no tools/list: nothing says a tool is read-only.
	code, out, errs := w.verify("--from-journal", "--server", "fx", "--since", "1h", "--json", "--", w.vs, "--log", log)
	if st, _ := statuses(t, out); code != 4 || st["divide"] != "skipped" || !strings.Contains(errs, "the recording has no tools/list") {
		t.Errorf("without --allow-writes: exit %d %v\n%s", code, st, errs)
	}
	if b, _ := os.ReadFile(log); bytes.Contains(b, []byte(`"tools/call"`)) {
		t.Errorf("a call ran without --allow-writes:\n%s", b)
	}
	os.Remove(log)
	code, out, errs = w.verify("--from-journal", "--server", "fx", "--since", "1h", "--json", "--allow-writes", "--", w.vs, "--log", log)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	var rows []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		json.Unmarshal([]byte(l), &m)
		if m["seq"] != nil {
			rows = append(rows, m)
		}
	}
	got := map[string]string{}
	for _, m := range rows {
		got[fmt.Sprint(m["tool"], " ", m["status"])] = fmt.Sprint(m["reason"])
	}
	if len(rows) != 3 || got["divide same"] == "" || got["greet same"] == "" ||
		!strings.Contains(got["greet not_replayable"], "$.password") {
		t.Errorf("rows %v", got)
	}
	b, _ := os.ReadFile(log)
	if strings.Contains(string(b), "bob") || strings.Count(string(b), `"tools/call"`) != 2 {
		t.Errorf("the server saw:\n%s", b)
	}
	// Another server's journal, or none: said, exit 2.
	if code, _, errs := w.verify("--from-journal", "--server", "nobody", "--", w.vs); code != 2 || !strings.Contains(errs, "no journal") {
		t.Errorf("no journal: exit %d %s", code, errs)
	}
}

func TestVerifyMaxSlowdownAndRedactedCassette(t *testing.T) {
	w := newVerifyWorld(t)
	lines := append(slices.Clone(sessionLines[:3]),
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"greet","arguments":{"name":"ann","api_key":"sk-live-1234567890abcdef"}}}`,
	)
	path := w.record("s", lines)
	// Recorded as a 1 ms call, replayed as a 60 ms one: past 3x (and 10 ms more).
	b, _ := os.ReadFile(path)
	b = bytes.Replace(b, []byte(`"arguments":{"ms":1}`), []byte(`"arguments":{"ms":60}`), 1)
	b = regexp.MustCompile(`("tool":"slow".*"durationMs":)[0-9.]+`).ReplaceAll(b, []byte("${1}1"))
	os.WriteFile(path, b, 0o600)
	code, out, _ := w.verify(path, "--json", "--tool", "slow", "--", w.vs)
	if st, _ := statuses(t, out); code != 0 || st["slow"] != "same" {
		t.Errorf("without --max-slowdown: exit %d %v", code, st)
	}
	code, out, _ = w.verify(path, "--json", "--tool", "slow", "--max-slowdown", "3x", "--", w.vs)
	if st, _ := statuses(t, out); code != 1 || st["slow"] != "slower" || !strings.Contains(out, "past --max-slowdown 3x") {
		t.Errorf("--max-slowdown 3x: exit %d %v\n%s", code, st, out)
	}

	// --cassette-redact: the secret is not in the file, and the call is not replayed.
	rpath := filepath.Join(w.dir, "redacted.jsonl")
	p := testutil.Start(t, exec.Command(w.bp, "--cassette", rpath, "--cassette-redact", "--", w.vs, "--log", filepath.Join(w.dir, "rec.log")))
	p.Send(lines...)
	for range 4 {
		p.ReadLine()
	}
	p.Stdin.Close()
	p.ExitCode()
	rb, _ := os.ReadFile(rpath)
	if bytes.Contains(rb, []byte("sk-live-1234567890abcdef")) || !bytes.Contains(rb, []byte(`"redactedKeys":["$.api_key"]`)) {
		t.Errorf("redacted cassette:\n%s", rb)
	}
	code, out, _ = w.verify(rpath, "--json", "--", w.vs)
	if st, _ := statuses(t, out); code != 0 || st["greet"] != "not_replayable" || st["slow"] != "same" || !strings.Contains(out, "$.api_key") {
		t.Errorf("verify of a redacted cassette: exit %d %v\n%s", code, st, out)
	}
}

// A run that verified nothing is not a pass: no call in the cassette, or every call
// skipped (a server that annotates no tool readOnlyHint, most of 2025's), exits 4 and
// says why; --allow-empty exits 0 on it, as before.
func TestVerifyNothingVerifiedIsNotAPass(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)

	// Only the calls of tools that are not read-only: all skipped.
	code, out, errs := w.verify(path, "--tool", "mkdir", "--tool", "write_note", "--", w.vs)
	if code != 4 || strings.Contains(out, "nothing changed") || !strings.Contains(out, "nothing verified") ||
		!strings.Contains(errs, "nothing was verified: ") || !strings.Contains(errs, "2 skipped: not annotated readOnlyHint: true in both the recorded and the current tools/list; --allow-idempotent or --allow-writes runs them") ||
		!strings.Contains(errs, "5 skipped: not selected (--tool, --skip-tool)") || !strings.Contains(errs, "--allow-empty") {
		t.Errorf("all skipped: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = w.verify(path, "--json", "--tool", "mkdir", "--tool", "write_note", "--allow-empty", "--", w.vs)
	if _, sum := statuses(t, out); code != 0 || sum["verified"] != 0.0 {
		t.Errorf("--allow-empty: exit %d, summary %v\n%s", code, sum, errs)
	}
	// --plan in which nothing would run.
	if code, out, errs := w.verify(path, "--plan", "--tool", "write_note", "--", w.vs); code != 4 || !strings.Contains(errs, "nothing was verified") {
		t.Errorf("--plan, nothing would run: exit %d\n%s\n%s", code, out, errs)
	}
	// Findings still exit 1.
	if code, _, _ := w.verify(path, "--tool", "legacy", "--", w.vs, "--drift"); code != 1 {
		t.Errorf("a missing tool only: exit %d, want 1", code)
	}

	// A cassette of no call: a header alone (an older bir-proxy's; a run without a
	// call now writes no file at all, docs/cassette.md).
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(w.dir, "empty.jsonl")
	if err := os.WriteFile(empty, data[:bytes.IndexByte(data, '\n')+1], 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = w.verify(empty, "--", w.vs)
	if code != 4 || !strings.Contains(errs, "nothing was verified: the recording holds no call") {
		t.Errorf("no call: exit %d\n%s\n%s", code, out, errs)
	}
	if code, _, _ := w.verify(empty, "--allow-empty", "--", w.vs); code != 0 {
		t.Errorf("no call, --allow-empty: exit %d", code)
	}
	// The code is in --help.
	if _, out, _ := w.verify("--help"); !strings.Contains(out, "4 nothing was verified") || !strings.Contains(out, "--allow-empty") {
		t.Errorf("--help lacks exit 4 or --allow-empty:\n%s", out)
	}
}

// A recording without a tools/list (a host that never asked for it; the journal) says
// nothing of what is read-only: the current server's readOnlyHint alone, a lying
// server's, ran its calls. "Recorded and current": such a call is skipped unless
// --allow-writes, and the server never sees it.
func TestVerifyNoRecordedToolsTrustsNoServer(t *testing.T) {
	w := newVerifyWorld(t)
	lines := []string{sessionLines[0], sessionLines[1],
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"ann"}}}`}
	path := w.record("notools", lines)
	if b, _ := os.ReadFile(path); bytes.Contains(bytes.SplitN(b, []byte("\n"), 2)[0], []byte(`"tools":[`)) {
		t.Fatalf("the header has tools:\n%s", b)
	}
	log := filepath.Join(w.dir, "server.log")
	code, out, errs := w.verify(path, "--json", "--", w.vs, "--log", log)
	st, _ := statuses(t, out)
	b, _ := os.ReadFile(log)
	if st["greet"] != "skipped" || bytes.Contains(b, []byte(`"tools/call"`)) {
		t.Errorf("the server's readOnlyHint alone ran the call: exit %d %v, the server saw:\n%s", code, st, b)
	}
	if code != 4 || !strings.Contains(out, "the recording does not list it") || !strings.Contains(errs, "the recording has no tools/list") {
		t.Errorf("exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = w.verify(path, "--json", "--allow-writes", "--", w.vs)
	if st, _ := statuses(t, out); code != 0 || st["greet"] != "same" {
		t.Errorf("--allow-writes: exit %d %v", code, st)
	}
}

// A server's bytes reach verify's table (a tool name, a reason quoting its text or its
// stderr, a diff of its answer), its stderr (the server's own lines, at debug) and the
// JUnit report: ESC, BEL, OSC 52 (a clipboard write), DEL and a C1 CSI went to the
// terminal as they were. They are printed escaped (\x1b, \u009b).
func TestVerifyEscapesWhatAServerPrints(t *testing.T) {
	w := newVerifyWorld(t)
	lines := append(slices.Clone(sessionLines[:3]),
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"ann"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"divide","arguments":{"a":1,"b":4}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"crash","arguments":{}}}`,
	)
	path := w.record("escapes", lines)
	b, _ := os.ReadFile(path)
	b = bytes.Replace(b, []byte(`{"end":true,"calls":3}`+"\n"), nil, 1)
	b = append(b, `{"seq":4,"tool":"evil\u001b]52;c;eA==\u0007","arguments":{},"outcome":"ok","result":{"content":[]},"startedAt":"2026-01-01T00:00:00Z","durationMs":1}`+"\n"...)
	os.WriteFile(path, b, 0o600)
	junit := filepath.Join(w.dir, "report.xml")
	code, out, errs := w.verify(path, "--junit", junit, "--log-level", "debug", "--", w.vs, "--escapes", "--drift", "--crash")
	if code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	report, err := os.ReadFile(junit)
	if err != nil || xml.Unmarshal(report, new(struct{})) != nil {
		t.Fatalf("junit: %v\n%s", err, report)
	}
	raw := func(s string) bool { return strings.ContainsAny(s, "\x1b\x07\x7f\u009b") }
	if raw(out) || raw(errs) || raw(string(report)) {
		t.Errorf("a control character printed raw:\nstdout %q\nstderr %q\njunit %q", out, errs, report)
	}
	for what, s := range map[string]string{
		"the diff":                `\x1b]52;c;cHduZWQ=\x07\x1b[2J\x7f\u009b31m`,
		"the error drift reason":  `division is broken \x1b]52;c;cHduZWQ=\x07`,
		"the crash's stderr line": `verifyserver: crashing \x1b]52;c;cHduZWQ=\x07`,
		"the tool name":           `evil\x1b]52;c;eA==\x07`,
	} {
		if !strings.Contains(out, s) {
			t.Errorf("the table lacks %s, escaped (%s):\n%s", what, s, out)
		}
	}
	if !strings.Contains(errs, `verifyserver: starting \x1b]52;c;cHduZWQ=\x07`) {
		t.Errorf("the server's stderr, at debug, not escaped:\n%q", errs)
	}
	if !strings.Contains(string(report), `division is broken \x1b]52;c;cHduZWQ=\x07`) {
		t.Errorf("junit:\n%s", report)
	}
}

// recordTasks records, through bir-proxy --cassette in front of the raw fixture, a
// host calling the fixture's task tools (testdata/rawserver/tasks.go) one at a time
// and following each task to its end as a host does (tasks/get until terminal;
// 2025-11-25: then tasks/result), but the last (task_forever), which it stops
// following: it is recorded task_unfinished.
func (w *verifyWorld) recordTasks(raw string) string {
	w.t.Helper()
	path := filepath.Join(w.dir, "cassettes", "tasks.jsonl")
	p := testutil.Start(w.t, exec.Command(w.bp, "--cassette", path, "--", raw, "--reply"))
	id := 0
	ask := func(method, params string) string {
		id++
		p.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
		return p.ReadLine()
	}
	ask("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test-host","version":"1"}}`)
	p.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	ask("tools/list", `{}`)
	for _, c := range []struct{ tool, args string }{
		{"task", `{"n":1}`}, {"task_legacy", `{"n":2}`}, {"task", `{"n":3,"end":"error"}`},
		{"task", `{"n":4,"end":"failed"}`}, {"task_legacy", `{"n":5,"end":"failed"}`}, {"task_forever", `{"n":6}`},
	} {
		var h struct {
			Result struct {
				TaskID string `json:"taskId"`
				Task   struct {
					TaskID string `json:"taskId"`
				} `json:"task"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(ask("tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, c.tool, c.args))), &h); err != nil {
			w.t.Fatal(err)
		}
		task := fmt.Sprintf(`{"taskId":%q}`, h.Result.TaskID+h.Result.Task.TaskID)
		for n := 0; ; n++ {
			got := ask("tasks/get", task)
			if !strings.Contains(got, `"status":"working"`) || c.tool == "task_forever" {
				if strings.Contains(got, `"status":"completed"`) && c.tool == "task_legacy" {
					ask("tasks/result", task)
				}
				break
			}
			if n > 5 {
				w.t.Fatalf("the task never ends: %s", got)
			}
		}
	}
	p.Stdin.Close()
	if code := p.ExitCode(); code != 0 {
		w.t.Fatalf("the recording proxy exited %d: %s", code, p.Stderr.String())
	}
	return path
}

// bySeq reads verify --json's lines: seq → the line.
func bySeq(t *testing.T, out string) map[int]map[string]any {
	t.Helper()
	m := map[int]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", l, err)
		}
		if s, ok := v["seq"].(float64); ok {
			m[int(s)] = v
		}
	}
	return m
}

// TestVerifyFollowsTasks: a call the server answered with a task handle is recorded
// with the task's final result; verify follows the task itself (tasks/get at its
// interval; 2025-11-25: tasks/result) and compares that final result: both eras,
// completed, isError and failed tasks are same; a changed final result is a finding;
// a task past --timeout is cancelled (tasks/cancel) and not_run; a task_unfinished
// recording is not replayable.
func TestVerifyFollowsTasks(t *testing.T) {
	w := newVerifyWorld(t)
	raw := testutil.Build(t, "./testdata/rawserver")
	path := w.recordTasks(raw)
	want := map[int]string{1: "same", 2: "same", 3: "same", 4: "same", 5: "same", 6: "not_replayable"}
	check := func(out string, want map[int]string) map[int]map[string]any {
		t.Helper()
		got := bySeq(t, out)
		for seq, st := range want {
			if got[seq]["status"] != st {
				t.Errorf("call %d: %v (%v), want %s\n%s", seq, got[seq]["status"], got[seq]["reason"], st, out)
			}
		}
		return got
	}
	code, out, errOut := w.verify(path, "--allow-writes", "--json", "--", raw, "--reply")
	if code != 0 {
		t.Errorf("exit %d, want 0: %s", code, errOut)
	}
	got := check(out, want)
	if r, _ := got[6]["reason"].(string); !strings.Contains(r, "task_unfinished") {
		t.Errorf("the unfinished task's reason %q does not say why", r)
	}

	// A changed final result: the recorded text of call 1 is not what the task ends with.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(w.dir, "changed.jsonl")
	if !bytes.Contains(data, []byte(`\"n\":1}`)) {
		t.Fatalf("call 1's result is not in the cassette:\n%s", data)
	}
	os.WriteFile(changed, bytes.Replace(data, []byte(`\"n\":1}`), []byte(`\"n\":7}`), 1), 0o600)
	code, out, _ = w.verify(changed, "--allow-writes", "--json", "--", raw, "--reply")
	if code != 1 {
		t.Errorf("a changed final result: exit %d, want 1", code)
	}
	got = check(out, map[int]string{1: "changed", 2: "same"})
	if d, _ := got[1]["diff"].(string); !strings.Contains(d, `"n": 7`) || !strings.Contains(d, `"n": 1`) {
		t.Errorf("the diff does not show the final results:\n%s", d)
	}

	// A task that never ends, within --timeout: cancelled, not_run.
	forever := filepath.Join(w.dir, "forever.jsonl")
	os.WriteFile(forever, bytes.Replace(data, []byte(`"tool":"task_legacy"`), []byte(`"tool":"task_legacy_forever"`), 1), 0o600)
	record := filepath.Join(w.dir, "server-record")
	code, out, _ = w.verify(forever, "--allow-writes", "--json", "--timeout", "1s", "--tool", "task_legacy_forever", "--", raw, "--reply", "--record", record)
	if code != 1 {
		t.Errorf("a task past --timeout: exit %d, want 1", code)
	}
	got = check(out, map[int]string{2: "not_run"})
	if r, _ := got[2]["reason"].(string); !strings.Contains(r, "did not end within 1s") || !strings.Contains(r, "tasks/cancel was sent") {
		t.Errorf("reason %q", r)
	}
	seen, _ := os.ReadFile(record)
	if polls := strings.Count(string(seen), `"method":"tasks/get"`); polls < 3 || polls > 12 {
		// 100 ms apart at the fixture's pollInterval, for 1 s.
		t.Errorf("%d tasks/get in 1s, want the task's interval kept", polls)
	}
	if !strings.Contains(string(seen), `"method":"tasks/cancel"`) {
		t.Errorf("no tasks/cancel reached the server:\n%s", seen)
	}
}

// TestVerifyDefinitionDrift: a tool's definition is compared as pins compare it, not
// only its schemas: a new description or title is a finding (definition_drift) next to
// the call's own status — "description changed (definition_drift); the result
// changed" — in the table, --json (definitionDrift) and JUnit; an annotation's
// explicit default or a _meta is no change; a schema change stays schema_drift's.
func TestVerifyDefinitionDrift(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)

	junit := filepath.Join(w.dir, "report.xml")
	code, out, errs := w.verify(path, "--json", "--junit", junit, "--", w.vs, "--redescribe")
	if code != 1 {
		t.Fatalf("definitions changed, answers the same: exit %d, want 1\n%s\n%s", code, out, errs)
	}
	type line struct {
		Tool   string   `json:"tool"`
		Status string   `json:"status"`
		Reason string   `json:"reason"`
		Def    []string `json:"definitionDrift"`
		Diff   string   `json:"diff"`
	}
	read := func(out string) (map[string]line, map[string]any) {
		got := map[string]line{}
		var sum map[string]any
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var v line
			var s struct{ Summary map[string]any }
			if json.Unmarshal([]byte(l), &s); s.Summary != nil {
				sum = s.Summary
				continue
			}
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatal(err)
			}
			got[v.Tool] = v
		}
		return got, sum
	}
	got, sum := read(out)
	for tool, want := range map[string]string{"greet": "same description", "lookup": "same ", "divide": "same title", "legacy": "same ", "search": "same description"} {
		if g := got[tool].Status + " " + strings.Join(got[tool].Def, ","); g != want {
			t.Errorf("%s: %q (%s), want %q", tool, g, got[tool].Reason, want)
		}
	}
	if r := got["greet"].Reason; r != "description changed (definition_drift)" || !strings.Contains(got["greet"].Diff, "+++ current description") || !strings.Contains(got["greet"].Diff, "id_rsa") {
		t.Errorf("greet: reason %q, diff\n%s", r, got["greet"].Diff)
	}
	if sum["findings"] != 3.0 || sum["counts"].(map[string]any)["definition_drift"] != 3.0 {
		t.Errorf("summary %v", sum)
	}
	b, _ := os.ReadFile(junit)
	if n := strings.Count(string(b), `<failure type="definition_drift"`); n != 3 {
		t.Errorf("%d definition_drift failures in the JUnit report, want 3:\n%s", n, b)
	}

	// --plan: a call that would run, of a drifted tool, is a failure, not skipped.
	code, _, _ = w.verify(path, "--plan", "--junit", junit, "--", w.vs, "--redescribe")
	b, _ = os.ReadFile(junit)
	if code != 1 || !strings.Contains(string(b), `failures="3" skipped="4"`) {
		t.Errorf("--plan: exit %d, want 1; JUnit:\n%s", code, b)
	}

	// With the answers drifting too: both said, on one row.
	code, out, _ = w.verify(path, "--json", "--", w.vs, "--drift", "--redescribe")
	got, _ = read(out)
	if code != 1 || got["greet"].Status != "changed" || got["greet"].Reason != "description changed (definition_drift); the result changed" {
		t.Errorf("exit %d, greet %+v", code, got["greet"])
	}
	if s := got["search"]; s.Status != "schema_drift" || strings.Join(s.Def, ",") != "description" || !strings.HasPrefix(s.Reason, "description changed (definition_drift); inputSchema changed") {
		t.Errorf("search %+v: the schema is schema_drift's, the description definition_drift's", s)
	}
	code, table, _ := w.verify(path, "--", w.vs, "--drift", "--redescribe")
	if code != 1 || !regexp.MustCompile(`greet +changed .*description changed \(definition_drift\); the result changed`).MatchString(table) {
		t.Errorf("the table does not show both on greet's row (exit %d):\n%s", code, table)
	}
}

// TestVerifyOutputReads: what a new user reads. A text of several lines is diffed a
// line of it to a line (it was one escaped line, "a\nb\n…", removed and added whole);
// a tool gone and one come are said in one line, with a "did you mean" when their
// names are close (a rename showed only as missing_tool); counts read in the singular
// for one ("1 findings", "1 recorded calls"), and no call leaves no stray "  —".
func TestVerifyOutputReads(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", append(slices.Clone(sessionLines),
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"readme","arguments":{}}}`))

	code, out, errs := w.verify(path, "--tool", "readme", "--tool", "legacy", "--", w.vs, "--drift")
	if code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		"              \"text\": \"\"\"\n                # verifyserver\n       -        The second line.\n       +        The 2nd line.\n                The third line.\n",
		`the server no longer lists "legacy" (did you mean "legacy_v2"?)`,
		"\ntools since the recording: 1 removed: legacy (did you mean legacy_v2?); 1 added: legacy_v2\n",
		"8 calls: 1 changed, 1 missing_tool, 6 skipped — 2 findings",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `\n`) || strings.Contains(out, `\x0a`) {
		t.Errorf("a line break shown escaped:\n%s", out)
	}
	code, out, _ = w.verify(path, "--json", "--tool", "legacy", "--", w.vs, "--drift")
	if _, sum := statuses(t, out); code != 1 || fmt.Sprint(sum["toolsRemoved"], sum["toolsAdded"]) != "[legacy] [legacy_v2]" {
		t.Errorf("--json: exit %d, summary %v", code, sum)
	}
	code, out, _ = w.verify(path, "--tool", "legacy", "--", w.vs, "--drift")
	if code != 1 || !strings.Contains(out, "— 1 finding (") {
		t.Errorf("exit %d, want \"1 finding\":\n%s", code, out)
	}

	// One call; none.
	one := w.record("one", []string{sessionLines[0], sessionLines[1], sessionLines[2], sessionLines[3]})
	if code, out, errs := w.verify(one, "--", w.vs); code != 0 || !strings.Contains(out, "verifying 1 recorded call of ") || !strings.Contains(out, "\n1 call: 1 same — nothing changed (") {
		t.Errorf("one call: exit %d\n%s\n%s", code, out, errs)
	}
	data, err := os.ReadFile(one)
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(w.dir, "empty.jsonl")
	if err := os.WriteFile(empty, data[:bytes.IndexByte(data, '\n')+1], 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = w.verify(empty, "--", w.vs)
	if code != 4 || !strings.Contains(out, "\n0 calls — nothing verified (") || strings.Contains(out, "TOOL") {
		t.Errorf("no call: exit %d\n%s", code, out)
	}
}

// TestVerifySeveralCassettes: `verify a.jsonl DIR -- COMMAND` verifies each cassette on
// a server of its own (a start each), prints each one's table, then a total; the exit
// status is the worst of theirs; a folder's hidden and other files are skipped, said in
// one line; --json adds the cassette to each line and a total line; --junit holds a
// suite per cassette.
func TestVerifySeveralCassettes(t *testing.T) {
	w := newVerifyWorld(t)
	a := w.record("a", sessionLines)
	b := w.record("b", []string{sessionLines[0], sessionLines[1], sessionLines[2], sessionLines[3]})
	dir := filepath.Dir(a)
	data, _ := os.ReadFile(a)
	for name, text := range map[string]string{".hidden.jsonl": string(data), "notes.txt": "hi\n", "a.jsonl.1": string(data), "other.jsonl": `{"x":1}` + "\n"} {
		os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600)
	}
	log := filepath.Join(w.dir, "server.log")
	code, out, errs := w.verify(dir, "--", w.vs, "--log", log)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	seen, _ := os.ReadFile(log)
	if n := strings.Count(string(seen), `"method":"initialize"`); n != 2 {
		t.Errorf("%d servers started (initialize), want one per cassette", n)
	}
	for _, want := range []string{"== " + a + " ==\nverifying 7 recorded calls", "== " + b + " ==\nverifying 1 recorded call", "\n== total ==\n" + a + ": 7 calls — nothing changed (exit 0)\n" + b + ": 1 call — nothing changed (exit 0)\n2 cassettes, 8 calls, 0 findings: 2 passed — exit 0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if want := "skipped 4 files: " + filepath.Join(dir, ".hidden.jsonl") + " (hidden), " + filepath.Join(dir, "a.jsonl.1") + " (not *.jsonl)"; !strings.Contains(errs, want) ||
		!strings.Contains(errs, "other.jsonl (not a cassette)") || strings.Count(errs, "skipped") != 1 {
		t.Errorf("stderr lacks %q:\n%s", want, errs)
	}

	// The worst exit: findings (1) in both, then a cassette that cannot be read (2).
	bad := filepath.Join(w.dir, "bad.jsonl")
	os.WriteFile(bad, data[:len(data)-10], 0o600)
	junit := filepath.Join(w.dir, "report.xml")
	code, out, errs = w.verify(a, b, "--junit", junit, "--", w.vs, "--drift")
	if code != 1 || !strings.Contains(out, "2 cassettes, 8 calls, 5 findings: 2 with findings — exit 1") {
		t.Errorf("findings: exit %d\n%s\n%s", code, out, errs)
	}
	var x struct {
		Suites []struct {
			Tests int `xml:"tests,attr"`
		} `xml:"testsuite"`
	}
	if r, err := os.ReadFile(junit); err != nil || xml.Unmarshal(r, &x) != nil || len(x.Suites) != 2 || x.Suites[0].Tests != 7 || x.Suites[1].Tests != 1 {
		t.Errorf("junit: %v %+v\n%s", err, x, r)
	}
	code, out, errs = w.verify("--json", a, bad, b, "--", w.vs, "--drift")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var total struct {
		Total struct {
			Cassettes, Exit int
			Results         []struct {
				Cassette string
				Exit     int
			}
		}
	}
	if code != 2 || json.Unmarshal([]byte(lines[len(lines)-1]), &total) != nil || total.Total.Cassettes != 3 || total.Total.Exit != 2 ||
		total.Total.Results[1].Cassette != bad || total.Total.Results[1].Exit != 2 || !strings.Contains(errs, bad+": cassette ") {
		t.Errorf("an unreadable one among them: exit %d, %+v\n%s\n%s", code, total, out, errs)
	}
	if !strings.HasPrefix(lines[0], `{"cassette":"`+a+`","seq":1,`) {
		t.Errorf("a call's line does not name its cassette: %s", lines[0])
	}
}

// TestVerifyFolderWithAFIFO: a FIFO named x.jsonl in a folder given to verify
// blocked it for ever in open(2), looking for a cassette's first bytes (SIGTERM did
// not end it). It is skipped as not a cassette, at once.
func TestVerifyFolderWithAFIFO(t *testing.T) {
	t.Parallel()
	bin := testutil.Build(t, "./cmd/bir-proxy")
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "x.jsonl"), 0o600); err != nil {
		t.Fatal("mkfifo:", err) // a temporary folder on a Unix takes a FIFO: a skip here would assert nothing
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "verify", dir, "--", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "BIR_RECORDER_URL=")
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("verify of a folder with a FIFO did not end within 20s; output %q", out)
	}
	if !strings.Contains(string(out), "x.jsonl (not a cassette)") {
		t.Errorf("verify of a folder with a FIFO: %q; want it skipped as not a cassette", out)
	}
}

// TestVerifyNamedFIFO: a FIFO named as the cassette (not in a folder) blocked verify
// for ever in open(2), waiting for a writer, and SIGTERM did not end it; several
// cassettes named, the run stopped at it. It is opened without waiting: with no
// writer it is empty, said so (exit 2), and the next cassette runs.
func TestVerifyNamedFIFO(t *testing.T) {
	t.Parallel()
	bin := testutil.Build(t, "./cmd/bir-proxy")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "x.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal("mkfifo:", err) // a temporary folder on a Unix takes a FIFO: a skip here would assert nothing
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "verify", fifo, fifo+".missing", "--", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "BIR_RECORDER_URL=")
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("verify of a FIFO did not end within 20s; output %q", out)
	}
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "x.jsonl, line 0: empty") ||
		!strings.Contains(string(out), "x.jsonl.missing: could not be read") {
		t.Errorf("exit %d; output %q", code, out)
	}
}

// bigCassette is the cassette at path with its calls repeated, seq renumbered, until
// it is past 256 KiB: more than a pipe holds, so a writer into one finishes only once
// verify has read it. It returns the bytes and the number of calls.
func bigCassette(t *testing.T, path string) ([]byte, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var calls []map[string]json.RawMessage
	for _, l := range lines[1:] {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if m["seq"] != nil {
			calls = append(calls, m)
		}
	}
	out := []byte(lines[0] + "\n")
	n := 0
	for len(out) < 256<<10 {
		for _, c := range calls {
			n++
			c["seq"] = json.RawMessage(fmt.Sprint(n))
			l, _ := json.Marshal(c)
			out = append(append(out, l...), '\n')
		}
	}
	return append(out, fmt.Sprintf(`{"end":true,"calls":%d}`+"\n", n)...), n
}

// verifyFed runs bir-proxy verify --json with the cassette fed by feed (started once
// verify has) and returns its exit code, stdout and stderr.
func (w *verifyWorld) verifyFed(cmd *exec.Cmd, feed func()) (int, string, string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.t.Context(), 60*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	defer stop()
	feed()
	cmd.Wait()
	if ctx.Err() != nil {
		w.t.Fatalf("verify did not end within 60s: %s", errs.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errs.String()
}

// TestVerifyCassetteFromAPipe: `verify <(cat c.jsonl)` (the path /dev/fd/63, a pipe)
// never worked: verify opened the cassette three times (its server's name, the check
// of every line, the replay), and what the first read took the next ones no longer
// found. A pipe, or a FIFO named, is read once, as it comes: the same verdicts as the
// file's. (A FIFO with its writer: the writer's open waited for a reader.)
func TestVerifyCassetteFromAPipe(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	data, n := bigCassette(t, path)
	file := filepath.Join(w.dir, "big.jsonl")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	wantCode, wantOut, errs := w.verify(file, "--json", "--", w.vs)
	wantSt, wantSum := statuses(t, wantOut)
	if wantCode != 0 || wantSum["calls"] != float64(n) {
		t.Fatalf("from the file: exit %d, summary %v\n%s", wantCode, wantSum, errs)
	}
	check := func(how string, code int, out, errs string) {
		t.Helper()
		if code != wantCode {
			t.Fatalf("%s: exit %d, want %d\n%s\n%s", how, code, wantCode, out, errs)
		}
		st, sum := statuses(t, out)
		if !mapsEqual(st, wantSt) || sum["calls"] != wantSum["calls"] || sum["verified"] != wantSum["verified"] {
			t.Errorf("%s: %v %v; from the file %v %v", how, st, sum, wantSt, wantSum)
		}
		if got, want := strings.Count(out, `"seq":`), strings.Count(wantOut, `"seq":`); got != want {
			t.Errorf("%s: %d calls, from the file %d", how, got, want)
		}
	}

	// <(…): the read end of a pipe as fd 3, named /dev/fd/3.
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(w.bp, "verify", "/dev/fd/3", "--json", "--", w.vs)
	cmd.ExtraFiles = []*os.File{r}
	code, out, errs := w.verifyFed(cmd, func() {
		r.Close()
		pw.Write(data) // EPIPE when verify has gone
		pw.Close()
	})
	check("/dev/fd/3, a pipe", code, out, errs)

	// A FIFO named, with its writer. A reader that never reads holds it open while
	// the writer's open returns and until the writer is done.
	fifo := filepath.Join(w.dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal("mkfifo:", err) // a temporary folder on a Unix takes a FIFO: a skip here would assert nothing
	}
	idle, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fw, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs = w.verifyFed(exec.Command(w.bp, "verify", fifo, "--json", "--", w.vs), func() {
		fw.Write(data) // past the pipe's 64 KiB: returns once verify has read
		fw.Close()
		idle.Close()
	})
	check("a FIFO", code, out, errs)
}
