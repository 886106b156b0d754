package relay_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/upstream"
)

// deadline bounds every wait in these tests: long enough for a loaded CI machine,
// short enough that a hang fails the test instead of the run.
const deadline = 20 * time.Second

// TestOwnCallRetiredWhenUpstreamKilled: an own request in flight when the server is
// SIGKILLed returns an error at once, rather than waiting on a context that may never
// end (context.Background()).
func TestOwnCallRetiredWhenUpstreamKilled(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	record := filepath.Join(t.TempDir(), "received")
	proc, err := upstream.Start(upstream.Command{Path: raw, Args: []string{"--record", record, "--reply"}, Name: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	defer func() { inW.Close(); outR.Close() }()
	r := relay.New(relay.Options{HostIn: inR, HostOut: outW, Upstream: proc, IDPrefix: "bir:test:"})
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()); outW.Close() }()

	errc := make(chan error, 1)
	go func() {
		_, err := r.Call(context.Background(), relay.Request{Method: "tools/call", Params: []byte(`{"name":"hang","arguments":{}}`)})
		errc <- err
	}()
	waitFor(t, func() bool { b, _ := os.ReadFile(record); return strings.Contains(string(b), `"hang"`) }, "the server to receive the request")
	if err := syscall.Kill(proc.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, relay.ErrUpstreamLost) {
			t.Fatalf("Call returned %v, want ErrUpstreamLost", err)
		}
	case <-time.After(deadline):
		t.Fatal("an own call in flight was not retired when the server died")
	}
	select {
	case err := <-done:
		if !errors.Is(err, relay.ErrUpstreamEnded) {
			t.Fatalf("Run returned %v, want ErrUpstreamEnded", err)
		}
	case <-time.After(deadline):
		t.Fatal("Run did not return after the server died")
	}
}

// replacingConn is an upstream whose server the test replaces on cue: Read returns
// a *upstream.ReplacedError when told to, and, as the contract says, Write fails from
// then until Read is called again.
type replacingConn struct {
	mu       sync.Mutex
	between  bool // a ReplacedError was returned, Read not yet called again
	from     chan fromServer
	written  chan []byte
	closed   chan struct{}
	once     sync.Once
	failNext bool
}

type fromServer struct {
	msg []byte
	err error
}

func newReplacingConn() *replacingConn {
	return &replacingConn{from: make(chan fromServer, 16), written: make(chan []byte, 64), closed: make(chan struct{})}
}

func (c *replacingConn) Read() ([]byte, error) {
	c.mu.Lock()
	c.between = false
	c.mu.Unlock()
	select {
	case f := <-c.from:
		if _, ok := upstream.IsReplaced(f.err); ok {
			c.mu.Lock()
			c.between = true
			c.mu.Unlock()
		}
		return f.msg, f.err
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *replacingConn) Write(m []byte) error {
	c.mu.Lock()
	fail := c.between || c.failNext
	c.failNext = false
	c.mu.Unlock()
	if fail {
		return errors.New("no server right now")
	}
	select {
	case c.written <- append([]byte(nil), m...):
		return nil
	case <-c.closed:
		return errors.New("closed")
	}
}

func (c *replacingConn) Close() error { c.once.Do(func() { close(c.closed) }); return nil }

type hostSide struct {
	w    *framing.Writer
	r    *framing.Reader
	done chan error
}

func wireConn(t *testing.T, up upstream.Conn, ic relay.Interceptor) (*relay.Relay, *hostSide) {
	t.Helper()
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	r := relay.New(relay.Options{HostIn: inR, HostOut: outW, Upstream: up, Intercept: ic, IDPrefix: "bir:test:"})
	h := &hostSide{w: framing.NewWriter(inW), r: framing.NewReader(outR), done: make(chan error, 1)}
	go func() { h.done <- r.Run(context.Background()); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-h.done:
		case <-time.After(deadline):
			t.Error("Run did not return after the host closed its input")
		}
		outR.Close()
	})
	return r, h
}

func (h *hostSide) send(t *testing.T, msg string) {
	t.Helper()
	if err := h.w.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
}

func (h *hostSide) next(t *testing.T) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		m, err := h.r.Read()
		if err != nil {
			got <- "read error: " + err.Error()
			return
		}
		got <- string(m)
	}()
	select {
	case m := <-got:
		return m
	case <-time.After(deadline):
		t.Fatal("the host got nothing")
		return ""
	}
}

func written(t *testing.T, c *replacingConn) string {
	t.Helper()
	select {
	case m := <-c.written:
		return string(m)
	case <-time.After(deadline):
		t.Fatal("nothing reached the upstream")
		return ""
	}
}

// TestReplacedUpstreamKeepsTheSession: when the server behind the upstream is
// replaced, every host request it owed gets an error with its own id, the proxy's own
// request is retired, what the host then sends for the old server (an answer to its
// request, a cancel of an answered request) is dropped, and the session goes on with
// the new server.
func TestReplacedUpstreamKeepsTheSession(t *testing.T) {
	up := newReplacingConn()
	r, host := wireConn(t, up, nil)

	host.send(t, `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"slow"}}`)
	host.send(t, `{"jsonrpc":"2.0","id":"bir:test:1","method":"ping"}`)
	written(t, up)
	written(t, up)
	// The old server asks the host something, which the host answers only later.
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":"s-1","method":"sampling/createMessage","params":{}}`)}
	if got := host.next(t); !strings.Contains(got, `"s-1"`) {
		t.Fatalf("host got %s", got)
	}
	ownErr := make(chan error, 1)
	go func() {
		_, err := r.Call(context.Background(), relay.Request{Method: "tools/list"})
		ownErr <- err
	}()
	if got := written(t, up); !strings.Contains(got, `"id":"bir:test:2"`) {
		// bir:test:1 is in flight from the host: the proxy's own ids skip it.
		t.Fatalf("the own request went out as %s; want id bir:test:2", got)
	}

	up.from <- fromServer{err: &upstream.ReplacedError{Reason: "server raw exited with status 1"}}
	answers := map[string]bool{}
	for range 2 {
		answers[host.next(t)] = true
	}
	for _, want := range []string{
		`{"jsonrpc":"2.0","id":9007199254740993,"error":{"code":-32000,"message":"server raw exited with status 1"}}`,
		`{"jsonrpc":"2.0","id":"bir:test:1","error":{"code":-32000,"message":"server raw exited with status 1"}}`,
	} {
		if !answers[want] {
			t.Fatalf("the host did not get %s; got %v", want, answers)
		}
	}
	select {
	case err := <-ownErr:
		if !errors.Is(err, relay.ErrUpstreamLost) {
			t.Fatalf("own Call returned %v, want ErrUpstreamLost", err)
		}
	case <-time.After(deadline):
		t.Fatal("the own request was not retired when its server was replaced")
	}

	// Meant for the old server: dropped. Then a new request reaches the new one.
	host.send(t, `{"jsonrpc":"2.0","id":"s-1","result":{"content":"late"}}`)
	host.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9007199254740993}}`)
	host.send(t, `{"jsonrpc":"2.0","id":10,"method":"tools/list"}`)
	if got := written(t, up); got != `{"jsonrpc":"2.0","id":10,"method":"tools/list"}` {
		t.Fatalf("after the replacement the new server got %s first", got)
	}
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":10,"result":{"tools":[]}}`)}
	if got := host.next(t); got != `{"jsonrpc":"2.0","id":10,"result":{"tools":[]}}` {
		t.Fatalf("host got %s", got)
	}
}

// TestUndeliverableRequestIsAnswered: a request the upstream cannot take gets a
// JSON-RPC error with its id, and the session goes on.
func TestUndeliverableRequestIsAnswered(t *testing.T) {
	up := newReplacingConn()
	_, host := wireConn(t, up, nil)
	up.mu.Lock()
	up.failNext = true
	up.mu.Unlock()
	host.send(t, `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`)
	got := host.next(t)
	if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":"could not deliver`) {
		t.Fatalf("host got %s", got)
	}
	host.send(t, `{"jsonrpc":"2.0","id":"b","method":"tools/list"}`)
	if got := written(t, up); !strings.Contains(got, `"id":"b"`) {
		t.Fatalf("upstream got %s", got)
	}
}

// TestDuplicateIDRoutedLikeTheHostReadsIt: of duplicate "id" members the last wins,
// as the host's JSON.parse reads them; a line whose first id is the proxy's but whose
// last is the host's is the host's.
func TestDuplicateIDRoutedLikeTheHostReadsIt(t *testing.T) {
	up := newReplacingConn()
	r, host := wireConn(t, up, nil)
	ownDone := make(chan []byte, 1)
	go func() {
		resp, err := r.Call(context.Background(), relay.Request{Method: "ping"})
		if err != nil {
			t.Error(err)
		}
		ownDone <- resp
	}()
	written(t, up) // the own ping, bir:test:1
	host.send(t, `{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	written(t, up)

	line := `{"id":"bir:test:1","jsonrpc":"2.0","id":7,"result":{}}`
	up.from <- fromServer{msg: []byte(line)}
	if got := host.next(t); got != line {
		t.Fatalf("host got %s, want the line it owns", got)
	}
	// And the reverse spelling is the proxy's.
	up.from <- fromServer{msg: []byte(`{"id":7,"jsonrpc":"2.0","id":"bir:test:1","result":{"own":true}}`)}
	select {
	case resp := <-ownDone:
		if !strings.Contains(string(resp), `"own":true`) {
			t.Fatalf("own call got %s", resp)
		}
	case <-time.After(deadline):
		t.Fatal("the own call never got its answer")
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stepSink collects the reports interception makes.
type stepSink struct{ steps chan report.Step }

func (s *stepSink) Submit(st report.Step)      { s.steps <- st }
func (s *stepSink) Learned(report.ServerFacts) {}

// TestOwnRequestIsReportedWithItsOrigin: a tools/call of the proxy's own passes
// interception — the correlation key removed, a step report made — and the report
// carries the origin as dispatchId and no callId; the host sees none of it.
func TestOwnRequestIsReportedWithItsOrigin(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	record := filepath.Join(t.TempDir(), "received")
	proc, err := upstream.Start(upstream.Command{Path: raw, Args: []string{"--record", record, "--reply"}, Name: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	sink := &stepSink{steps: make(chan report.Step, 4)}
	ic := intercept.New(intercept.Options{Sink: sink})
	r, host := wireConn(t, proc, ic)
	t.Cleanup(ic.Close) // after the relay's cleanup: Cleanup runs last-registered first

	resp, err := r.Call(context.Background(), relay.Request{
		Method: "tools/call",
		Params: []byte(`{"name":"echo","arguments":{"_bir_call_id":"left-in","q":1}}`),
		Origin: "dispatch-7",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp), `\"q\":1`) {
		t.Fatalf("own call answered %s", resp)
	}
	select {
	case st := <-sink.steps:
		if st.DispatchID == nil || *st.DispatchID != "dispatch-7" {
			t.Fatalf("dispatchId = %v, want dispatch-7", st.DispatchID)
		}
		if st.CallID != nil {
			t.Fatalf("callId = %q, want null for a dispatch", *st.CallID)
		}
		if st.Tool != "echo" || st.Outcome != report.OutcomeOK || string(st.Args) != `{"q":1}` {
			t.Fatalf("report: tool %q outcome %q args %s", st.Tool, st.Outcome, st.Args)
		}
		if st.StartedAt.IsZero() || st.EndedAt.Before(st.StartedAt) {
			t.Fatalf("times: started %v ended %v", st.StartedAt, st.EndedAt)
		}
	case <-time.After(deadline):
		t.Fatal("no report for the own tools/call")
	}
	if got, _ := os.ReadFile(record); strings.Contains(string(got), "_bir_call_id") {
		t.Fatalf("the upstream saw the correlation key: %s", got)
	}
	// The host's traffic still flows, and its next line is its own answer.
	host.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if got := host.next(t); !strings.Contains(got, `"id":1,`) && !strings.HasSuffix(got, `"id":1}`) {
		t.Fatalf("host got %s", got)
	}
}
