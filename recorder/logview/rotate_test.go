package logview

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// A journal rotated many times keeps its newest reports, within the bound, and `log`
// shows them in order across the files: all of them, and the last few read from the
// end.
func TestRotatedJournalKeepsNewestInOrder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "github.jsonl")
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	const maxBytes, keep, n = 16 << 10, 2, 2000
	// Reports go in several turns, as a live session writes them, so rotation happens
	// between writes and not only once.
	for turn := range 10 {
		r, err := recorder.Open(t.Context(), recorder.Config{Server: "github", JournalPath: path, Logger: log, JournalMaxBytes: maxBytes, JournalKeep: keep})
		if err != nil {
			t.Fatal(err)
		}
		for i := turn * n / 10; i < (turn+1)*n/10; i++ {
			st := recordertest.SampleStep("t", i+1)
			st.Tool = fmt.Sprintf("t%05d", i+1)
			r.Submit(st)
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var total int64
	for _, p := range []string{path, journal.Rotated(path, 1), journal.Rotated(path, 2)} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("rotated file missing: %v", err)
		}
		total += st.Size()
	}
	if _, err := os.Stat(journal.Rotated(path, keep+1)); err == nil {
		t.Errorf("%s kept: only %d rotated files should be", journal.Rotated(path, keep+1), keep)
	}
	if total > (keep+1)*(maxBytes+4<<10) {
		t.Errorf("the journal's files hold %d bytes, over the bound", total)
	}

	tools := func(out string) []string {
		var ts []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			ts = append(ts, gjson.Get(l, "tool").String())
		}
		return ts
	}
	var all bytes.Buffer
	if err := PrintLog(t.Context(), &all, LogOptions{Path: path, JSON: true}); err != nil {
		t.Fatal(err)
	}
	got := tools(all.String())
	if len(got) == 0 || got[len(got)-1] != fmt.Sprintf("t%05d", n) {
		t.Fatalf("the newest report is not last: %v", got[max(0, len(got)-3):])
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("reports out of order at %d: %s after %s", i, got[i], got[i-1])
		}
	}
	if first := got[0]; first == "t00001" {
		t.Errorf("the oldest reports were kept: rotation dropped nothing")
	}

	for _, limit := range []int{5, len(got) - 3, len(got) + 10} {
		var tail bytes.Buffer
		if err := PrintLog(t.Context(), &tail, LogOptions{Path: path, JSON: true, Limit: limit}); err != nil {
			t.Fatal(err)
		}
		want := got[max(0, len(got)-limit):]
		if have := tools(tail.String()); strings.Join(have, ",") != strings.Join(want, ",") {
			t.Errorf("log -n %d: %d reports, want the last %d (%v ... )", limit, len(have), len(want), have[:min(3, len(have))])
		}
	}
}
