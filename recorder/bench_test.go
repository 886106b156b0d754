package recorder

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
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

// BenchmarkPost is one step POST to a recorder that answers at once (both sides in
// this process, so the CPU is the client's and a minimal server's), through the
// client's own HTTP/1.1 and through net/http.
func BenchmarkPost(b *testing.B) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	ep := &Endpoint{URL: "http://" + ln.Addr().String(), Token: "t0k3n"}
	st := recordertest.SampleStep("create_issue", 1)
	body := marshalStep(st)
	for _, name := range []string{"http1", "net-http"} {
		b.Run(name, func(b *testing.B) {
			c := newClient(tuning{}.withDefaults())
			defer c.closeIdle()
			if name == "net-http" {
				c.h1 = nil
			}
			b.ReportAllocs()
			for b.Loop() {
				if res := c.post(context.Background(), ep, "/proxy/step", body); res.err != nil || res.status != http.StatusOK {
					b.Fatalf("status %d, err %v", res.status, res.err)
				}
			}
		})
	}
}
