package verify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/mcpdiff"
	"github.com/bir-dev/bir-proxy/upstream"
)

// memSink keeps the results.
type memSink struct {
	mu   sync.Mutex
	rows []*CallResult
	sum  *Summary
}

func (m *memSink) Start(*cassette.Header, int, bool) {}
func (m *memSink) Call(r *CallResult)                { m.mu.Lock(); m.rows = append(m.rows, r); m.mu.Unlock() }
func (m *memSink) Done(s *Summary)                   { m.sum = s }

const header = `{"bir-cassette":1,"server":"vs","recordedAt":"2026-01-01T00:00:00Z","era":"session","protocolVersion":"2025-11-25","initialize":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}},"initialized":true,"initializeResult":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"verifyserver","version":"1"}},"tools":[{"name":"greet","inputSchema":{"type":"object","properties":{"name":{"type":"string"}}},"annotations":{"readOnlyHint":true}},{"name":"crash","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}`

func greet(seq int, name, says string) string {
	return fmt.Sprintf(`{"seq":%d,"tool":"greet","arguments":{"name":%q},"outcome":"ok","result":{"content":[{"type":"text","text":%q}]},"startedAt":"2026-01-01T00:00:00Z","durationMs":1}`, seq, name, says)
}

func writeCassette(t *testing.T, lines ...string) string {
	p := filepath.Join(t.TempDir(), "c.jsonl")
	if err := os.WriteFile(p, []byte(header+"\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func config(t testing.TB, path string, serverArgs ...string) Config {
	vs := testutil.Build(t, "./testdata/verifyserver")
	cmd := upstream.Command{Path: vs, Args: serverArgs, Name: "vs", Stderr: &testutil.SyncBuffer{}}
	return Config{Open: FileSource(path), Dial: cmd.Dial, IDPrefix: "bir:verify:test:"}
}

func TestRunInOrderWithConcurrency(t *testing.T) {
	var lines []string
	for i := 1; i <= 40; i++ {
		says := fmt.Sprintf("hello n%d", i)
		if i%10 == 0 {
			says = "hello someone else"
		}
		lines = append(lines, greet(i, fmt.Sprintf("n%d", i), says))
	}
	path := writeCassette(t, lines...)
	// 1 runs the calls on Run's goroutine, 8 on a goroutine each: the same results.
	for _, conc := range []int{8, 1} {
		cfg := config(t, path)
		cfg.Concurrency = conc
		var m memSink
		sum, err := Run(testutil.Context(t), cfg, &m)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.rows) != 40 || sum.Counts[mcpdiff.Same] != 36 || sum.Counts[mcpdiff.Changed] != 4 || sum.Findings != 4 {
			t.Fatalf("concurrency %d: %d rows, %v", conc, len(m.rows), sum.Counts)
		}
		for i, r := range m.rows {
			if r.Seq != int64(i+1) {
				t.Fatalf("concurrency %d: row %d is call %d: out of order", conc, i, r.Seq)
			}
			if want := mcpdiff.Same; (i+1)%10 == 0 && r.Status == want || (i+1)%10 != 0 && r.Status != want {
				t.Fatalf("concurrency %d: call %d is %s", conc, r.Seq, r.Status)
			}
		}
	}
}

func TestRunServerCrashMidway(t *testing.T) {
	cfg := config(t, writeCassette(t, greet(1, "a", "hello a"),
		`{"seq":2,"tool":"crash","arguments":{},"outcome":"ok","result":{"content":[]},"startedAt":"2026-01-01T00:00:00Z","durationMs":1}`,
		greet(3, "b", "hello b"), greet(4, "c", "hello c")), "--crash")
	var m memSink
	sum, err := Run(testutil.Context(t), cfg, &m)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Counts[mcpdiff.Same] != 1 || sum.Counts[mcpdiff.NotRun] != 3 {
		t.Fatalf("%v", sum.Counts)
	}
	for _, r := range m.rows[1:] {
		if !strings.Contains(r.Reason, "exited with status 3") {
			t.Errorf("call %d: %q", r.Seq, r.Reason)
		}
	}
}

func TestRunTimeoutAndInterrupt(t *testing.T) {
	// A server that never answers (sleep reads nothing): the handshake times out,
	// exit 3's error.
	cfg := config(t, writeCassette(t, greet(1, "a", "hello a")))
	cmd := upstream.Command{Path: "sleep", Args: []string{"60"}, Name: "sleep"}
	cfg.Dial = cmd.Dial
	cfg.CallTimeout = 200 * time.Millisecond
	_, err := Run(testutil.Context(t), cfg, &memSink{})
	if _, ok := err.(*UnreachableError); !ok {
		t.Fatalf("err %v, want an UnreachableError", err)
	}
	// Interrupted before it starts: every call is reported, none run.
	ctx, cancel := context.WithCancel(testutil.Context(t))
	cfg = config(t, writeCassette(t, greet(1, "a", "hello a"), greet(2, "b", "hello b")))
	cancel()
	var m memSink
	_, err = Run(ctx, cfg, &m)
	if _, ok := err.(*UnreachableError); err != nil && !ok {
		t.Fatalf("interrupted: %v", err)
	}
	for _, r := range m.rows {
		if r.Status != mcpdiff.NotRun || r.Ran {
			t.Errorf("interrupted, yet %+v", r)
		}
	}
}

func TestRunBadInput(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(p, []byte(header+"\n"+greet(1, "a", "x")+"\n{oops\n"), 0o600)
	cfg := config(t, p)
	dialed := false
	cfg.Dial = func(ctx context.Context) (upstream.Conn, error) { dialed = true; return nil, nil }
	_, err := Run(testutil.Context(t), cfg, &memSink{})
	if _, ok := err.(*InputError); !ok || !strings.Contains(err.Error(), "line 3") || dialed {
		t.Fatalf("err %v, dialed %v", err, dialed)
	}
	cfg = config(t, writeCassette(t))
	cfg.Diff.Ignore = []string{"a["}
	if _, err := Run(testutil.Context(t), cfg, &memSink{}); err == nil {
		t.Fatal("a bad --ignore path was taken")
	}
}

func TestWithMeta(t *testing.T) {
	for in, want := range map[string]string{
		`{"name":"x"}`:                       `{"name":"x","_meta":{"m":1}}`,
		`{}`:                                 `{"_meta":{"m":1}}`,
		`{"name":"x", "_meta":{"old":true}}`: `{"name":"x","_meta":{"m":1}}`,
	} {
		if got := string(withMeta(nil, []byte(in), []byte(`{"m":1}`))); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// chanWriter sends each write to a channel.
type chanWriter chan string

func (c chanWriter) Write(p []byte) (int, error) { c <- string(p); return len(p), nil }

func TestLazyWriterHoldsThenWrites(t *testing.T) {
	got := make(chanWriter, 4)
	w := &lazyWriter{w: got}
	w.Write([]byte("a"))
	w.Write([]byte("b"))
	select { // written by the timer, unasked, and in one write
	case s := <-got:
		if s != "ab" {
			t.Fatalf("wrote %q, want ab", s)
		}
	case <-testutil.Context(t).Done():
		t.Fatal("what was held was never written")
	}
	w.Write([]byte("c"))
	w.Flush()
	select {
	case s := <-got:
		if s != "c" {
			t.Fatalf("flushed %q, want c", s)
		}
	default:
		t.Fatal("Flush wrote nothing")
	}
	w.Write(make([]byte, maxHeld)) // past the bound: written at once
	select {
	case s := <-got:
		if len(s) != maxHeld {
			t.Fatalf("wrote %d bytes", len(s))
		}
	default:
		t.Fatal("a full buffer was held")
	}
	w.Flush()
	if w.timer != nil || len(got) != 0 {
		t.Fatalf("after Flush: timer %v, %d writes", w.timer, len(got))
	}
}
