package recorder

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// BenchmarkJournalReport is the recorder's share of one report in journal mode:
// Submit, encoding, the write (amortised over the batch the commit loop takes).
func BenchmarkJournalReport(b *testing.B) {
	path := filepath.Join(b.TempDir(), "github.jsonl")
	committed := newCounter()
	cfg := Config{Server: "github", JournalPath: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg.tuning.hooks.committed = committed.add
	r, err := Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	st := recordertest.SampleStep("create_issue", 1)
	b.ReportAllocs()
	b.ResetTimer()
	// In turns of 32, as a pipelined host's calls end: waiting for each turn keeps
	// Submit from dropping reports past its memory bound, which would measure nothing.
	for i := range b.N {
		r.Submit(st)
		if i%32 == 31 {
			if err := committed.wait(context.Background(), i+1); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := r.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
}
