package verify

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/mcpdiff"
	"github.com/bir-dev/bir-proxy/upstream"
)

// hostile is a Config whose server is sh running script: a real process on real
// pipes, behaving as no MCP server should.
func hostile(t *testing.T, script string) Config {
	path := writeCassette(t, greet(1, "a", "hello a"))
	cmd := upstream.Command{Path: "/bin/sh", Args: []string{"-c", script}, Name: "hostile", Stderr: &testutil.SyncBuffer{}}
	return Config{Open: FileSource(path), Dial: cmd.Dial, IDPrefix: "bir:verify:test:", CallTimeout: time.Hour}
}

// A server that floods requests of its own and never reads its stdin: each answer
// verify owes it waits on a write that cannot finish. What waits must be bounded
// (it was a goroutine and a reply per request: without bound).
func TestHostileServerRequestFloodIsBounded(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("sh")
	}
	cfg := hostile(t, `exec yes '{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}'`)
	ctx, cancel := context.WithCancel(testutil.Context(t))
	defer cancel()
	base := runtime.NumGoroutine()
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg, &memSink{})
		done <- err
	}()
	// Watch the goroutines while the flood goes on: a bound well past what the
	// session needs, far short of one per request.
	const bound = 2000
	peak := 0
	for i := 0; i < 4000 && peak <= bound; i++ {
		peak = max(peak, runtime.NumGoroutine()-base)
		select {
		case err := <-done:
			t.Fatalf("Run returned during the flood: %v", err)
		default:
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond) // sampling, not waiting for an event
	}
	cancel()
	err := <-done
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("Run: %v, want the handshake to fail", err)
	}
	if peak > bound {
		t.Fatalf("%d goroutines during a request flood (bound %d)", peak, bound)
	}
}

// answersHandshake is a server script's start: it answers verify's initialize (id 1)
// and tools/list (id 2), listing greet read-only, reading each line of verify's as it
// comes (initialize, notifications/initialized, tools/list).
const answersHandshake = `read l; echo '{"jsonrpc":"2.0","id":"bir:verify:test:1","result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"x","version":"1"}}}'
read l; read l; echo '{"jsonrpc":"2.0","id":"bir:verify:test:2","result":{"tools":[{"name":"greet","inputSchema":{"type":"object","properties":{"name":{"type":"string"}}},"annotations":{"readOnlyHint":true}}]}}'
`

// hostileCalls is hostile with the recorded calls given.
func hostileCalls(t *testing.T, script string, calls ...string) Config {
	cfg := hostile(t, script)
	cfg.Open = FileSource(writeCassette(t, calls...))
	return cfg
}

// runBounded runs Run, failing the test if it has not returned within d.
func runBounded(t *testing.T, ctx context.Context, cfg Config, d time.Duration) (*memSink, error) {
	t.Helper()
	var m memSink
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg, &m)
		done <- err
	}()
	select {
	case err := <-done:
		return &m, err
	case <-time.After(d):
		t.Fatalf("Run has not returned after %v", d)
		return nil, nil
	}
}

// A server that answers the handshake and then stops reading its stdin: a request
// bigger than the pipe can never be written whole. The call's --timeout must still
// end it (the write held the call, and Run, for as long as the server pleased), and
// the calls after it are not run: the stream is broken mid-message.
func TestHostileServerNotReadingTimesOut(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("sh")
	}
	big := strings.Repeat("x", 1<<20)
	cfg := hostileCalls(t, answersHandshake+"exec sleep 3600", greet(1, big, "hello"), greet(2, "b", "hello b"))
	cfg.CallTimeout = 200 * time.Millisecond
	m, err := runBounded(t, testutil.Context(t), cfg, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.rows) != 2 {
		t.Fatalf("%d rows", len(m.rows))
	}
	for _, r := range m.rows {
		if r.Status != mcpdiff.NotRun || !strings.Contains(r.Reason, "not reading its input") && !strings.Contains(r.Reason, "stopped reading") {
			t.Errorf("call %d: %s %q", r.Seq, r.Status, r.Reason)
		}
	}
}

// stdinWatch is a Conn whose big writes are announced on started as they begin.
type stdinWatch struct {
	upstream.Conn
	started chan struct{}
}

func (w *stdinWatch) Write(msg []byte) error {
	if len(msg) > 1<<16 {
		select {
		case w.started <- struct{}{}:
		default:
		}
	}
	return w.Conn.Write(msg)
}

// The same server, verify interrupted while its request is stuck in the pipe: Run
// returns (it waited on the write, interruption or not), the call not run.
func TestHostileServerNotReadingInterrupted(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("sh")
	}
	big := strings.Repeat("x", 1<<20)
	cfg := hostileCalls(t, answersHandshake+"exec sleep 3600", greet(1, big, "hello"))
	started := make(chan struct{}, 1)
	dial := cfg.Dial
	cfg.Dial = func(ctx context.Context) (upstream.Conn, error) {
		c, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		return &stdinWatch{Conn: c, started: started}, nil
	}
	ctx, cancel := context.WithCancel(testutil.Context(t))
	defer cancel()
	go func() {
		select {
		case <-started: // the 1 MiB request is being written to a pipe nobody reads
			cancel()
		case <-ctx.Done():
		}
	}()
	m, err := runBounded(t, ctx, cfg, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.rows) != 1 || m.rows[0].Status != mcpdiff.NotRun || m.rows[0].Reason != "verify was interrupted" {
		t.Fatalf("%+v", m.rows)
	}
}
