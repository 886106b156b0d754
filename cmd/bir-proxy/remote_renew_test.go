package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// renewServer is a Streamable HTTP server whose first session, s1, works until a
// tools/call of "expire" (404: the session is gone). Later sessions behave as
// the test says: hang, a request of theirs never answered.
type renewServer struct {
	// hang says, for a POST of method in session n (2, 3, ...; the initialize of
	// session n counts as n), whether it is never answered.
	hang func(n int, method string) bool
	// slow, when set, is how long a POST of method in session n waits before its answer.
	slow  func(n int, method string) time.Duration
	posts []string // "s<n> <body>", every POST after the first session's
	// huge, when set, is the size of a string in session n's initialize answer.
	huge func(n int) int
	// version, when set, is the protocol version session n's initialize answers.
	version func(n int) string
	inits   atomic.Int32

	mu      sync.Mutex
	expired map[string]bool
}

func (e *renewServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	e.mu.Lock()
	gone := e.expired[sid]
	e.mu.Unlock()
	if sid != "" && gone {
		http.Error(w, "session expired", http.StatusNotFound)
		return
	}
	if r.Method == http.MethodGet {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if r.Method == http.MethodDelete {
		w.WriteHeader(http.StatusOK)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	json.Unmarshal(body, &m)
	n := 0
	fmt.Sscanf(sid, "s%d", &n)
	if m.Method == "initialize" {
		n = int(e.inits.Add(1))
		sid = fmt.Sprintf("s%d", n)
	}
	if n > 1 {
		e.mu.Lock()
		e.posts = append(e.posts, sid+" "+string(body))
		e.mu.Unlock()
	}
	if n > 1 && e.slow != nil {
		if d := e.slow(n, m.Method); d > 0 {
			time.Sleep(d)
		}
	}
	if n > 1 && e.hang != nil && e.hang(n, m.Method) {
		<-r.Context().Done()
		return
	}
	switch {
	case m.ID == nil:
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "initialize":
		w.Header().Set("Mcp-Session-Id", sid)
		w.Header().Set("Content-Type", "application/json")
		if e.huge != nil && e.huge(n) > 0 {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"pad":"`, m.ID)
			chunk := strings.Repeat("a", 1<<16)
			for i := 0; i < e.huge(n)>>16; i++ {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			fmt.Fprintf(w, `","protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"renew","version":"1"}}}`)
			return
		}
		v := "2025-06-18"
		if e.version != nil {
			v = e.version(n)
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"renew","version":"1"}}}`, m.ID, v)
	case m.Params.Name == "expire" && sid == "s1":
		e.mu.Lock()
		e.expired[sid] = true
		e.mu.Unlock()
		http.Error(w, "session expired", http.StatusNotFound)
	case m.Method == "logging/setLevel":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"session %s"}]}}`, m.ID, sid)
	}
}

// startRenewing starts the proxy on e, has the host initialize and set a log level,
// and returns it.
func startRenewing(t *testing.T, e *renewServer) *testHost {
	t.Helper()
	e.expired = map[string]bool{}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	s := startProxy(t, nil, "--server", "renew", "--transport", "http", "--url", srv.URL+"/mcp")
	s.Send(hostInit)
	if a, _ := s.expect("0"); isError(a) {
		t.Fatalf("initialize: %s", a)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`)
	if a, _ := s.expect("1"); isError(a) {
		t.Fatalf("logging/setLevel: %s", a)
	}
	return s
}

// A held request is answered within Policy.Wait (5 s, docs/remote.md: "requests
// are held meanwhile, 5 s at most") even when the new session never answers
// what the proxy replays on it.
func testRenewHeldAnsweredWhileReplayHangs(t *testing.T, method string) {
	e := &renewServer{hang: func(n int, m string) bool { return m == method }}
	s := startRenewing(t, e)
	start := time.Now()
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"expire","arguments":{}}}`)
	a, _ := s.expect("2")
	took := time.Since(start)
	t.Logf("the refused call got, after %v: %.200s", took.Round(time.Millisecond), a)
	// 5 s held, plus slack for a loaded machine; the handshake bound is 30 s.
	if took > 15*time.Second {
		t.Errorf("the held call was answered after %v, want within the 5 s a request is held", took.Round(time.Millisecond))
	}
	s.Stdin.Close()
	s.ExitCode()
}

func TestRenewHeldCallAnsweredWhileReplayedInitializeHangs(t *testing.T) {
	t.Parallel()
	testRenewHeldAnsweredWhileReplayHangs(t, "initialize")
}

func TestRenewHeldCallAnsweredWhileReplayedSetLevelHangs(t *testing.T) {
	t.Parallel()
	testRenewHeldAnsweredWhileReplayHangs(t, "logging/setLevel")
}

// TestRenewFloodOfCallsOnAnAlwaysExpiringServer: a server that 404s every request
// carrying its session id, while the host keeps 2 or 8 calls in flight, or queues
// 1,000 at once. Every call gets exactly one answer, the initialize POSTs stay few
// and the proxy's memory bounded.
func TestRenewFloodOfCallsOnAnAlwaysExpiringServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		total, window int
	}{{"inflight2", 60, 2}, {"inflight8", 200, 8}, {"queued1000", 1000, 1000}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, inits := getFourOhFourServer(t, true)
			s := startProxy(t, nil, "--server", "expiring", "--url", url, "--transport", "http")
			s.Send(hostInit)
			if a, _ := s.expect("0"); isError(a) {
				t.Fatalf("initialize: %s", a)
			}
			s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			var answered atomic.Int32
			more := make(chan struct{}, tc.total)
			sent := make(chan error, 1)
			go func() {
				var b strings.Builder
				for i := 0; i < tc.total; i++ {
					for i-int(answered.Load()) >= tc.window {
						select {
						case <-more:
						case <-time.After(time.Second):
						}
					}
					b.Reset()
					fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"x","arguments":{}}}`+"\n", 100+i)
					if _, err := io.WriteString(s.Stdin, b.String()); err != nil {
						sent <- err
						return
					}
				}
				sent <- nil
			}()
			seen := map[string]int{}
			errs := 0
			for int(answered.Load()) < tc.total {
				msg, err := s.out.Read()
				if err != nil {
					t.Fatalf("after %d answers: %v (stderr: %s)", answered.Load(), err, s.Stderr.String())
				}
				id, ok := jsonID(msg)
				if !ok {
					continue
				}
				if seen[id]++; seen[id] > 1 {
					t.Fatalf("call %s answered twice: %s", id, msg)
				}
				if isError(string(msg)) {
					errs++
				}
				answered.Add(1)
				more <- struct{}{}
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			peak := procStatusKB(t, s.Cmd.Process.Pid, "VmHWM")
			s.Stdin.Close()
			s.ExitCode()
			for {
				msg, err := s.out.Read()
				if err != nil {
					break
				}
				if id, ok := jsonID(msg); ok && seen[id] > 0 {
					t.Fatalf("call %s answered twice, at exit: %s", id, msg)
				}
			}
			t.Logf("%d calls, %d errors, %d initialize POSTs, peak RSS %d KiB", tc.total, errs, inits.Load(), peak)
			if n := inits.Load(); n > 8 {
				t.Errorf("%d initialize POSTs, want at most 8", n)
			}
			if peak > 200<<10 {
				t.Errorf("peak RSS %d KiB, want under 200 MiB", peak)
			}
		})
	}
}

// TestRenewStopsDuringBackoff: SIGTERM, or the host closing stdin, while the proxy
// backs off between new sessions of a server that 404s them all, or waits out its
// cool-down: the proxy exits at once.
func TestRenewStopsDuringBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		wait   time.Duration // after the first 404
		signal bool
	}{{"sigterm-backoff", 700 * time.Millisecond, true}, {"stdin-backoff", 700 * time.Millisecond, false},
		{"sigterm-cooldown", 0, true}, {"stdin-cooldown", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, _ := getFourOhFourServer(t, true)
			s := startProxy(t, nil, "--server", "expiring", "--url", url, "--transport", "http")
			s.Send(hostInit)
			s.expect("0")
			s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{}}}`)
			if tc.wait > 0 {
				time.Sleep(tc.wait)
			} else {
				testutil.Eventually(t, "the proxy to give up new sessions", func() bool {
					return strings.Contains(s.Stderr.String(), "giving up starting new sessions")
				})
			}
			start := time.Now()
			if tc.signal {
				s.Cmd.Process.Signal(syscall.SIGTERM)
			} else {
				s.Stdin.Close()
			}
			code := s.ExitCode()
			took := time.Since(start)
			t.Logf("exit %d after %v", code, took.Round(time.Millisecond))
			if took > 5*time.Second {
				t.Errorf("the proxy took %v to exit", took)
			}
		})
	}
}

// TestRenewRefusesAnotherProtocolVersion: the new session negotiates another protocol
// version than the host's. The host's refused call gets an error saying so, at once
// rather than after the handshake bound, and the proxy does not loop.
func TestRenewRefusesAnotherProtocolVersion(t *testing.T) {
	t.Parallel()
	e := &renewServer{}
	e.version = func(n int) string {
		if n > 1 {
			return "2025-03-26"
		}
		return "2025-06-18"
	}
	s := startRenewing(t, e)
	start := time.Now()
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"expire","arguments":{}}}`)
	a, _ := s.expect("2")
	t.Logf("after %v: %.300s", time.Since(start).Round(time.Millisecond), a)
	if !isError(a) {
		t.Errorf("the call got %s, want an error", a)
	}
	s.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{}}}`)
	a, _ = s.expect("3")
	t.Logf("the next call: %.300s; %d initialize POSTs", a, e.inits.Load())
	if n := e.inits.Load(); n > 8 {
		t.Errorf("%d initialize POSTs", n)
	}
	s.Stdin.Close()
	s.ExitCode()
}

// TestRenewHugeInitializeAnswer: the new session answers the replayed initialize with
// a 512 MiB body (over the 256 MiB --max-message). The proxy's memory stays about the
// cap, and the host's refused call is answered on the session after.
func TestRenewHugeInitializeAnswer(t *testing.T) {
	t.Parallel()
	e := &renewServer{huge: func(n int) int {
		if n == 2 {
			return 512 << 20
		}
		return 0
	}}
	s := startRenewing(t, e)
	start := time.Now()
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"expire","arguments":{}}}`)
	a, _ := s.expect("2")
	peak := procStatusKB(t, s.Cmd.Process.Pid, "VmHWM")
	t.Logf("after %v, peak RSS %d KiB, %d initialize POSTs: %.300s", time.Since(start).Round(time.Millisecond), peak, e.inits.Load(), a)
	if peak > 320<<10 {
		t.Errorf("peak RSS %d KiB, want under 320 MiB", peak)
	}
	s.Stdin.Close()
	s.ExitCode()
}

// TestRenewHeldCallCancelledIsNotRun: the session refuses a call (404); while the new
// session is being set up the host cancels that call. The new session must not run
// it: the host gave up on it.
func TestRenewHeldCallCancelledIsNotRun(t *testing.T) {
	t.Parallel()
	e := &renewServer{slow: func(n int, m string) time.Duration {
		if m == "initialize" {
			return 1500 * time.Millisecond
		}
		return 0
	}}
	s := startRenewing(t, e)
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"expire","arguments":{}}}`)
	time.Sleep(500 * time.Millisecond) // refused, held: the new session is being set up
	s.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"user"}}`)
	s.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{}}}`)
	a, _ := s.expect("3")
	t.Logf("the next call: %.200s", a)
	s.Stdin.Close()
	s.ExitCode()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.posts {
		if strings.Contains(p, `"name":"expire"`) {
			t.Errorf("the new session ran the call the host cancelled: %s\nall: %q", p, e.posts)
		}
	}
}

// TestRenewStopsDuringAHungHandshake: the host leaves (stdin closed, or SIGTERM)
// while a new session's replayed initialize, or replayed logging/setLevel, is
// unanswered: the proxy exits at once, not after the 30 s handshake bound.
func TestRenewStopsDuringAHungHandshake(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"initialize", "logging/setLevel"} {
		for _, signal := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sigterm=%v", strings.ReplaceAll(method, "/", "-"), signal), func(t *testing.T) {
				t.Parallel()
				e := &renewServer{hang: func(n int, m string) bool { return m == method }}
				s := startRenewing(t, e)
				s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"expire","arguments":{}}}`)
				time.Sleep(time.Second) // the new session's handshake hangs
				start := time.Now()
				if signal {
					s.Cmd.Process.Signal(syscall.SIGTERM)
				} else {
					s.Stdin.Close()
				}
				code := s.ExitCode()
				took := time.Since(start)
				t.Logf("exit %d after %v", code, took.Round(time.Millisecond))
				if took > 5*time.Second {
					t.Errorf("the proxy took %v to exit", took)
				}
			})
		}
	}
}

// TestRenewHostileResponses: the session's 404 carries terminal escapes and CR/LF
// in its body and headers, and a 64 KiB header; the new session's initialize is
// redirected to another origin, or names its session with an escape in it. Nothing
// reaches the other origin, nothing raw reaches the host or stderr, and the host's
// call is answered once.
func TestRenewHostileResponses(t *testing.T) {
	t.Parallel()
	evil := "\x1b[2J\x1b[31mFAKE\rlevel=ERROR msg=pwned\x1b]0;title\x07"
	c1 := "\u009b2J\u009b31mFAKE" // C1 CSI: what net/http lets through in a header
	for _, how := range []string{"redirect", "escaped-id"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			sink := startRawSink(t)
			var inits atomic.Int32
			srv := startRawServer(t, func(r *rawReq, w *bufio.Writer, done <-chan struct{}) {
				sid := r.Header.Get("Mcp-Session-Id")
				method := rpcMethod(r.Body)
				switch {
				case r.Method == "GET":
					writeResp(w, "405 Method Not Allowed", nil, "")
				case r.Method == "DELETE":
					writeResp(w, "200 OK", nil, "")
				case method == "initialize" && inits.Add(1) > 1 && how == "redirect":
					writeResp(w, "307 Temporary Redirect", []string{"Location: " + sink.URL + "/mcp"}, "")
				case method == "initialize":
					id := "s1"
					if inits.Load() > 1 {
						id = "s2" + c1
					}
					writeResp(w, "200 OK", []string{"Content-Type: application/json", "Mcp-Session-Id: " + id},
						`{"jsonrpc":"2.0","id":`+rpcID(r.Body)+`,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"`+strings.ReplaceAll(evil, "\x1b", `\u001b`)[:20]+`","version":"1"}}}`)
				case rpcID(r.Body) == "":
					writeResp(w, "202 Accepted", nil, "")
				case sid == "s1" && strings.Contains(string(r.Body), "expire"):
					writeResp(w, "404 Not Found", []string{"X-Evil: " + c1, "X-Big: " + strings.Repeat("b", 64<<10)}, evil+"\r\n"+evil)
				default:
					writeResp(w, "200 OK", []string{"Content-Type: application/json"},
						`{"jsonrpc":"2.0","id":`+rpcID(r.Body)+`,"result":{"content":[]}}`)
				}
			})
			s := startProxy(t, nil, "--server", "hostile", "--log-level", "debug", "--transport", "http", "--url", srv.URL+"/mcp")
			s.Send(hostInit)
			if a, _ := s.expect("0"); isError(a) {
				t.Fatalf("initialize: %s", a)
			}
			s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"expire","arguments":{}}}`)
			a, _ := s.expect("2")
			t.Logf("the call got %.300s", a)
			s.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{}}}`)
			a, _ = s.expect("3")
			t.Logf("the next call got %.300s", a)
			s.Stdin.Close()
			s.ExitCode()
			checkNothingReached(t, sink)
			if e := s.Stderr.String(); strings.ContainsAny(e, "\x1b\x07\r\u009b") {
				i := strings.IndexAny(e, "\x1b\x07\r\u009b")
				t.Errorf("stderr has a raw control character: %q", e[max(0, i-200):min(len(e), i+100)])
			}
		})
	}
}

// TestRenewPoisonCallIsAnsweredWhileOthersServe: a server that 404s one tool's call
// (the session "ends" there) in every session, and serves the others. A call the
// sessions refuse unrun is carried to the next session, and the next; meanwhile the
// host's other calls, served, keep each session from counting as one that ended at
// once. The carried call must still be answered, within a bound.
func TestRenewPoisonCallIsAnsweredWhileOthersServe(t *testing.T) {
	t.Parallel()
	var inits atomic.Int32
	var mu sync.Mutex
	expired := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get("Mcp-Session-Id")
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		gone := expired[sid]
		if sid != "" && strings.Contains(string(body), "poison") {
			expired[sid], gone = true, true
		}
		mu.Unlock()
		switch {
		case r.Method == http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.Method == http.MethodDelete:
		case sid != "" && gone:
			http.Error(w, "session not found", http.StatusNotFound)
		case rpcMethod(body) == "initialize":
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", inits.Add(1)))
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+rpcID(body)+`,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"p","version":"1"}}}`)
		case rpcID(body) == "":
			w.WriteHeader(http.StatusAccepted)
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+rpcID(body)+`,"result":{"content":[]}}`)
		}
	}))
	t.Cleanup(srv.Close)
	s := startProxy(t, nil, "--server", "poison", "--transport", "http", "--url", srv.URL+"/mcp")
	s.Send(hostInit)
	s.expect("0")
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"poison","arguments":{}}}`)
	stop := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			if _, err := fmt.Fprintf(s.Stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ok","arguments":{}}}`+"\n", 100+i); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	answered := make(chan string, 1)
	go func() {
		for {
			msg, err := s.out.Read()
			if err != nil {
				close(answered)
				return
			}
			if id, _ := jsonID(msg); id == "2" {
				answered <- string(msg)
			}
		}
	}()
	select {
	case a := <-answered:
		t.Logf("the poison call got, after %v and %d initialize POSTs: %.300s", time.Since(start).Round(time.Millisecond), inits.Load(), a)
	case <-time.After(20 * time.Second):
		t.Errorf("the poison call unanswered after 20 s; %d initialize POSTs", inits.Load())
	}
	close(stop)
	s.Stdin.Close()
	s.ExitCode()
}
