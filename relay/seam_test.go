package relay_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
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

// TestOwnCallRetiredWhenUpstreamKilled: an own request in flight when the server is
// SIGKILLed returns an error at once, rather than waiting on a context that may never
// end (context.Background()).
func TestOwnCallRetiredWhenUpstreamKilled(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	record, received := recordFIFO(t)
	proc, err := upstream.Start(upstream.Command{Path: raw, Args: []string{"--record", record, "--reply"}, Name: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	r, host := wireConn(t, proc, nil)

	errc := make(chan error, 1)
	go func() {
		_, err := r.Call(context.Background(), relay.Request{Method: "tools/call", Params: []byte(`{"name":"hang","arguments":{}}`)})
		errc <- err
	}()
	waitReceived(t, received, "the request", func(got string) bool { return strings.Contains(got, `"hang"`) })
	if err := syscall.Kill(proc.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Recv(t, errc, "the own call in flight to be retired when the server died"); !errors.Is(err, relay.ErrUpstreamLost) {
		t.Fatalf("Call returned %v, want ErrUpstreamLost", err)
	}
	if err := host.runErr(t); !errors.Is(err, relay.ErrUpstreamEnded) {
		t.Fatalf("Run returned %v, want ErrUpstreamEnded", err)
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
	// resumed gets a value when Read is called again after a replacement: from then
	// on Write reaches the new server.
	resumed chan struct{}
}

type fromServer struct {
	msg []byte
	err error
}

func newReplacingConn() *replacingConn {
	return &replacingConn{from: make(chan fromServer, 16), written: make(chan []byte, 64), closed: make(chan struct{}), resumed: make(chan struct{}, 16)}
}

func (c *replacingConn) Read() ([]byte, error) {
	c.mu.Lock()
	if c.between {
		c.resumed <- struct{}{}
	}
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

// Settled ends the failing window as soon as the relay has settled the replacement
// (upstream.Settler), before the relay answers what was lost: a host that sends its
// next request the moment it has its error answer reaches the new server.
func (c *replacingConn) Capabilities() upstream.Capabilities {
	return upstream.Capabilities{Settler: c}
}

func (c *replacingConn) Settled() {
	c.mu.Lock()
	if c.between {
		c.resumed <- struct{}{}
	}
	c.between = false
	c.mu.Unlock()
}

// hostSide is the host's end of a relay running between real pipes.
type hostSide struct {
	w     *framing.Writer
	r     *framing.Reader
	ended chan struct{} // closed when Run has returned
	err   error         // Run's, once ended is closed
}

// wireConn runs a relay between up and real pipes for the host, until the test's
// cleanup closes the host's input. Every read and write of those pipes, and the wait
// for Run to end, is bounded by testutil.Guard.
func wireConn(t *testing.T, up upstream.Conn, ic relay.Interceptor, opts ...func(*relay.Options)) (*relay.Relay, *hostSide) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testutil.Guard)
	if err := errors.Join(inW.SetWriteDeadline(deadline), outR.SetReadDeadline(deadline)); err != nil {
		t.Fatal(err)
	}
	o := relay.Options{HostIn: inR, HostOut: outW, Upstream: up, Intercept: ic, IDPrefix: "bir:test:"}
	for _, opt := range opts {
		opt(&o)
	}
	r := relay.New(o)
	h := &hostSide{w: framing.NewWriter(inW), r: framing.NewReader(outR), ended: make(chan struct{})}
	go func() {
		h.err = r.Run(context.Background())
		outW.Close()
		close(h.ended)
	}()
	t.Cleanup(func() {
		inW.Close()
		h.runErr(t)
		inR.Close()
		outR.Close()
	})
	return r, h
}

// runErr waits for Run to return and returns its error.
func (h *hostSide) runErr(t *testing.T) error {
	t.Helper()
	testutil.Recv(t, h.ended, "Run to return")
	return h.err
}

func (h *hostSide) send(t *testing.T, msg string) {
	t.Helper()
	if err := h.w.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
}

func (h *hostSide) next(t *testing.T) string {
	t.Helper()
	m, err := h.r.Read()
	if err != nil {
		t.Fatalf("the host got nothing: %v", err)
	}
	return string(m)
}

func written(t *testing.T, c *replacingConn) string {
	t.Helper()
	return string(testutil.Recv(t, c.written, "a message to reach the upstream"))
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
	if err := testutil.Recv(t, ownErr, "the own request to be retired when its server was replaced"); !errors.Is(err, relay.ErrUpstreamLost) {
		t.Fatalf("own Call returned %v, want ErrUpstreamLost", err)
	}

	// Meant for the old server: dropped. Then a new request reaches the new one: the
	// relay said it had settled the old one before it answered the lost requests.
	select {
	case <-up.resumed:
	default:
		t.Fatal("the relay answered the lost requests before it said it had settled them")
	}
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
	if resp := testutil.Recv(t, ownDone, "the own call's answer"); !strings.Contains(string(resp), `"own":true`) {
		t.Fatalf("own call got %s", resp)
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
	record, received := recordFIFO(t)
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
	{
		st := testutil.Recv(t, sink.steps, "a report for the own tools/call")
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
	}
	waitReceived(t, received, "the own call", func(got string) bool { return strings.Contains(got, `"q":1`) })
	if got := received.String(); strings.Contains(got, "_bir_call_id") {
		t.Fatalf("the upstream saw the correlation key: %s", got)
	}
	// The host's traffic still flows, and its next line is its own answer.
	host.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if got := host.next(t); !strings.Contains(got, `"id":1,`) && !strings.HasSuffix(got, `"id":1}`) {
		t.Fatalf("host got %s", got)
	}
}

// TestCallAfterTheLossFailsAtOnce: once the upstream's read side has ended for good, a
// Call fails at once with ErrUpstreamLost, even with a context that never ends: it is
// refused at registration, not left waiting for an answer nobody will read.
func TestCallAfterTheLossFailsAtOnce(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	proc, err := upstream.Start(upstream.Command{Path: raw, Args: []string{"--reply"}, Name: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	r, host := wireConn(t, proc, nil)
	if err := syscall.Kill(proc.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := host.runErr(t); !errors.Is(err, relay.ErrUpstreamEnded) {
		t.Fatalf("Run returned %v, want ErrUpstreamEnded", err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := r.Call(context.Background(), relay.Request{Method: "tools/call", Params: []byte(`{"name":"echo","arguments":{}}`)})
		errc <- err
	}()
	if err := testutil.Recv(t, errc, "a Call after the loss to fail"); !errors.Is(err, relay.ErrUpstreamLost) {
		t.Fatalf("Call after the loss returned %v, want ErrUpstreamLost", err)
	}
}

// TestUnansweredRequestsAreSettledByTheRelay: an upstream that says some requests will
// never be answered (upstream.UnansweredError: an HTTP request failed) makes no answer
// itself. The relay answers each host request still in flight once, hands its own
// request's caller the error, skips an id already answered, and reads on.
func TestUnansweredRequestsAreSettledByTheRelay(t *testing.T) {
	up := newReplacingConn()
	r, host := wireConn(t, up, nil)
	host.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`)
	host.send(t, `{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"b"}}`)
	written(t, up)
	written(t, up)
	type result struct {
		msg []byte
		err error
	}
	own := make(chan result, 1)
	go func() {
		msg, err := r.Call(context.Background(), relay.Request{Method: "tools/list"})
		own <- result{msg, err}
	}()
	ownReq := written(t, up)
	if !strings.Contains(ownReq, `"id":"bir:test:1"`) {
		t.Fatalf("own request went out as %s", ownReq)
	}
	// "two" is answered by the server before the failure is said: it is not answered again.
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":"two","result":{}}`)}
	if got := host.next(t); got != `{"jsonrpc":"2.0","id":"two","result":{}}` {
		t.Fatalf("host got %s", got)
	}
	why := "bir-proxy: server x (http://127.0.0.1/mcp): HTTP 500 Internal Server Error"
	up.from <- fromServer{err: &upstream.UnansweredError{IDs: [][]byte{[]byte(`1`), []byte(`"two"`), []byte(`"bir:test:1"`)}, Reason: why}}
	if got, want := host.next(t), `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"`+why+`"}}`; got != want {
		t.Fatalf("host got %s, want %s", got, want)
	}
	res := testutil.Recv(t, own, "the own request to get the error")
	if res.err != nil || !strings.Contains(string(res.msg), `"error"`) || !strings.Contains(string(res.msg), "HTTP 500") {
		t.Fatalf("own Call returned %s, %v", res.msg, res.err)
	}
	// The session goes on, and nothing more came for the three ids.
	host.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	written(t, up)
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":3,"result":{}}`)}
	if got := host.next(t); got != `{"jsonrpc":"2.0","id":3,"result":{}}` {
		t.Fatalf("after the failure the host got %s", got)
	}
}

// TestOwnAnswersNobodyWaitsForAreToldApart: in the proxy's namespace, an answer to an
// id it gave out whose request was given up on (a revived server's re-handshake, which
// stopped waiting) is dropped quietly; one to an id it never gave out is dropped and
// said. Neither reaches the host.
func TestOwnAnswersNobodyWaitsForAreToldApart(t *testing.T) {
	up := newReplacingConn()
	logs := &testutil.SyncBuffer{}
	ids := upstream.NewOwnIDs("bir:test:")
	_, host := wireConn(t, up, nil, func(o *relay.Options) {
		o.IDs = ids
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	given := ids.Next() // as revive gives one to a re-handshake's request
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":"` + given + `","result":{}}`)}
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":"bir:test:4242","result":{}}`)}
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)}
	if got := host.next(t); !strings.Contains(got, "notifications/message") {
		t.Fatalf("the host got %s", got)
	}
	out := logs.String()
	if !strings.Contains(out, "level=DEBUG msg=\"dropped a late answer to a request of the proxy's own that was given up on\" id="+given) {
		t.Errorf("the late answer to %s was not told as one:\n%s", given, out)
	}
	if !strings.Contains(out, "level=WARN msg=\"dropped an answer in the proxy's own id namespace to no request it sent\" id=bir:test:4242") {
		t.Errorf("the answer to an id never given out was not said:\n%s", out)
	}
}

// blockedWriter is a host that has stopped reading: every write waits until release.
type blockedWriter struct {
	entered chan struct{}
	release chan struct{}
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return len(p), nil
}

// TestUndeliveredAnswerDoesNotHoldTheSendLock: the error answer to a request the
// upstream could not take is written to the host outside the lock every send takes:
// with a host that stopped reading, the proxy's own requests still go (and the end of
// Run, which takes that lock, is not held either).
func TestUndeliveredAnswerDoesNotHoldTheSendLock(t *testing.T) {
	up := newReplacingConn()
	up.failNext = true
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &blockedWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	r := relay.New(relay.Options{HostIn: inR, HostOut: out, Upstream: up, IDPrefix: "bir:test:"})
	ended := make(chan struct{})
	go func() { r.Run(context.Background()); close(ended) }() //nolint:errcheck // the end is the test's
	t.Cleanup(func() {
		close(out.release)
		inW.Close()
		up.Close()
		testutil.Recv(t, ended, "Run to return")
		inR.Close()
	})
	if _, err := inW.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	testutil.Recv(t, out.entered, "the error answer to be written to the host")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Call(ctx, relay.Request{Method: "ping"}) //nolint:errcheck // only its send is looked at
	if got := written(t, up); !strings.Contains(got, `"method":"ping"`) {
		t.Fatalf("the upstream got %s", got)
	}
}
