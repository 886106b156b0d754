package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// (Linux only: the peak RSS is read from /proc.)

// logPeakRSS runs bir-proxy log with args and returns its peak RSS (runPeakRSS) and
// stdout's first 4 KiB.
func logPeakRSS(t *testing.T, bin string, args ...string) (int64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testutil.Guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"log"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "BIR_RECORDER_URL=")
	out := &headWriter{}
	cmd.Stdout = out
	peak, err := runPeakRSS(cmd, 0)
	if err != nil {
		t.Fatalf("log %v: %v", args, err)
	}
	return peak, string(out.b)
}

// headWriter keeps the first 4 KiB written to it.
type headWriter struct{ b []byte }

func (w *headWriter) Write(p []byte) (int, error) {
	if n := min(len(p), 4096-len(w.b)); n > 0 {
		w.b = append(w.b, p[:n]...)
	}
	return len(p), nil
}

// TestLogStatsMemoryIsBounded: `log --stats` over a 90 MB journal of 120,000
// reports of one tool (past the 100,000 kept per tool) streams it: its peak RSS stays
// far under the journal's size, where `log --json`, which reads every report first,
// is the control that holds it all.
func TestLogStatsMemoryIsBounded(t *testing.T) {
	t.Parallel()
	bin := testutil.Build(t, "./cmd/bir-proxy")
	path := filepath.Join(t.TempDir(), "huge.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	pad := strings.Repeat("x", 400)
	const n = 120_000
	for i := range n {
		fmt.Fprintf(w, `{"proxyId":"0123456789abcdef","server":"huge","seq":%d,"callId":null,"tool":"t","args":{},"argsFingerprint":"","argsClipped":false,`+
			`"receivedAt":"2026-12-01T00:00:00Z","startedAt":"2026-12-01T00:00:00Z","endedAt":"2026-12-01T00:00:00Z","durationMs":%d,"outcome":"ok",`+
			`"result":{"content":[{"type":"text","text":"%s"}]},"resultClipped":true,"resultBytes":%d,"dispatchId":null}`+"\n", i+1, i%1000+1, pad, 1000*(i%100+1))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	f.Close()

	rss, out := logPeakRSS(t, bin, "--stats", "--json", "--journal", path)
	var doc struct {
		Tools []struct {
			Calls          int64
			P50Ms          float64
			ResultBytesMax int64
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Tools) != 1 || doc.Tools[0].Calls != n || doc.Tools[0].ResultBytesMax != 100_000 ||
		doc.Tools[0].P50Ms < 490 || doc.Tools[0].P50Ms > 510 {
		t.Fatalf("stats of the huge journal (%v): %s", err, out)
	}
	whole, _ := logPeakRSS(t, bin, "--json", "--journal", path)
	t.Logf("peak RSS over a %d MB journal: %d MB for --stats, %d MB for --json (the control)", st.Size()>>20, rss>>20, whole>>20)
	if rss > 48<<20 {
		t.Errorf("log --stats over a %d MB journal peaked at %d MB RSS, want under 48 MB", st.Size()>>20, rss>>20)
	}
	if whole < st.Size()/2 {
		t.Errorf("the control: log --json peaked at only %d MB over a %d MB journal", whole>>20, st.Size()>>20)
	}
}
