package session

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/upstream"
)

// deadline bounds every wait here: a hang fails the test, not the run.
const deadline = 20 * time.Second

// fixture runs rawserver behind a session.Conn, with a goroutine reading it as the
// relay's upstream pump does (settling each replacement at once).
type fixture struct {
	t       *testing.T
	c       *Conn
	dir     string
	starts  string
	pidfile string
	record  string
	msgs    chan []byte
	lost    chan string   // ReplacedError reasons
	done    chan struct{} // closed when the reader ends, with readErr
	readErr error
	logs    *testutil.SyncBuffer
	facts   chan report.ServerFacts
	dialed  atomic.Int64
}

// dialer starts rawserver with base args on the first start and later args after.
type dialer struct {
	f           *fixture
	first, then []string
	raw         string
}

func (d *dialer) Dial(ctx context.Context) (upstream.Conn, error) {
	n := d.f.dialed.Add(1)
	args := append([]string{"--record", d.f.record, "--pidfile", d.f.pidfile, "--starts", d.f.starts}, d.first...)
	if n > 1 && d.then != nil {
		args = append([]string{"--record", d.f.record, "--pidfile", d.f.pidfile, "--starts", d.f.starts}, d.then...)
	}
	return upstream.Command{Path: d.raw, Args: args, Name: "raw", Stderr: io.Discard, TermGrace: time.Second}.Dial(ctx)
}

func newFixture(t *testing.T, p Policy, first, then []string) *fixture {
	t.Helper()
	return newFixtureReader(t, p, first, then, func(f *fixture, err error) bool {
		if re, ok := upstream.IsReplaced(err); ok {
			// As the relay does: settled before anyone hears of the loss, so a
			// test that writes the moment it does is not racing the next Read.
			f.c.Settled()
			f.lost <- re.Reason
			f.c.Settled()
			return true
		}
		_, ok := upstream.IsUndelivered(err) // as the relay does, answered and read on
		return ok
	})
}

// newFixtureReader is newFixture whose reader gives every Read error to signal first:
// it returns true for a signal it handled, after which the reader reads on.
func newFixtureReader(t *testing.T, p Policy, first, then []string, signal func(*fixture, error) bool) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{
		t: t, dir: dir,
		starts:  filepath.Join(dir, "starts"),
		pidfile: filepath.Join(dir, "pid"),
		record:  filepath.Join(dir, "received"),
		msgs:    make(chan []byte, 1024),
		lost:    make(chan string, 64),
		done:    make(chan struct{}),
		logs:    &testutil.SyncBuffer{},
		facts:   make(chan report.ServerFacts, 64),
	}
	d := &dialer{f: f, first: first, then: then, raw: testutil.Build(t, "./testdata/rawserver")}
	conn, err := d.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f.c = New(conn, Options{
		Dialer: d, Name: "raw", IDPrefix: "bir:test:", Policy: p,
		Logger:  slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Revived: func(sf report.ServerFacts) { f.facts <- sf },
	})
	go func() {
		for {
			msg, err := f.c.Read()
			if err != nil && signal(f, err) {
				continue
			}
			if err != nil {
				f.readErr = err
				close(f.done)
				return
			}
			f.msgs <- msg
		}
	}()
	t.Cleanup(func() {
		f.c.Close()
		select {
		case <-f.done:
		case <-time.After(deadline):
			t.Error("Read did not end after Close")
		}
		for _, pid := range f.startPids() {
			if err := testutil.WaitExit(context.Background(), pid); err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			t.Logf("log:\n%s", f.logs.String())
		}
	})
	return f
}

func (f *fixture) write(msg string) error { return f.c.Write([]byte(msg)) }

// next is the next message the Conn returned.
func (f *fixture) next() string {
	f.t.Helper()
	select {
	case m := <-f.msgs:
		return string(m)
	case <-time.After(deadline):
		f.t.Fatal("no message from the Conn")
		return ""
	}
}

func (f *fixture) nextLost() string {
	f.t.Helper()
	select {
	case r := <-f.lost:
		return r
	case <-time.After(deadline):
		f.t.Fatal("the Conn never said the server was replaced")
		return ""
	}
}

func (f *fixture) startPids() []int {
	data, _ := os.ReadFile(f.starts)
	var pids []int
	for _, l := range strings.Fields(string(data)) {
		if p, err := strconv.Atoi(l); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

func (f *fixture) kill() {
	f.t.Helper()
	pid := testutil.ReadPidfile(f.t, f.pidfile)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		f.t.Fatal(err)
	}
}

const initReq = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// session initializes, as a host would.
func (f *fixture) session() {
	f.t.Helper()
	if err := f.write(initReq); err != nil {
		f.t.Fatal(err)
	}
	if a := f.next(); !strings.Contains(a, `"id":0,"result"`) {
		f.t.Fatalf("initialize answered %s", a)
	}
	if err := f.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		f.t.Fatal(err)
	}
}

func fast() Policy {
	return Policy{Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, CoolDown: 300 * time.Millisecond, Wait: 5 * time.Second, Handshake: 2 * time.Second}
}

// TestReviveReplaysAndGoesOn: the basic revival, in process with the race detector.
func TestReviveReplaysAndGoesOn(t *testing.T) {
	f := newFixture(t, fast(), []string{"--reply"}, nil)
	f.session()
	if err := f.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang","arguments":{}}}`); err != nil {
		t.Fatal(err)
	}
	f.kill()
	if r := f.nextLost(); !strings.Contains(r, "server raw was killed by signal 9") {
		t.Fatalf("reason %q", r)
	}
	if err := f.write(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); err != nil {
		t.Fatalf("a write after Settled: %v", err)
	}
	if a := f.next(); a != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Fatalf("got %s, want the ping's answer (the replay's answers are swallowed)", a)
	}
	select {
	case sf := <-f.facts:
		if sf.ProtocolVersion != "2025-06-18" || !strings.Contains(string(sf.ServerInfo), "rawserver") {
			t.Fatalf("facts %+v", sf)
		}
	case <-time.After(deadline):
		t.Fatal("the recorder was not told of the revival")
	}
	data, _ := os.ReadFile(f.record)
	if n := strings.Count(string(data), `"method":"initialize"`); n != 2 {
		t.Fatalf("%d initializes received:\n%s", n, data)
	}
}

// TestReviveCoolDown: a crash loop gives up after GiveUpAfter starts; writes then fail
// at once; after the cool-down one write asks for one start, which fails the same
// way, and the proxy is down again — one start per cool-down, never a spin.
func TestReviveCoolDown(t *testing.T) {
	f := newFixture(t, fast(), []string{"--exit-now", "--exit-code", "3"}, nil)
	waitDown := func() (err error) {
		// Polling a state only writes can see.
		testutil.Eventually(t, "the proxy to be down", func() bool {
			err = f.write(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
			return err != nil && strings.Contains(err.Error(), "is down")
		})
		return err
	}
	err := waitDown()
	if !strings.Contains(err.Error(), "exited with status 3") || !strings.Contains(err.Error(), "4 starts in a row") {
		t.Fatalf("down error %v", err)
	}
	if n := len(f.startPids()); n != 4 {
		t.Fatalf("%d starts before giving up, want 4", n)
	}
	began := time.Now()
	for time.Since(began) < 100*time.Millisecond {
		if err := f.write(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); err == nil || !strings.Contains(err.Error(), "is down") {
			t.Fatalf("a write while down: %v", err)
		}
	}
	if n := len(f.startPids()); n != 4 {
		t.Fatalf("%d starts during the cool-down, want none", n)
	}
	// After the cool-down: the next write waits for one more start, which dies.
	// Waited out on the real clock: the servers are real processes (rawserver),
	// which synctest cannot fake. TestReviveCoolDownInFakeTime holds the timing.
	time.Sleep(time.Until(began.Add(fast().CoolDown)))
	waitDown()
	if n := len(f.startPids()); n != 5 {
		t.Fatalf("%d starts, want one more after the cool-down", n)
	}
}

// deadConn is a server in process that is gone the moment it is read: a crash loop
// in a synctest bubble, where the policy's clock is fake.
type deadConn struct{}

func (deadConn) Read() ([]byte, error) { return nil, io.EOF }
func (deadConn) Write([]byte) error    { return nil }
func (deadConn) Close() error          { return nil }

func (deadConn) Capabilities() upstream.Capabilities { return upstream.Capabilities{} }

// deadDialer starts deadConns and notes the (fake) time of each start.
type deadDialer struct {
	mu sync.Mutex
	at []time.Time
}

func (d *deadDialer) Dial(context.Context) (upstream.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = append(d.at, time.Now())
	return deadConn{}, nil
}

func (d *deadDialer) starts() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.at)
}

// TestReviveCoolDownInFakeTime: the crash loop of TestReviveCoolDown with the
// default policy, on synctest's clock: the starts in a row wait 0, Backoff and twice
// it; after GiveUpAfter starts writes fail at once for exactly CoolDown; then one
// write asks for exactly one start, and the proxy is down again for another CoolDown.
func TestReviveCoolDownInFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := DefaultPolicy()
		d := &deadDialer{}
		began := time.Now()
		c := New(deadConn{}, Options{Dialer: d, Name: "dead", IDPrefix: "bir:test:", Policy: p, Logger: slog.New(slog.DiscardHandler)})
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			for {
				_, err := c.Read()
				if _, ok := upstream.IsReplaced(err); ok {
					c.Settled()
					continue
				}
				if err != nil {
					return
				}
			}
		}()
		defer func() { c.Close(); <-ended }() // on a failure too: the bubble must end empty
		ping := func() error { return c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)) }
		time.Sleep(3 * p.Backoff) // the fourth start, which dies at once
		synctest.Wait()
		var offsets []time.Duration
		for _, at := range d.starts() {
			offsets = append(offsets, at.Sub(began))
		}
		// The first start is New's; the restarts wait 0, Backoff, 2×Backoff.
		if want := []time.Duration{0, p.Backoff, 3 * p.Backoff}; !slices.Equal(offsets, want) {
			t.Fatalf("restarts at %v, want at %v", offsets, want)
		}
		down := began.Add(3 * p.Backoff)
		if err := ping(); err == nil || !strings.Contains(err.Error(), "is down") || !strings.Contains(err.Error(), "4 starts in a row") {
			t.Fatalf("a write after the crash loop: %v", err)
		}
		time.Sleep(time.Until(down.Add(p.CoolDown - time.Millisecond)))
		if err := ping(); err == nil || !strings.Contains(err.Error(), "is down") {
			t.Fatalf("a write just before the cool-down's end: %v", err)
		}
		synctest.Wait()
		if n := len(d.starts()); n != 3 {
			t.Fatalf("%d restarts during the cool-down, want none", n-3)
		}
		time.Sleep(time.Millisecond)
		_ = ping() // asks for one start: it may reach the new server before it dies, or not
		synctest.Wait()
		if err := ping(); err == nil || !strings.Contains(err.Error(), "is down") || !strings.Contains(err.Error(), "5 starts in a row") {
			t.Fatalf("a write after the cool-down's start died: %v, want down again", err)
		}
		if at := d.starts(); len(at) != 4 || at[3].Sub(down) != p.CoolDown {
			t.Fatalf("restarts at %v; want one more, %v after the proxy went down at %v", at, p.CoolDown, down)
		}
	})
}

// TestReviveVersionMismatch: a server that comes back speaking another protocol
// version is not used: one log line, and writes fail saying why.
func TestReviveVersionMismatch(t *testing.T) {
	f := newFixture(t, fast(), []string{"--reply"}, []string{"--reply", "--protocol-version", "2024-11-05"})
	f.session()
	f.kill()
	// Nothing was in flight, but the session's messages crossed: the relay is told.
	f.nextLost()
	var err error
	testutil.Eventually(t, "the proxy to be down", func() bool {
		err = f.write(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		return err != nil && strings.Contains(err.Error(), "is down")
	})
	if err == nil || !strings.Contains(err.Error(), `speaks protocol version "2024-11-05", not the "2025-06-18" the host negotiated`) {
		t.Fatalf("write: %v", err)
	}
	if n := strings.Count(f.logs.String(), "speaks another protocol version"); n != 1 {
		t.Fatalf("%d mismatch log lines:\n%s", n, f.logs.String())
	}
}

// TestReviveHandshakeTimeout: a new server that never answers the replayed
// initialize is stopped, and counts as one that did not come up.
func TestReviveHandshakeTimeout(t *testing.T) {
	p := fast()
	p.Handshake = 100 * time.Millisecond
	p.GiveUpAfter = 2
	f := newFixture(t, p, []string{"--reply"}, []string{}) // later starts answer nothing
	f.session()
	f.kill()
	f.nextLost()
	var err error
	testutil.Eventually(t, "the proxy to be down", func() bool {
		err = f.write(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		return err != nil && strings.Contains(err.Error(), "is down")
	})
	if err == nil || !strings.Contains(err.Error(), "did not answer initialize within 100ms") {
		t.Fatalf("write: %v", err)
	}
	if n := len(f.startPids()); n != 3 {
		t.Fatalf("%d starts, want the first and 2 that timed out", n)
	}
}

// TestReviveStateless: in the stateless era there is no handshake: the new server's
// first line is the host's next request.
func TestReviveStateless(t *testing.T) {
	f := newFixture(t, fast(), []string{"--reply"}, nil)
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	if err := f.write(req); err != nil {
		t.Fatal(err)
	}
	f.next()
	f.kill()
	f.nextLost()
	next := strings.Replace(req, `"id":1`, `"id":2`, 1)
	if err := f.write(next); err != nil {
		t.Fatal(err)
	}
	if a := f.next(); !strings.Contains(a, `"id":2,"result"`) {
		t.Fatalf("got %s", a)
	}
	data, _ := os.ReadFile(f.record)
	if want := req + "\n" + next + "\n"; string(data) != want {
		t.Fatalf("the servers received:\n%s\nwant:\n%s", data, want)
	}
}

// TestReviveWaitIsBounded: a write waits for a server being started at most
// Policy.Wait, then fails saying why.
func TestReviveWaitIsBounded(t *testing.T) {
	p := fast()
	p.Wait = 50 * time.Millisecond
	p.Handshake = 5 * time.Second
	f := newFixture(t, p, []string{"--reply"}, []string{}) // the revived server never answers
	f.session()
	f.kill()
	f.nextLost()
	began := time.Now()
	err := f.write(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if err == nil || !strings.Contains(err.Error(), "being restarted") {
		t.Fatalf("write: %v", err)
	}
	// Its upper bound is checked exactly on a fake clock
	// (TestReviveWaitIsBoundedInFakeTime): no wall-clock limit here.
	if d := time.Since(began); d < p.Wait {
		t.Fatalf("the write waited %v, want at least %v", d, p.Wait)
	}
}

// chanConn is a server in process whose messages the test sends on out; closing
// out is its death. It never answers by itself.
type chanConn struct {
	out    chan []byte
	closed chan struct{}
	once   sync.Once
}

func newChanConn() *chanConn {
	return &chanConn{out: make(chan []byte, 16), closed: make(chan struct{})}
}

func (c *chanConn) Capabilities() upstream.Capabilities { return upstream.Capabilities{} }

func (c *chanConn) Read() ([]byte, error) {
	select {
	case m, ok := <-c.out:
		if !ok {
			return nil, io.EOF
		}
		return m, nil
	case <-c.closed:
		return nil, io.EOF
	}
}
func (c *chanConn) Write([]byte) error { return nil }
func (c *chanConn) Close() error       { c.once.Do(func() { close(c.closed) }); return nil }

type silentDialer struct{}

func (silentDialer) Dial(context.Context) (upstream.Conn, error) { return newChanConn(), nil }

// TestReviveWaitIsBoundedInFakeTime: TestReviveWaitIsBounded on synctest's clock, so
// the bound is checked exactly, not between two wall-clock limits: a write to a
// server being started (it never answers the replayed initialize) fails after
// exactly Policy.Wait.
func TestReviveWaitIsBoundedInFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := DefaultPolicy()
		p.Wait = 50 * time.Millisecond
		p.Handshake = 5 * time.Second
		first := newChanConn()
		c := New(first, Options{Dialer: silentDialer{}, Name: "raw", IDPrefix: "bir:test:", Policy: p, Logger: slog.New(slog.DiscardHandler)})
		lost := make(chan string, 1)
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			for {
				_, err := c.Read()
				if re, ok := upstream.IsReplaced(err); ok {
					c.Settled()
					lost <- re.Reason
					continue
				}
				if err != nil {
					return
				}
			}
		}()
		defer func() { c.Close(); <-ended }() // on a failure too: the bubble must end empty
		// The host's session, which a new server is given again.
		if err := c.Write([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)); err != nil {
			t.Fatal(err)
		}
		first.out <- []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`)
		if err := c.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		close(first.out) // the server dies
		<-lost
		began := time.Now()
		err := c.Write([]byte(`{"jsonrpc":"2.0","id":3,"method":"ping"}`))
		if err == nil || !strings.Contains(err.Error(), "being restarted") {
			t.Fatalf("write: %v", err)
		}
		if d := time.Since(began); d != p.Wait {
			t.Fatalf("the write waited %v, want %v", d, p.Wait)
		}
	})
}

// TestReviveCloseDuringRestart: Close while a start is waiting out its handshake
// returns, Read ends, and no server is left.
func TestReviveCloseDuringRestart(t *testing.T) {
	p := fast()
	p.Handshake = time.Hour
	f := newFixture(t, p, []string{"--reply"}, []string{}) // it never answers initialize
	f.session()
	f.kill()
	f.nextLost()
	testutil.Eventually(t, "a second start", func() bool { return len(f.startPids()) >= 2 })
	closed := make(chan struct{})
	go func() { f.c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(deadline):
		t.Fatal("Close did not return")
	}
	select {
	case <-f.done:
		if !errors.Is(f.readErr, io.EOF) {
			t.Fatalf("Read ended with %v", f.readErr)
		}
	case <-time.After(deadline):
		t.Fatal("Read did not end")
	}
	if err := f.write(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
}

func TestDelay(t *testing.T) {
	p := Policy{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for _, tc := range []struct {
		neverUp, troubled int
		want              time.Duration
	}{{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {2, 0, 100 * time.Millisecond}, {0, 3, 200 * time.Millisecond}, {0, 5, 800 * time.Millisecond}, {0, 50, time.Second}} {
		if got := p.delay(max(tc.neverUp, tc.troubled)); got != tc.want {
			t.Errorf("delay(%d, %d) = %v, want %v", tc.neverUp, tc.troubled, got, tc.want)
		}
	}
}
