package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestResultBudgetLongAnswerMemory: a 32 MiB answer (past the 4 MiB from which lines
// stream when no policy is on) is read whole, cut and spilled; the proxy's peak RSS
// over its idle one stays within 4× the line (the line, the spill's copy, the
// reader's buffer). It is held whole: cutting it as it streams is not done
// (docs/budget.md).
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
