package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCallCmdScriptYAMLBillionLaughs: a YAML script of nine levels of ten aliases
// (10^9 "lol" expanded, 6 GB of JSON) is refused before anything runs: its aliases
// are expanded up to 8 MiB of JSON, no further. The command's peak RSS (VmHWM, read
// until it exits; it is killed as soon as it passes the bound) stays under 100 MiB.
func TestCallCmdScriptYAMLBillionLaughs(t *testing.T) {
	w := newCallWorld(t)
	var b strings.Builder
	b.WriteString("- tool: echo\n  arguments:\n    l0: &l0 lol\n")
	for i := 1; i <= 9; i++ {
		b.WriteString("    l" + strconv.Itoa(i) + ": &l" + strconv.Itoa(i) + " [" +
			strings.TrimSuffix(strings.Repeat("*l"+strconv.Itoa(i-1)+", ", 10), ", ") + "]\n")
	}
	script := filepath.Join(w.dir, "laughs.yaml")
	os.WriteFile(script, []byte(b.String()), 0o600)
	rec := filepath.Join(w.dir, "rec")

	const bound = 100 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.bp, "call", "--script", script, "--", w.raw, "--reply", "--record", rec)
	var errs bytes.Buffer
	cmd.Stderr = &errs
	peak, _ := runPeakRSS(cmd, bound) // killed past it
	if peak > bound {
		t.Fatalf("peak RSS past %d MiB (killed); stderr %s", bound>>20, errs.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(errs.String(), "step 1 (line ") ||
		!strings.Contains(errs.String(), "larger than 8 MiB as JSON (aliases expanded)") {
		t.Fatalf("exit %d; stderr %s", code, errs.String())
	}
	if _, err := os.Stat(rec); err == nil {
		t.Error("the server was started")
	}
	t.Logf("peak RSS %d MiB", peak>>20)
}
