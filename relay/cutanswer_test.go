package relay_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/upstream"
)

// quickParser is an upstream that takes a long line in pieces and answers the line
// it cannot parse the moment its newline arrives, as a fast JSON-RPC server does:
// its LinePart.End hands the relay the parse error of id null, then a marker, and
// returns only once the relay has read the marker, that is, once it has dealt with
// the parse error. Nothing here is timed: the answer is read before End returns.
type quickParser struct {
	in     chan []byte
	begun  chan struct{}
	closed chan struct{}
	once   sync.Once
}

func (q *quickParser) Read() ([]byte, error) {
	select {
	case m := <-q.in:
		return m, nil
	case <-q.closed:
		return nil, io.EOF
	}
}

func (q *quickParser) Write([]byte) error { return nil }
func (q *quickParser) Close() error {
	q.once.Do(func() { close(q.closed) })
	return nil
}

func (q *quickParser) Capabilities() upstream.Capabilities {
	return upstream.Capabilities{LineWriter: q}
}

func (q *quickParser) BeginLine() (upstream.LinePart, error) {
	select {
	case q.begun <- struct{}{}:
	default:
	}
	return quickLine{q}, nil
}

type quickLine struct{ q *quickParser }

func (quickLine) Part([]byte) error { return nil }

const (
	idNullParseError = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`
	quickMarker      = `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"marker"}}`
)

func (l quickLine) End() error {
	for _, m := range []string{idNullParseError, quickMarker} {
		select {
		case l.q.in <- []byte(m):
		case <-l.q.closed:
			return io.ErrClosedPipe
		}
	}
	return nil
}

// TestCutCallParseErrorNotLeakedWhenAnsweredAtOnce: a host call streamed to the
// server and cut at --max-message ends there with its newline, and the server's
// parse error of id null for it is not the host's (cutLines.swallow). A server that
// answers as soon as the newline arrives, before the host pump has noted the cut,
// had its parse error passed to the host: the cut was noted only after the newline
// was written.
func TestCutCallParseErrorNotLeakedWhenAnsweredAtOnce(t *testing.T) {
	q := &quickParser{in: make(chan []byte), begun: make(chan struct{}, 1), closed: make(chan struct{})}
	_, host := wireConn(t, q, nil, func(o *relay.Options) {
		o.MaxMessage = 2000
		o.StreamThreshold = 1
	})
	sendCutCall(t, host, q.begun, "the call to begin streaming to the server")
	got := make(chan []string, 1)
	go func() {
		var lines []string
		for {
			msg, err := host.r.Read()
			if err != nil {
				break
			}
			lines = append(lines, string(msg))
			if strings.Contains(string(msg), `"id":7,`) {
				break
			}
		}
		got <- lines
	}()
	lines := testutil.Recv(t, got, "the answer to the call over the cap")
	for _, l := range lines {
		if l == idNullParseError {
			t.Fatalf("the host got the server's parse error for the call cut at the cap: %q", lines)
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, `"id":7,"error"`) {
		t.Fatalf("the host got %q, want the error a call over the cap gets", lines)
	}
}

// between is an upstream between servers: it cannot take a message in pieces
// (BeginLine fails, as session.Conn's does while no server serves), so a long call is
// gathered and written whole at its end; it keeps what it is written.
type between struct {
	quickParser
	mu    sync.Mutex
	wrote []string
}

func (b *between) Capabilities() upstream.Capabilities {
	return upstream.Capabilities{LineWriter: b}
}

func (b *between) BeginLine() (upstream.LinePart, error) {
	select {
	case b.begun <- struct{}{}:
	default:
	}
	return nil, errors.New("no server is serving")
}

func (b *between) Write(msg []byte) error {
	b.mu.Lock()
	b.wrote = append(b.wrote, string(msg))
	b.mu.Unlock()
	return nil
}

// TestCutCallGatheredWholeIsNotWritten: a long host call gathered whole while no
// server serves, which then passes --max-message, is refused as any line over the
// cap is, and nothing of it goes to the server: its first 2000 bytes were written as
// a message, a line no server can parse, whose parse error of id null then reached
// the host besides the refusal.
func TestCutCallGatheredWholeIsNotWritten(t *testing.T) {
	b := &between{quickParser: quickParser{in: make(chan []byte), begun: make(chan struct{}, 1), closed: make(chan struct{})}}
	_, host := wireConn(t, b, nil, func(o *relay.Options) {
		o.MaxMessage = 2000
		o.StreamThreshold = 1
	})
	call := sendCutCall(t, host, b.begun, "the call to begin on its way to the server")
	got := make(chan string, 1)
	go func() {
		msg, _ := host.r.Read()
		got <- string(msg)
	}()
	if a := testutil.Recv(t, got, "the answer to the call over the cap"); !strings.Contains(a, `"id":7,"error"`) {
		t.Fatalf("the host got %.300s, want the error a call over the cap gets", a)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.wrote {
		if strings.HasPrefix(w, call[:100]) {
			t.Fatalf("the server was written %d bytes of the call over the cap, as a message", len(w))
		}
	}
}

// spacedAnswers is an upstream that answers every request at once, its answer's
// line led by blanks (JSON allows them; IsMessage trims them).
type spacedAnswers struct {
	quickParser
}

func (s *spacedAnswers) Write(msg []byte) error {
	f, ok := jsonlex.TopFields(msg)
	if !ok || f.ID == nil || f.Method == nil {
		return nil
	}
	go func() {
		select {
		case s.in <- []byte(" \t" + `{"jsonrpc":"2.0","id":` + string(f.ID) + `,"result":{"content":[]}}`):
		case <-s.closed:
		}
	}()
	return nil
}

// TestOwnAnswerLedByBlanksIsTheProxys: an answer to a request of the proxy's own,
// on a line led by blanks, is its caller's: it was taken for a batch, passed to the
// host (an answer to nothing it asked), and the caller waited until it gave up.
func TestOwnAnswerLedByBlanksIsTheProxys(t *testing.T) {
	s := &spacedAnswers{quickParser{in: make(chan []byte), begun: make(chan struct{}, 1), closed: make(chan struct{})}}
	r, host := wireConn(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := r.Call(ctx, relay.Request{Method: "tools/list"})
	if err != nil {
		t.Fatalf("the proxy's own call: %v", err)
	}
	if !strings.Contains(string(resp), `"result":{"content":[]}`) {
		t.Fatalf("the proxy's own call got %s", resp)
	}
	// The host's traffic goes on, and the host never got the proxy's answer.
	if err := host.w.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := host.r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"id":1,`) {
		t.Fatalf("the host got %s, want the answer to its ping", got)
	}
}

// silentThenReplaced is an upstream whose first server drops a line it cannot parse
// without a word (many do), then is replaced: what it says next is the test's.
type silentThenReplaced struct {
	quickParser
	from chan fromServer
}

func (s *silentThenReplaced) Read() ([]byte, error) {
	select {
	case f := <-s.from:
		return f.msg, f.err
	case <-s.closed:
		return nil, io.EOF
	}
}

func (s *silentThenReplaced) Capabilities() upstream.Capabilities {
	return upstream.Capabilities{LineWriter: s}
}

func (s *silentThenReplaced) BeginLine() (upstream.LinePart, error) {
	select {
	case s.begun <- struct{}{}:
	default:
	}
	return silentLine{}, nil
}

type silentLine struct{}

func (silentLine) Part([]byte) error { return nil }
func (silentLine) End() error        { return nil }

// TestCutExpectationEndsWithItsServer: the parse error awaited for a call cut at the
// cap is the server's that got the cut line; once that server is replaced, it will
// never come, and the next server's error of id null (for a line of the host's it
// could not parse) is the host's: it was dropped, for as long as the cut's window.
func TestCutExpectationEndsWithItsServer(t *testing.T) {
	s := &silentThenReplaced{quickParser: quickParser{begun: make(chan struct{}, 1), closed: make(chan struct{})}, from: make(chan fromServer, 4)}
	_, host := wireConn(t, s, nil, func(o *relay.Options) {
		o.MaxMessage = 2000
		o.StreamThreshold = 1
	})
	sendCutCall(t, host, s.begun, "the call to begin streaming to the server")
	read := func(what string) string {
		got := make(chan string, 1)
		go func() {
			msg, _ := host.r.Read()
			got <- string(msg)
		}()
		return testutil.Recv(t, got, what)
	}
	if a := read("the answer to the call over the cap"); !strings.Contains(a, `"id":7,"error"`) {
		t.Fatalf("the host got %.300s", a)
	}
	s.from <- fromServer{err: &upstream.ReplacedError{Reason: "server s exited with status 1"}}
	s.from <- fromServer{msg: []byte(idNullParseError)}
	s.from <- fromServer{msg: []byte(quickMarker)}
	if a := read("what the next server said"); a != idNullParseError {
		t.Fatalf("the host got %.300s, want the next server's parse error", a)
	}
}

// sendCutCall has the host write a tools/call of 5,000 bytes, over a 2,000-byte cap:
// its head first, under the cap, so that the line streams, and once the server's
// side says it has begun (begun), the rest and the newline. It returns the call.
func sendCutCall(t *testing.T, host *hostSide, begun chan struct{}, what string) string {
	t.Helper()
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"a":"` + strings.Repeat("x", 5000) + `"}}}`
	if err := host.w.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := host.w.Part([]byte(call[:1000])); err != nil {
		t.Fatal(err)
	}
	testutil.Recv(t, begun, what)
	if err := errors.Join(host.w.Part([]byte(call[1000:])), host.w.End()); err != nil {
		t.Fatal(err)
	}
	return call
}
