package recorder

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// fastTuning makes every failure path run in milliseconds.
func fastTuning() tuning {
	return tuning{
		backoffBase: 5 * time.Millisecond,
		backoffCap:  50 * time.Millisecond,
	}
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func recorderConfig(t testing.TB, rec *recordertest.Server, stateDir string) Config {
	return Config{
		Endpoint: &Endpoint{URL: rec.URL(), Token: rec.Token(), Source: "test"},
		Server:   "github",
		Version:  "0.0.0-test",
		PID:      os.Getpid(),
		Upstream: Upstream{Transport: "stdio", Command: []string{"fake-server", "--flag"}},
		StateDir: stateDir,
		Logger:   testLogger(t),
		tuning:   fastTuning(),
	}
}

// open opens a Reporter that is closed at the end of the test if the test did not.
func open(t testing.TB, cfg Config) *Reporter {
	t.Helper()
	r, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// counter is a count that tests can wait on.
type counter struct {
	mu      sync.Mutex
	n       int
	changed chan struct{}
}

func newCounter() *counter { return &counter{changed: make(chan struct{})} }

func (c *counter) add(n int) {
	c.mu.Lock()
	c.n += n
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *counter) wait(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		have, changed := c.n, c.changed
		c.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d, have %d: %w", n, have, ctx.Err())
		}
	}
}

// spoolLines returns the report lines and done marks of a spool file.
func spoolLines(t testing.TB, path string) (reports, acks int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read spool: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"ack":`) {
			acks++
		} else {
			reports++
		}
	}
	return reports, acks
}

func spoolFiles(t testing.TB, stateDir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(spoolDir(stateDir), "*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// assertNoGoroutines fails if any goroutine of the package's machinery is still alive.
func assertNoGoroutines(t testing.TB) {
	t.Helper()
	testutil.NoGoroutines(t, "recorder.(*dispatcher)", "recorder.(*Reporter).commitLoop")
}

// waitRequests waits until the recorder has answered n requests that match.
func waitRequests(t testing.TB, ctx context.Context, rec *recordertest.Server, n int, match func(recordertest.Request) bool) {
	t.Helper()
	_, err := rec.Wait(ctx, func(s recordertest.Snapshot) bool {
		seen := 0
		for _, req := range s.Requests {
			if match(req) {
				seen++
			}
		}
		return seen >= n
	})
	if err != nil {
		t.Fatal(err)
	}
}

// submitSteps submits the reports of steps from to to (inclusive) of tool.
func submitSteps(r *Reporter, tool string, from, to int) {
	for i := from; i <= to; i++ {
		r.Submit(recordertest.SampleStep(tool, i))
	}
}

// waitSeqs waits for n step reports and checks that proxyID's are seqs 1..n, each once.
func waitSeqs(t testing.TB, ctx context.Context, rec *recordertest.Server, proxyID string, n int) []recordertest.Step {
	t.Helper()
	steps, err := rec.WaitSteps(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	assertSeqSet(t, seqsOf(steps, proxyID), n)
	return steps
}

// seqsOf returns the seqs of the steps of one proxyId, in arrival order.
func seqsOf(steps []recordertest.Step, proxyID string) []uint64 {
	var out []uint64
	for _, s := range steps {
		if s.ProxyID == proxyID {
			out = append(out, s.Seq)
		}
	}
	return out
}

func assertSeqSet(t testing.TB, seqs []uint64, n int) {
	t.Helper()
	seen := make(map[uint64]int, n)
	for _, s := range seqs {
		seen[s]++
	}
	for i := uint64(1); i <= uint64(n); i++ {
		if seen[i] != 1 {
			t.Errorf("seq %d arrived %d times", i, seen[i])
		}
	}
	if len(seqs) != n {
		t.Errorf("got %d reports, want %d", len(seqs), n)
	}
}
