package relay_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/upstream"
)

// wired is a relay between real pipes (the host's side) and a real rawserver child.
type wired struct {
	r     *relay.Relay
	hostW *framing.Writer
	hostR *framing.Reader
	// received is every line the server got, as it recorded them: its --record file
	// is a FIFO the test reads, so each line it receives is an event to wait on.
	received *testutil.SyncBuffer
}

// hostPipes returns the host's two pipes to a relay, each bounded by testutil.Guard
// from now: a relay that stops reading or writing fails the test instead of hanging it.
func hostPipes(t *testing.T) (inR, inW, outR, outW *os.File) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err = os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testutil.Guard)
	if err := errors.Join(inW.SetWriteDeadline(deadline), outR.SetReadDeadline(deadline)); err != nil {
		t.Fatal(err)
	}
	return inR, inW, outR, outW
}

// runRelay runs r until the host's stdin closes, which the test's cleanup does, and
// waits for it to end then.
func runRelay(t *testing.T, r *relay.Relay, inR, inW, outR, outW *os.File) {
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		testutil.Recv(t, done, "the relay to end after the host's stdin closed")
		inR.Close()
		outR.Close()
	})
}

func wire(t *testing.T, args ...string) *wired {
	t.Helper()
	raw := testutil.Build(t, "./testdata/rawserver")
	record := filepath.Join(t.TempDir(), "received")
	if err := syscall.Mkfifo(record, 0o600); err != nil {
		t.Fatal(err)
	}
	// Read and write: the open does not wait for the server, and the FIFO never reads
	// as ended while the test holds it.
	fifo, err := os.OpenFile(record, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	received := &testutil.SyncBuffer{}
	copied := make(chan struct{})
	go func() { io.Copy(received, fifo); close(copied) }()
	t.Cleanup(func() { fifo.Close(); testutil.Recv(t, copied, "the FIFO copier to end") })

	proc, err := upstream.Start(upstream.Command{Path: raw, Args: append([]string{"--record", record}, args...), Name: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, outR, outW := hostPipes(t)
	w := &wired{
		r:     relay.New(relay.Options{HostIn: inR, HostOut: outW, Upstream: proc, IDPrefix: "bir:test:"}),
		hostW: framing.NewWriter(inW), hostR: framing.NewReader(outR),
		received: received,
	}
	runRelay(t, w.r, inR, inW, outR, outW)
	return w
}

// waitReceived waits until the server has received what cond looks for.
func (w *wired) waitReceived(t *testing.T, what string, cond func(received string) bool) {
	t.Helper()
	if err := w.received.WaitUntil(testutil.Context(t), cond); err != nil {
		t.Fatalf("waiting for the server to receive %s: %v", what, err)
	}
}

// TestOwnRequestsNeverReachTheHost: the proxy's own requests get their answers, the
// host's traffic around them is untouched, and the host never sees the proxy's.
func TestOwnRequestsNeverReachTheHost(t *testing.T) {
	w := wire(t, "--reply")
	ctx := context.Background()
	var wg sync.WaitGroup
	const n = 50
	// The host pipelines its own requests while the proxy sends its own.
	wg.Go(func() {
		for i := range n {
			if err := w.hostW.Write([]byte(`{"jsonrpc":"2.0","id":` + itoa(i) + `,"method":"tools/list"}`)); err != nil {
				t.Error(err)
			}
		}
	})
	for i := range n {
		resp, err := w.r.Call(ctx, relay.Request{Method: "tools/call", Params: []byte(`{"name":"echo","arguments":{"n":` + itoa(i) + `}}`)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(resp), `"id":"bir:test:`) || !strings.Contains(string(resp), `{\"n\":`+itoa(i)+`}`) {
			t.Fatalf("answer %d: %s", i, resp)
		}
	}
	wg.Wait()
	for i := range n {
		msg, err := w.hostR.Read()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(msg), "bir:test:") {
			t.Fatalf("the host saw the proxy's answer: %s", msg)
		}
		if !strings.Contains(string(msg), `"id":`+itoa(i)+`,`) {
			t.Fatalf("host answer %d out of order: %s", i, msg)
		}
	}
	// Every line the server got is whole: no interleaving of the two senders.
	w.waitReceived(t, "every line", func(got string) bool { return strings.Count(got, "\n") >= 2*n })
	for _, l := range strings.Split(strings.TrimSuffix(w.received.String(), "\n"), "\n") {
		if strings.Count(l, `"jsonrpc"`) != 1 || !strings.HasSuffix(l, "}") {
			t.Fatalf("interleaved line: %s", l)
		}
	}
}

// TestOwnRequestCancelled: a call the proxy gives up on is cancelled upstream, and
// its late answer (were it to come) is not the host's.
func TestOwnRequestCancelled(t *testing.T) {
	w := wire(t, "--reply")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := w.r.Call(ctx, relay.Request{Method: "tools/call", Params: []byte(`{"name":"hang","arguments":{}}`)})
		errc <- err
	}()
	// Wait until the server has the request, then give up on it.
	w.waitReceived(t, "the call", func(got string) bool { return strings.Contains(got, `"hang"`) })
	cancel()
	if err := testutil.Recv(t, errc, "Call to return once cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Call returned %v, want context.Canceled", err)
	}
	w.waitReceived(t, "the cancel", func(got string) bool { return strings.Contains(got, "notifications/cancelled") })
	if got := w.received.String(); !strings.Contains(got, `"requestId":"bir:test:1"`) {
		t.Fatalf("cancel does not name the request:\n%s", got)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// scriptedConn is an upstream whose answers the test sends when it chooses; it is
// for ordering that a real server cannot be made to produce on cue.
type scriptedConn struct {
	from    chan []byte   // what the "server" sends
	written chan []byte   // what the relay wrote to it
	closed  chan struct{} // closed by Close
	once    sync.Once
}

func newScriptedConn() *scriptedConn {
	return &scriptedConn{from: make(chan []byte, 16), written: make(chan []byte, 16), closed: make(chan struct{})}
}

func (c *scriptedConn) Read() ([]byte, error) {
	select {
	case m := <-c.from:
		return m, nil
	case <-c.closed:
		return nil, io.EOF
	}
}
func (c *scriptedConn) Write(m []byte) error { c.written <- append([]byte(nil), m...); return nil }
func (c *scriptedConn) Hold(m []byte) error  { return c.Write(m) }
func (c *scriptedConn) Buffered() bool       { return len(c.from) > 0 }
func (c *scriptedConn) Close() error         { c.once.Do(func() { close(c.closed) }); return nil }

// TestLateOwnAnswerNeverReachesTheHost: an answer to an own request the proxy gave
// up on, arriving when no other own request is pending, is still not the host's.
func TestLateOwnAnswerNeverReachesTheHost(t *testing.T) {
	up := newScriptedConn()
	inR, inW, outR, outW := hostPipes(t)
	r := relay.New(relay.Options{HostIn: inR, HostOut: outW, Upstream: up, IDPrefix: "bir:test:"})
	runRelay(t, r, inR, inW, outR, outW)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, relay.Request{Method: "tools/call", Params: []byte(`{"name":"slow","arguments":{}}`)})
		errc <- err
	}()
	testutil.Recv(t, up.written, "the request to reach the server")
	cancel()
	if err := testutil.Recv(t, errc, "Call to return once cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Call: %v", err)
	}
	testutil.Recv(t, up.written, "the notifications/cancelled to reach the server")
	// Now the server answers after all, and then says something for the host.
	up.from <- []byte(`{"jsonrpc":"2.0","id":"bir:test:1","result":{"late":true}}`)
	up.from <- []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"for the host"}}`)
	msg, err := framing.NewReader(outR).Read()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(msg), "bir:test:") {
		t.Fatalf("the host got the proxy's late answer: %s", msg)
	}
	if !strings.Contains(string(msg), "for the host") {
		t.Fatalf("host got %s", msg)
	}
}
