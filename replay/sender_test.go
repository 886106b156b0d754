package replay

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestResultsQueueIsBounded: past maxResults (or maxResultBytes) a result is
// dropped, not queued: a recorder that floods dispatches and takes no result once
// grew this queue by gigabytes. The first drop is said at once, the count when there
// is room again; full tells the poll loop to wait.
func TestResultsQueueIsBounded(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	e := &Executor{tune: tuning{maxResults: 2, maxResultBytes: 100}.withDefaults(), log: slog.New(slog.NewTextHandler(logs, nil))}
	s := newSender(e)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		s.add(id, []byte(`{"dispatchId":"`+id+`"}`))
	}
	if len(s.queue) != 2 || s.queue[0].id != "a" || s.queue[1].id != "b" || !s.full.Load() {
		t.Fatalf("queue %v, full %v: want a and b, full", s.queue, s.full.Load())
	}
	if n := strings.Count(logs.String(), "too many dispatch results waiting"); n != 1 {
		t.Fatalf("%d warnings for the drops, want 1:\n%s", n, logs.String())
	}
	s.pop()
	if s.full.Load() || !strings.Contains(logs.String(), "count=3") {
		t.Fatalf("after a pop: full %v, log:\n%s", s.full.Load(), logs.String())
	}
	// The byte bound: one result larger than the room left is dropped too.
	s.add("big", []byte(strings.Repeat("x", 100)))
	if len(s.queue) != 1 {
		t.Fatalf("a result over the byte bound was queued: %d queued", len(s.queue))
	}
	s.cancel()
}
