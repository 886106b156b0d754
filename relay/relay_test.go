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
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/upstream"
)

// wired is a relay between real pipes (the host's side) and a real rawserver child.
type wired struct {
	r      *relay.Relay
	hostW  *framing.Writer
	hostWF *os.File
	hostR  *framing.Reader
	done   chan error
	record string
}

func wire(t *testing.T, args ...string) *wired {
	t.Helper()
	raw := testutil.Build(t, "./testdata/rawserver")
	record := filepath.Join(t.TempDir(), "received")
	proc, err := upstream.Start(upstream.Command{Path: raw, Args: append([]string{"--record", record}, args...), Name: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	w := &wired{
		r:     relay.New(relay.Options{HostIn: inR, HostOut: outW, Upstream: proc, IDPrefix: "bir:test:"}),
		hostW: framing.NewWriter(inW), hostWF: inW, hostR: framing.NewReader(outR),
		done: make(chan error, 1), record: record,
	}
	go func() { w.done <- w.r.Run(context.Background()); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		<-w.done
		inR.Close()
		outR.Close()
	})
	return w
}

func (w *wired) received(t *testing.T) string {
	data, err := os.ReadFile(w.record)
	if err != nil && !errors.Is(err, os.ErrNotExist) { // created with the first line
		t.Fatal(err)
	}
	return string(data)
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
	for _, l := range strings.Split(strings.TrimSuffix(w.received(t), "\n"), "\n") {
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
	for !strings.Contains(w.received(t), `"hang"`) {
		<-time.After(5 * time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Call returned %v, want context.Canceled", err)
	}
	for !strings.Contains(w.received(t), "notifications/cancelled") {
		<-time.After(5 * time.Millisecond)
	}
	if got := w.received(t); !strings.Contains(got, `"requestId":"bir:test:1"`) {
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
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	r := relay.New(relay.Options{HostIn: inR, HostOut: outW, Upstream: up, IDPrefix: "bir:test:"})
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()); outW.Close() }()
	defer func() { inW.Close(); <-done }()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, relay.Request{Method: "tools/call", Params: []byte(`{"name":"slow","arguments":{}}`)})
		errc <- err
	}()
	<-up.written // the request reached the server
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Call: %v", err)
	}
	<-up.written // the notifications/cancelled
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
