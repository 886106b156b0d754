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

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/upstream"
)

// wired is a relay between real pipes (the host's side) and a real rawserver child.
type wired struct {
	r    *relay.Relay
	host *hostSide
	// received is every line the server got (see recordFIFO).
	received *testutil.SyncBuffer
}

// recordFIFO returns a path for a rawserver's --record file and what the server
// recorded there: the file is a FIFO the test reads, so each line the server receives
// is an event to wait on (WaitFor, WaitUntil) rather than a file to poll.
func recordFIFO(t *testing.T) (path string, received *testutil.SyncBuffer) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "received")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// Read and write: the open does not wait for the server, and the FIFO never reads
	// as ended while the test holds it.
	fifo, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	received = &testutil.SyncBuffer{}
	copied := make(chan struct{})
	go func() { io.Copy(received, fifo); close(copied) }()
	t.Cleanup(func() { fifo.Close(); testutil.Recv(t, copied, "the FIFO copier to end") })
	return path, received
}

// waitReceived waits until what the server received satisfies cond.
func waitReceived(t *testing.T, received *testutil.SyncBuffer, what string, cond func(received string) bool) {
	t.Helper()
	if err := received.WaitUntil(testutil.Context(t), cond); err != nil {
		t.Fatalf("waiting for the server to receive %s: %v", what, err)
	}
}

func wire(t *testing.T, args ...string) *wired {
	t.Helper()
	raw := testutil.Build(t, "./testdata/rawserver")
	record, received := recordFIFO(t)
	proc, err := upstream.Start(upstream.Command{Path: raw, Args: append([]string{"--record", record}, args...), Name: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	r, host := wireConn(t, proc, nil)
	return &wired{r: r, host: host, received: received}
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
			if err := w.host.w.Write([]byte(`{"jsonrpc":"2.0","id":` + itoa(i) + `,"method":"tools/list"}`)); err != nil {
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
		msg, err := w.host.r.Read()
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
	waitReceived(t, w.received, "every line", func(got string) bool { return strings.Count(got, "\n") >= 2*n })
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
	waitReceived(t, w.received, "the call", func(got string) bool { return strings.Contains(got, `"hang"`) })
	cancel()
	if err := testutil.Recv(t, errc, "Call to return once cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Call returned %v, want context.Canceled", err)
	}
	waitReceived(t, w.received, "the cancel", func(got string) bool { return strings.Contains(got, "notifications/cancelled") })
	if got := w.received.String(); !strings.Contains(got, `"requestId":"bir:test:1"`) {
		t.Fatalf("cancel does not name the request:\n%s", got)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestLateOwnAnswerNeverReachesTheHost: an answer to an own request the proxy gave
// up on, arriving when no other own request is pending, is still not the host's.
func TestLateOwnAnswerNeverReachesTheHost(t *testing.T) {
	up := newReplacingConn()
	r, host := wireConn(t, up, nil)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, relay.Request{Method: "tools/call", Params: []byte(`{"name":"slow","arguments":{}}`)})
		errc <- err
	}()
	written(t, up) // the request reached the server
	cancel()
	if err := testutil.Recv(t, errc, "Call to return once cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Call: %v", err)
	}
	written(t, up) // the notifications/cancelled
	// Now the server answers after all, and then says something for the host.
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":"bir:test:1","result":{"late":true}}`)}
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"for the host"}}`)}
	msg := host.next(t)
	if strings.Contains(string(msg), "bir:test:") {
		t.Fatalf("the host got the proxy's late answer: %s", msg)
	}
	if !strings.Contains(string(msg), "for the host") {
		t.Fatalf("host got %s", msg)
	}
}
