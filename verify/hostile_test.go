package verify

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
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
