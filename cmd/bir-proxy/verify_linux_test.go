package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// verifyMaxRSS runs bir-proxy verify with args to its end and returns its exit code,
// stderr and peak resident memory in bytes (ru_maxrss: the most of verify's and of
// the server's, each alone).
func (w *verifyWorld) verifyMaxRSS(args ...string) (int, string, int64) {
	w.t.Helper()
	cmd := exec.Command(w.bp, append([]string{"verify"}, args...)...)
	var errs strings.Builder
	cmd.Stderr = &errs
	err := cmd.Run()
	if cmd.ProcessState == nil {
		w.t.Fatalf("verify did not run: %v", err)
	}
	return cmd.ProcessState.ExitCode(), errs.String(), cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
}

// A server whose tools/list pages for ever, each page big: verify kept every page
// twice, without a bound on bytes (300 pages of large tools: 2 GB, --plan too). The
// tools kept are bounded (8 MiB): past them verify stops paging, and says so.
func TestVerifyEndlessToolsListIsBounded(t *testing.T) {
	w := newVerifyWorld(t)
	path := w.record("s", sessionLines)
	code, errs, idle := w.verifyMaxRSS(path, "--tool", "greet", "--", w.vs)
	if code != 0 {
		t.Fatalf("idle run: exit %d\n%s", code, errs)
	}
	for _, plan := range []bool{false, true} {
		args := []string{path, "--tool", "greet"}
		if plan {
			args = append(args, "--plan")
		}
		code, errs, peak := w.verifyMaxRSS(append(args, "--", w.vs, "--endless-pages", "131072")...)
		if code != 0 || !strings.Contains(errs, "stopped paging") {
			t.Errorf("plan %v: exit %d\n%s", plan, code, errs)
		}
		t.Logf("plan %v: peak RSS %d MB, an idle run's %d MB", plan, peak>>20, idle>>20)
		if peak-idle > 64<<20 {
			t.Errorf("plan %v: peak RSS %d MB, %d MB over an idle run's", plan, peak>>20, (peak-idle)>>20)
		}
	}
}
