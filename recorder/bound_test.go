package recorder

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
	"github.com/bir-dev/bir-proxy/report"
)

// bigStep is a report of about 1 KiB.
func bigStep(i int) report.Step {
	s := recordertest.SampleStep("t", i)
	s.Args = []byte(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", 900)))
	return s
}

func spoolBytes(t *testing.T, stateDir string) int64 {
	t.Helper()
	var n int64
	for _, f := range spoolFiles(t, stateDir) {
		if !strings.HasSuffix(f, ".jsonl") {
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// While the recorder is down the spool stays under --spool-max: the oldest reports are
// dropped first, with a count on stderr and on disk for `bir-proxy status`, and the
// newest are delivered once the recorder is back. It used to grow without bound.
func TestSpoolBounded(t *testing.T) {
	const limit = 256 << 10
	const n = 2000 // about 2 MiB of reports
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	rec.Down()
	state := t.TempDir()
	var logs testutil.SyncBuffer
	committed := newCounter()
	cfg := recorderConfig(t, rec, state)
	cfg.SpoolMax = limit
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.tuning.backoffBase, cfg.tuning.backoffCap = time.Hour, time.Hour // stay down: no probe
	cfg.tuning.hooks.committed = committed.add
	first := open(t, cfg)
	for i := 1; i <= n; i++ {
		first.Submit(bigStep(i))
		if i%100 == 0 {
			if err := committed.wait(ctx, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := spoolBytes(t, state); got > limit {
		t.Errorf("spool holds %d bytes, over the %d bound:\n%s", got, limit, logs.String())
	}
	if !strings.Contains(logs.String(), "the spool is full") {
		t.Errorf("the drops were not said:\n%s", logs.String())
	}
	sts, err := SpoolStatus(state)
	if err != nil || len(sts) != 1 || sts[0].Server != "github" || sts[0].Dropped == 0 || sts[0].Bytes > limit {
		t.Fatalf("SpoolStatus: %+v, %v", sts, err)
	}

	if err := rec.Up(); err != nil {
		t.Fatal(err)
	}
	cfg = recorderConfig(t, rec, state)
	open(t, cfg)
	kept := int(int64(n) - sts[0].Dropped)
	steps, err := rec.WaitSteps(ctx, kept)
	if err != nil {
		t.Fatal(err)
	}
	seqs := seqsOf(steps, first.ProxyID())
	slices.Sort(seqs)
	if len(seqs) != kept || seqs[len(seqs)-1] != n || seqs[0] != uint64(n-kept+1) {
		t.Errorf("delivered %d reports, seq %d..%d; want the newest %d", len(seqs), seqs[0], seqs[len(seqs)-1], kept)
	}
	if kept < limit/2/1100 {
		t.Errorf("only %d reports kept of a %d-byte bound", kept, limit)
	}
}

// The spool files of earlier runs count toward the bound, and go first: they are older.
func TestSpoolBoundCountsAdoptedFiles(t *testing.T) {
	const limit = 256 << 10
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	rec.Down()
	state := t.TempDir()
	committed := newCounter()
	cfg := recorderConfig(t, rec, state)
	cfg.tuning.backoffBase, cfg.tuning.backoffCap = time.Hour, time.Hour
	cfg.tuning.hooks.committed = committed.add
	old := open(t, cfg) // no bound of its own beyond the default
	for i := 1; i <= 1000; i++ {
		old.Submit(bigStep(i))
	}
	if err := committed.wait(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := spoolBytes(t, state); got < 1<<20 {
		t.Fatalf("the earlier run left %d bytes", got)
	}

	committed = newCounter()
	var logs testutil.SyncBuffer
	cfg = recorderConfig(t, rec, state)
	cfg.SpoolMax = limit
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.tuning.backoffBase, cfg.tuning.backoffCap = time.Hour, time.Hour
	cfg.tuning.hooks.committed = committed.add
	next := open(t, cfg)
	<-next.adoptDone
	for i := 1; i <= 50; i++ {
		next.Submit(bigStep(i))
	}
	if err := committed.wait(ctx, 50); err != nil {
		t.Fatal(err)
	}
	if err := next.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := spoolBytes(t, state); got > limit {
		t.Errorf("spool holds %d bytes with the earlier run's, over the %d bound", got, limit)
	}

	if err := rec.Up(); err != nil {
		t.Fatal(err)
	}
	open(t, recorderConfig(t, rec, state))
	if _, err := rec.Wait(ctx, func(s recordertest.Snapshot) bool { return len(seqsOf(s.Steps, next.ProxyID())) == 50 }); err != nil {
		t.Fatalf("the newer run's reports were not all kept: %v", err)
	}
	// What is left of the earlier run is its newest reports.
	steps, err := rec.Wait(ctx, func(s recordertest.Snapshot) bool { return len(seqsOf(s.Steps, old.ProxyID())) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	if seqs := seqsOf(steps.Steps, old.ProxyID()); slices.Min(seqs) == 1 {
		t.Errorf("the earlier run's oldest report was kept: %v", seqs)
	}
}

// A report being read back for delivery while its file is compacted under it is read
// whole: reads go through the file's index, which compaction rewrites.
func TestCompactionKeepsReadsRight(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testutil.Guard)
	defer cancel()
	rec := recordertest.Start(t)
	rec.Slow(2 * time.Millisecond)
	state := t.TempDir()
	committed := newCounter()
	cfg := recorderConfig(t, rec, state)
	cfg.SpoolMax = MinSpoolMax
	cfg.tuning.hooks.committed = committed.add
	r := open(t, cfg)
	for i := 1; i <= 1500; i++ {
		r.Submit(bigStep(i))
	}
	if err := committed.wait(ctx, 1500); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, st := range rec.Steps() {
		if st.Get("args.i").Uint() != st.Seq {
			t.Fatalf("report %d arrived with the bytes of another: %.80s", st.Seq, st.Body)
		}
	}
}
