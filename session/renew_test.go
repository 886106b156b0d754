package session

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/upstream"
)

// The renew policy: a remote server's sessions replaced behind one Conn, as a child
// is (upstream/end.go says how a session ends).

// sessions is a Conn over a remote server's sessions, read as the relay reads it:
// each replacement settled at once, each request the Conn gives up on answered with
// an error (as the relay answers it), everything else in msgs.
type sessions struct {
	t    *testing.T
	c    *Conn
	msgs chan []byte
	lost chan string // ReplacedError reasons
	logs *testutil.SyncBuffer
	done chan struct{}

	mu      sync.Mutex
	pending map[string][]byte // the host's requests written and not answered, by IDKey
}

func newSessions(t *testing.T, r upstream.Remote) *sessions {
	t.Helper()
	if r.Name == "" {
		r.Name = "fixture"
	}
	s := &sessions{t: t, msgs: make(chan []byte, 1024), lost: make(chan string, 64), logs: &testutil.SyncBuffer{}, done: make(chan struct{}),
		pending: map[string][]byte{}}
	r.Logger = slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r.CloseGrace = 500 * time.Millisecond
	d, err := r.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	first, err := d.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s.c = New(first, Options{Dialer: d, Name: r.Name, IDPrefix: "bir:test:", Policy: RenewPolicy(), Logger: r.Logger})
	go func() {
		defer close(s.done)
		for {
			msg, err := s.c.Read()
			if re, ok := upstream.IsReplaced(err); ok {
				// As the relay does: the requests in flight but those held for the
				// next session (Held) get an error, then it says it settled.
				held := map[string]bool{}
				for _, m := range s.c.Held() {
					jsonlex.EachRPC(m, func(_ []byte, f jsonlex.Fields) { held[jsonlex.IDKey(f.ID)] = true })
				}
				s.inFlight(held, re.Reason)
				s.c.Settled()
				s.lost <- re.Reason
				continue
			}
			if ue, ok := upstream.IsUndelivered(err); ok {
				for _, m := range ue.Msgs {
					jsonlex.EachRPC(m, func(_ []byte, f jsonlex.Fields) {
						s.msgs <- jsonlex.ErrorResponse(f.ID, -32000, ue.Reason)
					})
				}
				continue
			}
			if ue, ok := upstream.IsUnanswered(err); ok {
				for _, id := range ue.IDs {
					s.msgs <- jsonlex.ErrorResponse(id, -32000, ue.Reason)
				}
				continue
			}
			if err != nil {
				return
			}
			if f, ok := jsonlex.TopFields(msg); ok && f.IsResponse() {
				s.mu.Lock()
				delete(s.pending, jsonlex.IDKey(f.ID))
				s.mu.Unlock()
			}
			s.msgs <- msg
		}
	}()
	t.Cleanup(func() {
		s.c.Close()
		select {
		case <-s.done:
		case <-time.After(deadline):
			t.Error("Read did not end after Close")
		}
		if t.Failed() {
			t.Logf("log:\n%s", s.logs)
		}
	})
	return s
}

// inFlight answers the requests in flight but those held with reason, as the relay
// does when a server is replaced.
func (s *sessions) inFlight(held map[string]bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, id := range s.pending {
		if !held[k] {
			delete(s.pending, k)
			s.msgs <- jsonlex.ErrorResponse(id, -32000, reason)
		}
	}
}

func (s *sessions) write(msg string) {
	s.t.Helper()
	if f, ok := jsonlex.TopFields([]byte(msg)); ok && f.IsRequest() {
		s.mu.Lock()
		s.pending[jsonlex.IDKey(f.ID)] = f.ID
		s.mu.Unlock()
	}
	if err := s.c.Write([]byte(msg)); err != nil {
		s.t.Fatalf("Write: %v", err)
	}
}

// until returns the first message containing sub, skipping others.
func (s *sessions) until(sub string) string {
	s.t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case m := <-s.msgs:
			if strings.Contains(string(m), sub) {
				return string(m)
			}
		case <-timeout:
			s.t.Fatalf("no message with %q", sub)
			return ""
		}
	}
}

const remoteInit = `{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}},"jsonrpc":"2.0","id":0}`

func requests(t *testing.T, record string) []testutil.Recorded {
	return testutil.RecordedRequests(t, record)
}

// TestExpiredSessionIsRenewed: the server forgets the session (a 404 for its id) with
// 2 and 8 calls written at once. A new session is started with the host's handshake
// (its initialize with an id of ours, its log level), and every call the old session
// refused unrun is sent there, once, and answered; a call lost with the old session
// (in flight as it ended) gets an error naming the expiry and is not sent again. The
// host sees no answer to a request of ours.
func TestExpiredSessionIsRenewed(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawhttp")
	for _, n := range []int{2, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			record := filepath.Join(t.TempDir(), "requests.jsonl")
			url := testutil.HTTPFixture(t, raw, "--record", record)
			s := newSessions(t, upstream.Remote{URL: url, Transport: upstream.TransportHTTP})
			s.write(remoteInit)
			s.until(`"id":0`)
			s.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			s.write(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`)
			s.until(`"id":1`)
			s.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"expire","arguments":{}}}`)
			s.until(`"id":2`)
			calls := map[string]string{}
			for i := range n {
				id := strconv.Itoa(10 + i)
				calls[id] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"after":"expiry","n":%d}}}`, id, i)
				s.write(calls[id])
			}
			answers := map[string]string{}
			for len(answers) < n {
				select {
				case m := <-s.msgs:
					var a struct {
						ID json.RawMessage `json:"id"`
					}
					if json.Unmarshal(m, &a) != nil || calls[string(a.ID)] == "" {
						t.Fatalf("the host got %s", m)
					}
					answers[string(a.ID)] = string(m)
				case <-time.After(deadline):
					t.Fatalf("%d of %d calls answered", len(answers), n)
				}
			}
			lost := ""
			select {
			case lost = <-s.lost:
			default:
				t.Error("the relay was not told the session was replaced")
			}
			if !strings.Contains(lost, "session expired (HTTP 404)") || !strings.Contains(lost, "starting a new session") {
				t.Errorf("the replacement says %q", lost)
			}
			var inits, levels []testutil.Recorded
			ran := map[string][]string{} // call id → the sessions it was POSTed to
			for _, r := range requests(t, record) {
				switch {
				case strings.Contains(r.Body, `"initialize"`):
					inits = append(inits, r)
				case strings.Contains(r.Body, `"logging/setLevel"`):
					levels = append(levels, r)
				case strings.Contains(r.Body, `"echo"`):
					id := strings.SplitN(strings.SplitN(r.Body, `"id":`, 2)[1], ",", 2)[0]
					ran[id] = append(ran[id], r.Header["Mcp-Session-Id"])
				}
			}
			if len(inits) != 2 || len(levels) != 2 {
				t.Fatalf("want the handshake and log level replayed once: %d initialize, %d setLevel", len(inits), len(levels))
			}
			if want := strings.Replace(remoteInit, `"id":0`, `"id":"bir:test:1"`, 1); inits[1].Body != want {
				t.Errorf("replayed initialize\n got %s\nwant %s", inits[1].Body, want)
			}
			resent := 0
			for id, a := range answers {
				onS2 := 0
				for _, sid := range ran[id] {
					if sid == "s2" {
						onS2++
					}
				}
				switch {
				case strings.Contains(a, `"result"`) && onS2 == 1:
					resent++
				case strings.Contains(a, `"error"`) && strings.Contains(a, "session expired") && onS2 == 0:
					// lost with the session: in flight as it ended
				default:
					t.Errorf("call %s: answered %s, POSTed to sessions %q", id, a, ran[id])
				}
			}
			if resent == 0 {
				t.Error("no call went to the new session: the 404 refused at least the first")
			}
		})
	}
}

// TestLegacySessionLostIsRenewed: an HTTP+SSE server that drops its streams (a
// restart) loses the session; a new stream is opened and set up with the host's
// handshake, and the next call goes to it.
func TestLegacySessionLostIsRenewed(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawhttp")
	record := filepath.Join(t.TempDir(), "requests.jsonl")
	url := testutil.HTTPFixture(t, raw, "--record", record, "--legacy")
	s := newSessions(t, upstream.Remote{URL: url, Transport: upstream.TransportSSE})
	s.write(remoteInit)
	s.until(`"id":0`)
	s.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp, err := http.Post(strings.TrimSuffix(url, "/sse")+"/control?cmd=expire-all", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	testutil.Eventually(t, "the handshake to be replayed on a new stream", func() bool {
		inits := 0
		for _, r := range requests(t, record) {
			if strings.Contains(r.Body, `"initialize"`) {
				inits++
			}
		}
		return inits == 2
	})
	s.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"again":true}}}`)
	if got := s.until(`"id":1`); !strings.Contains(got, `again`) {
		t.Fatalf("after the stream was lost: %s", got)
	}
	for _, r := range requests(t, record) {
		if strings.Contains(r.Body, `"id":1,`) && !strings.Contains(r.Path, "sessionId=L2") {
			t.Errorf("the call went to %s, not the new session", r.Path)
		}
	}
}

// TestRenewalBacksOffAndGivesUp: a server that answers every GET with a session id
// with 404 expires each new session at once. In fake time the new sessions come
// 100 ms doubling apart, and after 5 of them the last is kept for requests, without
// a GET stream. Before, they came with no pause at all (~1,000 a second).
func TestRenewalBacksOffAndGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			inits []time.Time
		)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body []byte
			if r.Body != nil {
				body, _ = io.ReadAll(r.Body)
			}
			switch {
			case r.Method == http.MethodGet:
				w.WriteHeader(http.StatusNotFound)
			case strings.Contains(string(body), `"initialize"`):
				mu.Lock()
				inits = append(inits, time.Now())
				n := len(inits)
				mu.Unlock()
				id := strings.TrimSuffix(strings.SplitN(strings.SplitN(string(body), `"id":`, 2)[1], ",", 2)[0], "}")
				w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", n))
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"r","version":"1"}}}`)
			case strings.Contains(string(body), `"tools/call"`):
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)
			default:
				w.WriteHeader(http.StatusAccepted)
			}
		})
		s := newSessions(t, upstream.Remote{URL: "http://fake.invalid/mcp", Transport: upstream.TransportHTTP,
			Client: &http.Client{Transport: testutil.HandlerTransport{H: h}}})
		start := time.Now()
		s.write(remoteInit)
		<-s.msgs
		s.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		time.Sleep(29 * time.Second) // fake time: everything that would happen by then has
		synctest.Wait()
		mu.Lock()
		got := append([]time.Time(nil), inits...)
		mu.Unlock()
		if len(got) != 6 {
			t.Fatalf("%d initialize POSTs in the first %v, want the host's and 5 new sessions", len(got), time.Since(start))
		}
		// got[0] is the host's initialize; got[1] the first new session, at once.
		want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
		for i, w := range want {
			if gap := got[i+1].Sub(got[i]); gap != w {
				t.Errorf("initialize %d came %v after the one before, want %v", i+1, gap, w)
			}
		}
		// The last session is kept: the host's call is answered there, and no new
		// session comes after the cool-down either.
		s.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{}}}`)
		if a := s.until(`"id":2`); !strings.Contains(a, `"result"`) {
			t.Errorf("the call on the kept session got %s", a)
		}
		time.Sleep(31 * time.Second)
		synctest.Wait()
		mu.Lock()
		after := len(inits)
		mu.Unlock()
		if after != len(got) {
			t.Errorf("%d initialize POSTs after giving up, want none", after-len(got))
		}
		s.c.Close()
		<-s.done
	})
}
