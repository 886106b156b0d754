package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/budget"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// budgetPeak runs the proxy with --max-result-tokens 1000 in front of the raw fixture
// answering from dir, twice: once for its idle peak RSS (an echo call), once calling
// tool (its answer in dir) for the host's answer and the peak RSS it took.
func budgetPeak(t *testing.T, state, dir, tool string) (got string, peak, idle int64) {
	t.Helper()
	srv := testutil.Build(t, "./testdata/rawserver")
	start := func() *testHost {
		return startProxyIn(t, t.TempDir(), []string{"BIR_OFF=1", "XDG_STATE_HOME=" + state},
			"--server", "raw", "--max-result-tokens", "1000", "--", srv, "--reply", "--result-dir", dir)
	}
	s := start()
	s.Send(budgetCall("1", "echo"))
	s.recv()
	idle = procStatusKB(t, s.Cmd.Process.Pid, "VmHWM") << 10
	s.end()

	s = start()
	s.Send(budgetCall("7", tool))
	got = s.recv()
	peak = procStatusKB(t, s.Cmd.Process.Pid, "VmHWM") << 10
	s.end()
	return got, peak, idle
}

// TestResultBudgetLongAnswerMemory: a 32 MiB answer (past the 4 MiB from which lines
// stream) is cut and spilled; the proxy's peak RSS over its idle one stays within 4×
// the line (what it took held whole; it is cut as it streams now:
// TestResultBudgetStreamedAnswerMemory bounds that).
func TestResultBudgetLongAnswerMemory(t *testing.T) {
	t.Parallel()
	const size = 32 << 20
	state := t.TempDir()
	srv := testutil.Build(t, "./testdata/rawserver")
	s := startProxyIn(t, t.TempDir(), []string{"BIR_OFF=1", "XDG_STATE_HOME=" + state},
		"--server", "raw", "--max-result-tokens", "1000", "--", srv, "--reply", "--reply-size", "100")
	s.Send(budgetCall("1", "echo"))
	s.recv()
	idle := procStatusKB(t, s.Cmd.Process.Pid, "VmHWM") << 10
	s.end()

	s = startProxyIn(t, t.TempDir(), []string{"BIR_OFF=1", "XDG_STATE_HOME=" + state},
		"--server", "raw", "--max-result-tokens", "1000", "--", srv, "--reply", "--reply-size", "33554432")
	s.Send(budgetCall("1", "echo"))
	got := s.recv()
	items := checkBudgetAnswer(t, got, "1", 4000)
	note := items[len(items)-1].Get("text").String()
	i := strings.Index(note, " is in ")
	if i < 0 {
		t.Fatalf("the note: %q", note)
	}
	spill := strings.TrimSuffix(note[i+len(" is in "):], "]")
	testutil.Eventually(t, "the spill file", func() bool {
		fi, err := os.Stat(spill)
		return err == nil && fi.Size() > size && filepath.Ext(spill) == ".json"
	})
	peak := procStatusKB(t, s.Cmd.Process.Pid, "VmHWM") << 10
	if !strings.HasPrefix(gjson.Get(got, "result.content.0.text").String(), "xxx") {
		t.Errorf("the answer: %.300s", got)
	}
	s.end()
	t.Logf("peak RSS %d MB, idle %d MB, for a %d MB answer", peak>>20, idle>>20, size>>20)
	if peak-idle > 4*size {
		t.Errorf("a %d MB answer cut took the proxy %d MB over its idle %d MB", size>>20, (peak-idle)>>20, idle>>20)
	}
}

// TestResultBudgetStreamedAnswerMemory: a 64 MB text answer (streamed from 4 MiB on)
// with --max-result-tokens 1000 is cut as it passes (docs/budget.md "Long answers"):
// the host gets what the whole-message cut gives (head and tail kept, the last item
// naming the spill file), the spill file holds exactly the server's line, and the
// proxy's peak RSS over its idle one stays under 32 MB. Held whole, it took ~200 MB.
func TestResultBudgetStreamedAnswerMemory(t *testing.T) {
	t.Parallel()
	const size = 64 << 20
	const b = 4000
	state := t.TempDir()
	unit := `héllo \"wörld\" \u00e9 \ud83d\ude00 日本語 \\ \n 😀 `
	result := `{"content":[{"type":"text","text":"HEAD` + strings.Repeat(unit, size/len(unit)) + `TAIL"}],"isError":false}`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.json"), []byte(result), 0o600); err != nil {
		t.Fatal(err)
	}
	line := `{"jsonrpc":"2.0","id":7,"result":` + result + `}`
	got, peak, idle := budgetPeak(t, state, dir, "big")
	t.Logf("peak RSS %d MB, idle %d MB, for a %d MB answer", peak>>20, idle>>20, size>>20)
	if peak-idle > 32<<20 {
		t.Errorf("a %d MB answer cut took the proxy %d MB over its idle %d MB", size>>20, (peak-idle)>>20, idle>>20)
	}
	items := checkBudgetAnswer(t, got, "7", b)
	note := items[len(items)-1].Get("text").String()
	i := strings.Index(note, " is in ")
	if i < 0 {
		t.Fatalf("the note: %q", note)
	}
	spill := strings.TrimSuffix(note[i+len(" is in "):], "]")
	kept, err := os.ReadFile(spill)
	if err != nil || string(kept) != line {
		t.Errorf("the spill file: %d bytes (%v), want the server's %d", len(kept), err, len(line))
	}
	kept = nil
	want, ok := budget.Cut([]byte(line), b, func() string { return note })
	if !ok || got != string(want) {
		t.Errorf("the cut answer differs from the whole-message cut:\n got %.600s\nwant %.600s", got, want)
	}
}

// TestResultBudgetManyItemsMemory: a 19 MB answer of ~330,000 small text items
// (streamed from 4 MiB on, its bytes outside long strings past what StreamCut holds,
// so cut from its spill file read back whole) with --max-result-tokens 1000: the host
// gets the whole-message cut, and the proxy's peak RSS over its idle one stays under
// 3 times the line (the line read back once, the 4 MiB held before the answer
// streams and its compacted copy). Cut kept a record of each item and wrote them all
// out: it took 173 MB over an idle 10 MB (~10 times the line).
func TestResultBudgetManyItemsMemory(t *testing.T) {
	t.Parallel()
	const b = 4000
	state := t.TempDir()
	var sb strings.Builder
	sb.WriteString(`{"content":[`)
	for i := 0; sb.Len() < 19<<20; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"type":"text","text":"item %d: a small text of a long list"}`, i)
	}
	sb.WriteString(`],"isError":false}`)
	result := sb.String()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "many.json"), []byte(result), 0o600); err != nil {
		t.Fatal(err)
	}
	line := `{"jsonrpc":"2.0","id":7,"result":` + result + `}`
	got, peak, idle := budgetPeak(t, state, dir, "many")
	t.Logf("peak RSS %d MB, idle %d MB, for a %d MB answer", peak>>20, idle>>20, len(line)>>20)
	if peak-idle > 3*int64(len(line)) {
		t.Errorf("a %d MB answer of many items cut took the proxy %d MB over its idle %d MB", len(line)>>20, (peak-idle)>>20, idle>>20)
	}
	items := checkBudgetAnswer(t, got, "7", b)
	note := items[len(items)-1].Get("text").String()
	at := strings.Index(note, "[bir-proxy: this")
	if !strings.HasPrefix(note, "all content removed") || at < 0 || !strings.Contains(note, " is in ") {
		t.Fatalf("the note: %q", note)
	}
	want, ok := budget.Cut([]byte(line), b, func() string { return note[at:] })
	if !ok || got != string(want) {
		t.Errorf("the cut answer differs from the whole-message cut:\n got %.600s\nwant %.600s", got, want)
	}
}
