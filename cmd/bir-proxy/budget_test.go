package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/budget"
	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// budgetResults are the scripted results of rawserver --result-dir: a 1 MB text
// with multi-byte characters, escapes and surrogate pairs all along (the cut lands
// among them), isError and _meta; a text with a large structuredContent; a 300 KB
// image between two texts.
func budgetResults(t *testing.T) (dir string, results map[string]string) {
	t.Helper()
	unit := `héllo \"wörld\" \u00e9 \ud83d\ude00 日本語 \\ \n 😀 \t`
	body := strings.Repeat(unit, 1<<20/len(unit))
	results = map[string]string{
		"big":        `{"content":[{"type":"text","text":"HEAD` + body + `TAIL"}],"isError":true,"_meta":{"trace":"m-1"}}`,
		"structured": `{"content":[{"type":"text","text":"` + strings.Repeat("s", 30000) + `"}],"structuredContent":{"rows":"` + strings.Repeat("r", 200000) + `"}}`,
		"image":      `{"content":[{"type":"text","text":"before"},{"type":"image","mimeType":"image/png","data":"` + strings.Repeat("QUFB", 75000) + `"},{"type":"text","text":"after"}]}`,
	}
	dir = t.TempDir()
	for name, r := range results {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(r), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, results
}

// startBudget is the proxy with flags before rawserver --result-dir dir, with its
// state in state.
func startBudget(t *testing.T, state, dir string, flags ...string) *testHost {
	t.Helper()
	srv := testutil.Build(t, "./testdata/rawserver")
	args := append([]string{"--server", "raw"}, flags...)
	args = append(args, "--", srv, "--reply", "--result-dir", dir)
	// The journal on: the reports say what was cut.
	return startProxyIn(t, t.TempDir(), []string{"BIR_OFF=0", "BIR_RECORDER_URL=", "XDG_STATE_HOME=" + state}, args...)
}

func budgetCall(id, tool string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"a":"é"}}}`
}

// checkBudgetAnswer checks a cut answer: valid JSON and UTF-8, the raw id, a result
// within B + 1 KiB, and its last text item; it returns the content items.
func checkBudgetAnswer(t *testing.T, got, id string, b int) []gjson.Result {
	t.Helper()
	if !json.Valid([]byte(got)) || !utf8.ValidString(got) {
		t.Fatalf("not valid JSON/UTF-8: %.300q", got)
	}
	if r := gjson.Get(got, "id").Raw; r != id {
		t.Fatalf("id %s, want %s", r, id)
	}
	if n := len(gjson.Get(got, "result").Raw); n > b+budget.Slack {
		t.Fatalf("result of %d bytes, budget %d", n, b)
	}
	return gjson.Get(got, "result.content").Array()
}

// TestResultBudget: through the binary, --max-result-tokens 10000 (40,000 bytes)
// cuts the long results and keeps each whole answer, byte for byte, in the spill
// folder; a small answer and an error pass as they are; without the flag nothing
// changes.
func TestResultBudget(t *testing.T) {
	t.Parallel()
	dir, results := budgetResults(t)
	const b = 40000
	state := t.TempDir()
	s := startBudget(t, state, dir, "--max-result-tokens", "10000")

	// The long text: head and tail kept, isError and _meta as sent.
	s.Send(budgetCall(`"a\u002d1"`, "big"))
	got := s.recv()
	items := checkBudgetAnswer(t, got, `"a\u002d1"`, b)
	if len(items) != 2 || !strings.HasPrefix(items[0].Get("text").String(), "HEAD") || !strings.HasSuffix(items[0].Get("text").String(), "TAIL") {
		t.Fatalf("content: %.400s", gjson.Get(got, "result.content").Raw)
	}
	if r := gjson.Get(got, "result.isError").Raw; r != "true" {
		t.Errorf("isError %s", r)
	}
	if r := gjson.Get(got, "result._meta").Raw; r != `{"trace":"m-1"}` {
		t.Errorf("_meta %s", r)
	}
	note := items[1].Get("text").String()
	i := strings.Index(note, " is in ")
	if i < 0 {
		t.Fatalf("the last item: %q", note)
	}
	spill := strings.TrimSuffix(note[i+len(" is in "):], "]")
	wantDir := filepath.Join(state, "bir-proxy", "spill")
	if filepath.Dir(spill) != wantDir {
		t.Errorf("spill file %s, not in %s", spill, wantDir)
	}
	line := `{"jsonrpc":"2.0","id":"a\u002d1","result":` + results["big"] + `}`
	testutil.Eventually(t, "the spill file", func() bool {
		data, err := os.ReadFile(spill)
		return err == nil && string(data) == line
	})
	if fi, err := os.Stat(spill); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("spill file mode %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(wantDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("spill folder mode %v %v", fi.Mode(), err)
	}

	// structuredContent past the budget goes; the text is cut.
	s.Send(budgetCall("2", "structured"))
	got = s.recv()
	items = checkBudgetAnswer(t, got, "2", b)
	if gjson.Get(got, "result.structuredContent").Exists() || len(items) != 2 || !strings.HasPrefix(items[0].Get("text").String(), "sss") {
		t.Errorf("structured: %.400s", got)
	}

	// The image is replaced, in its place, by a text saying so.
	s.Send(budgetCall("3", "image"))
	got = s.recv()
	items = checkBudgetAnswer(t, got, "3", b)
	if len(items) != 4 || items[0].Get("text").String() != "before" || !strings.Contains(items[1].Get("text").String(), "removed a image item of 300") ||
		items[2].Get("text").String() != "after" || !strings.Contains(items[3].Get("text").String(), ".json") {
		t.Errorf("image: %.600s", got)
	}

	// Small answers and errors pass byte for byte.
	small := map[string]string{}
	for id, tool := range map[string]string{"4": "echo", "5": "rpc_error", "6": "fail"} {
		s.Send(budgetCall(id, tool))
		small[id] = s.recv()
	}
	s.end()

	// The journal keeps the server's result, and says it was cut and where it is.
	var rep string
	testutil.Eventually(t, "the big call's report", func() bool {
		for _, l := range lines(t, filepath.Join(state, "bir-proxy", "journal", "raw.jsonl")) {
			if gjson.Get(l, "tool").String() == "big" {
				rep = l
				return true
			}
		}
		return false
	})
	if gjson.Get(rep, "trimmed").Raw != "true" || gjson.Get(rep, "spill").String() != spill || gjson.Get(rep, "resultBytes").Int() != int64(len(results["big"])) ||
		!strings.HasPrefix(gjson.Get(rep, "result.content.0.text").String(), "HEAD") {
		t.Errorf("the report: %.600s", rep)
	}
	for _, l := range lines(t, filepath.Join(state, "bir-proxy", "journal", "raw.jsonl")) {
		if tool := gjson.Get(l, "tool").String(); tool == "echo" && gjson.Get(l, "trimmed").Exists() {
			t.Errorf("a whole answer's report says trimmed: %s", l)
		}
	}

	// Without the flag: the same calls, the server's lines as they are.
	plain := startBudget(t, t.TempDir(), dir)
	for _, c := range []struct{ id, tool string }{{`"a\u002d1"`, "big"}, {"2", "structured"}, {"3", "image"}} {
		plain.Send(budgetCall(c.id, c.tool))
		if got, want := plain.recv(), `{"jsonrpc":"2.0","id":`+c.id+`,"result":`+results[c.tool]+`}`; got != want {
			t.Errorf("without the flag %s changed: %.200s", c.tool, got)
		}
	}
	for id, tool := range map[string]string{"4": "echo", "5": "rpc_error", "6": "fail"} {
		plain.Send(budgetCall(id, tool))
		if got := plain.recv(); got != small[id] {
			t.Errorf("%s: with the budget %s, without %s", tool, small[id], got)
		}
	}
	plain.end()
}

// TestResultBudgetSpillRefused: a spill folder that cannot be made (a file where it
// should be) still leaves the host a cut, valid answer that says the spill failed,
// and stderr says it once for two answers.
func TestResultBudgetSpillRefused(t *testing.T) {
	t.Parallel()
	dir, _ := budgetResults(t)
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "bir-proxy"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "bir-proxy", "spill"), nil, 0o400); err != nil {
		t.Fatal(err)
	}
	s := startBudget(t, state, dir, "--max-result-tokens", "1000")
	for _, id := range []string{"1", "2"} {
		s.Send(budgetCall(id, "big"))
		items := checkBudgetAnswer(t, s.recv(), id, 4000)
		if n := len(items); n != 2 || !strings.Contains(items[1].Get("text").String(), "could not be kept") {
			t.Fatalf("the answer: %v", items)
		}
	}
	s.end()
	if n := strings.Count(s.Stderr.String(), "could not be kept whole"); n != 1 {
		t.Errorf("stderr says it %d times:\n%s", n, s.Stderr.String())
	}
}

// TestResultBudgetInFlight: 2 and 8 calls in flight at once, long and short
// alternating: each long answer is cut under its own id with its own spill file
// holding its own line; each short one passes as it is.
func TestResultBudgetInFlight(t *testing.T) {
	t.Parallel()
	dir, results := budgetResults(t)
	for _, n := range []int{2, 8} {
		state := t.TempDir()
		s := startBudget(t, state, dir, "--max-result-tokens", "2000")
		var batch strings.Builder
		for i := range n {
			tool := "image"
			if i%2 == 1 {
				tool = "echo"
			}
			batch.WriteString(budgetCall(strconv.Itoa(i+1), tool) + "\n")
		}
		s.Send(strings.TrimSuffix(batch.String(), "\n"))
		spills := map[string]bool{}
		for range n {
			got := s.recv()
			id := gjson.Get(got, "id").Raw
			if i, _ := strconv.Atoi(id); i%2 == 0 {
				if got != `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"{\"a\":\"é\"}"}],"isError":false}}` {
					t.Errorf("n=%d: the short answer %s changed: %.200s", n, id, got)
				}
				continue
			}
			items := checkBudgetAnswer(t, got, id, 8000)
			note := items[len(items)-1].Get("text").String()
			i := strings.Index(note, " is in ")
			if i < 0 {
				t.Fatalf("n=%d: the note %q", n, note)
			}
			spill := strings.TrimSuffix(note[i+len(" is in "):], "]")
			if spills[spill] {
				t.Errorf("n=%d: two answers in %s", n, spill)
			}
			spills[spill] = true
			line := `{"jsonrpc":"2.0","id":` + id + `,"result":` + results["image"] + `}`
			testutil.Eventually(t, "the spill file of "+id, func() bool {
				data, err := os.ReadFile(spill)
				return err == nil && string(data) == line
			})
		}
		s.end()
	}
}

// TestResultTokens: --max-result-tokens reads a number, off, or auto (the host's
// MAX_MCP_OUTPUT_TOKENS, else 25,000).
func TestResultTokens(t *testing.T) {
	t.Setenv("MAX_MCP_OUTPUT_TOKENS", "")
	for in, want := range map[string]int{"": 0, "off": 0, "0": 0, "1200": 1200, "auto": 25000} {
		if got, err := resultTokens(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	t.Setenv("MAX_MCP_OUTPUT_TOKENS", "40000")
	if got, _ := resultTokens("auto"); got != 40000 {
		t.Errorf("auto with MAX_MCP_OUTPUT_TOKENS=40000: %d", got)
	}
	for _, bad := range []string{"lots", "-5", "1e3"} {
		if _, err := resultTokens(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestResultBudgetStreamedAnswers: with --max-result-tokens and --call-timeout, long
// answers (past the 4 MiB from which lines stream) to tools/call: a text is cut as
// it streams, byte for byte as the whole answer is cut, its call's deadline gone
// with its answer; a result that is not an object (not cut) reaches the host as the
// server sent it, read back from its spill file, which is then removed.
func TestResultBudgetStreamedAnswers(t *testing.T) {
	t.Parallel()
	const b = 4000
	unit := `日本語 \ud83d\ude00 \"q\" é `
	results := map[string]string{
		"text":  `{"content":[{"type":"text","text":"HEAD` + strings.Repeat(unit, 6<<20/len(unit)) + `TAIL"},{"type":"image","data":"QUFB"}],"isError":false}`,
		"array": `["` + strings.Repeat("a", 5<<20) + `"]`,
	}
	dir := t.TempDir()
	for name, r := range results {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(r), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	state := t.TempDir()
	s := startBudget(t, state, dir, "--max-result-tokens", "1000", "--call-timeout", "5s")
	s.Send(budgetCall(`"t"`, "text"))
	got := s.recv()
	line := `{"jsonrpc":"2.0","id":"t","result":` + results["text"] + `}`
	items := checkBudgetAnswer(t, got, `"t"`, b)
	note := items[len(items)-1].Get("text").String()
	if want, ok := budget.Cut([]byte(line), b, func() string { return note }); !ok || got != string(want) {
		t.Errorf("the cut answer differs from the whole-message cut:\n got %.600s\nwant %.600s", got, want)
	}
	spill := strings.TrimSuffix(note[strings.Index(note, " is in ")+len(" is in "):], "]")
	if kept, err := os.ReadFile(spill); err != nil || string(kept) != line {
		t.Errorf("the spill file: %d bytes (%v), want the server's %d", len(kept), err, len(line))
	}

	s.Send(budgetCall(`"a"`, "array"))
	if got, want := s.recv(), `{"jsonrpc":"2.0","id":"a","result":`+results["array"]+`}`; got != want {
		t.Errorf("the answer not cut: %d bytes %.200s, want the server's %d", len(got), got, len(want))
	}
	// Past the call timeout: the streamed call's deadline did not answer it again.
	time.Sleep(5500 * time.Millisecond)
	s.Send(budgetCall(`"s"`, "echo"))
	if got := s.recv(); !strings.Contains(got, `"id":"s"`) || strings.Contains(got, "error") {
		t.Errorf("after the long answers: %.300s", got)
	}
	ents, _ := os.ReadDir(filepath.Join(state, "bir-proxy", "spill"))
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the spill folder holds %v, want the one cut answer", names)
	}
	s.end()
}

// TestResultBudgetStreamedAnswerStalls: a server that stalls in the middle of a long
// answer the budget cuts as it streams is still cut off at --call-timeout: the host
// gets the timeout error (the call's deadline runs on while its answer streams).
func TestResultBudgetStreamedAnswerStalls(t *testing.T) {
	t.Parallel()
	s := startBudget(t, t.TempDir(), t.TempDir(), "--max-result-tokens", "1000", "--call-timeout", "2s")
	s.Send(`{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"partial_hang","arguments":{"size":6000000}}}`)
	got := make(chan string, 1)
	go func() {
		msg, err := s.out.Read()
		if err != nil {
			got <- "reading: " + err.Error()
			return
		}
		got <- string(msg)
	}()
	select {
	case msg := <-got:
		if !strings.Contains(msg, `"id":"p"`) || !strings.Contains(msg, `"error"`) || !strings.Contains(msg, "2s") {
			t.Errorf("the host got %.300s, want the call's timeout error", msg)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no answer a minute past the call's 2 s deadline")
	}
}

// TestStalledLongAnswerPastCallTimeout: with --call-timeout (with and without
// --max-result-tokens), 2 and 8 calls in flight whose long answers (past the stream
// threshold) the server stalls in the middle of, past the deadline, then ends: the
// host gets each call's timeout error and nothing else for it, and the session goes
// on. The first answer is streaming when its deadline passes (the others begin after
// theirs); it ends whole, then, in a second round, past --max-message, and in a third
// it is cut off by the server's death (lines the proxy stands in for with an error
// answer of their id, which is a late answer too; the server is started again).
func TestStalledLongAnswerPastCallTimeout(t *testing.T) {
	t.Parallel()
	srv := testutil.Build(t, "./testdata/rawserver")
	bin := testutil.BuildRace(t, "./cmd/bir-proxy")
	for _, budgetOn := range []bool{true, false} {
		for _, n := range []int{2, 8} {
			t.Run(fmt.Sprintf("budget=%v/n=%d", budgetOn, n), func(t *testing.T) {
				t.Parallel()
				args := []string{"--server", "raw", "--call-timeout", "1s", "--max-message", "1000000"}
				if budgetOn {
					args = append(args, "--max-result-tokens", "1000")
				}
				cmd := exec.Command(bin, append(args, "--", srv, "--reply")...)
				cmd.Env = append(os.Environ(), "BIR_OFF=0", "BIR_RECORDER_URL=", "XDG_STATE_HOME="+t.TempDir(), "BIR_STREAM_THRESHOLD=65536")
				p := testutil.Start(t, cmd)
				s := &testHost{Proc: p, t: t, out: framing.NewReader(p.Stdout)}
				for round, end := range []string{`"more":0`, `"more":800000`, `"more":100000,"exit":true`} {
					var batch strings.Builder
					ids := make([]string, n)
					for i := range n {
						// String ids, and number ids (which the policy also matches as
						// a JavaScript host reads them).
						ids[i] = fmt.Sprintf(`"r%d-%d"`, round, i)
						if n == 8 {
							ids[i] = strconv.Itoa(100*round + i)
						}
						ms, e := 100, `"more":0`
						if i == 0 {
							ms, e = 2500, end // past the deadline, 300 kB of it written
						}
						fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"stall","arguments":{"size":300000,"ms":%d,%s}}}`+"\n", ids[i], ms, e)
					}
					s.Send(strings.TrimSuffix(batch.String(), "\n"))
					// A request without a deadline sent after them is answered after
					// every stalled answer has ended: what came before its answer is
					// all the host got for them.
					s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"after%d","method":"ping"}`, round))
					_, before := s.expect(fmt.Sprintf(`"after%d"`, round))
					got := map[string]int{}
					for _, msg := range before {
						id, _ := jsonID([]byte(msg))
						got[id]++
						if !isError(msg) || !strings.Contains(msg, "--call-timeout 1s") {
							t.Errorf("round %d: for %s the host got %.300s, want the timeout error", round, id, msg)
						}
					}
					for _, id := range ids {
						if got[id] != 1 {
							t.Errorf("round %d: the host got %d answers for %s, want 1", round, got[id], id)
						}
						delete(got, id)
					}
					if len(got) > 0 {
						t.Errorf("round %d: answers for other ids: %v", round, got)
					}
				}
				// The session goes on: a call is answered by the server.
				s.Send(`{"jsonrpc":"2.0","id":"next","method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`)
				if answer, before := s.expect(`"next"`); isError(answer) || !strings.Contains(answer, `\"a\":1`) || len(before) > 0 {
					t.Errorf("the call after them: %.300s (after %q)", answer, before)
				}
				s.end()
			})
		}
	}
}
