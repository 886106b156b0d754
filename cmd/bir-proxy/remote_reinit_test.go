package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// getFourOhFourServer is a Streamable HTTP server that answers every GET carrying a
// session id with 404 (as if each new session expired at once) and everything else
// normally: initialize with a new session id each time, a tools/call with a result.
// With postsToo, every POST carrying a session id gets 404 as well.
func getFourOhFourServer(t *testing.T, postsToo bool) (url string, inits *atomic.Int32) {
	inits = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Header.Get("Mcp-Session-Id") != "" && (r.Method == http.MethodGet || postsToo):
			http.Error(w, "session not found", http.StatusNotFound)
		case r.Method == http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case strings.Contains(string(body), `"method":"initialize"`):
			n := inits.Add(1)
			id := strings.TrimSuffix(strings.SplitN(strings.SplitN(string(body), `"id":`, 2)[1], ",", 2)[0], "}")
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", n))
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"x","version":"1"}}}`)
		case strings.Contains(string(body), `"tools/call"`):
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", inits
}

// TestGetStream404DoesNotLoopReinitializing: a 404 on the GET stream started a new
// session at once, whose GET got a 404 again: ~1,000 initialize POSTs a second and
// 8.4-8.9 s of CPU in 12 s. Re-initialization now backs off (100 ms doubling) and
// gives up after 5 in a row, with a warning; the host's calls are still answered.
func TestGetStream404DoesNotLoopReinitializing(t *testing.T) {
	t.Parallel()
	url, inits := getFourOhFourServer(t, false)
	s := startProxy(t, nil, "--server", "expiring", "--url", url, "--transport", "http")
	s.Send(hostInit)
	if a, _ := s.expect("0"); isError(a) {
		t.Fatalf("initialize: %s", a)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	testutil.Eventually(t, "the proxy to give up re-initializing (or to loop)", func() bool {
		return strings.Contains(s.Stderr.String(), "giving up starting new sessions") || inits.Load() > 50
	})
	cpu := procCPU(t, s.Cmd.Process.Pid)
	got := inits.Load()
	// The host's initialize, then at most 5 new sessions.
	if got > 6 {
		t.Fatalf("%d initialize POSTs before giving up, want at most 6 (proxy CPU so far %v)", got, cpu)
	}
	// The loop is over: the host's call is answered on the last session, and no
	// initialize came in the meantime.
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{}}}`)
	if a, _ := s.expect("2"); isError(a) {
		t.Fatalf("the call got %s", a)
	}
	if n := inits.Load(); n != got {
		t.Fatalf("initialize POSTs went on after giving up: %d, then %d", got, n)
	}
	if cpu > 2*time.Second {
		t.Errorf("the proxy used %v of CPU, want little: it is waiting, not looping", cpu)
	}
	t.Logf("%d initialize POSTs, proxy CPU %v", got, cpu)
	s.end()
}

// TestSessionThatAlwaysExpiresAnswersTheHost: a server that answers 404 to everything
// carrying its session id. The host's call, sent while the proxy backs off, gets an
// error naming the cause, and the initialize POSTs stay few.
func TestSessionThatAlwaysExpiresAnswersTheHost(t *testing.T) {
	t.Parallel()
	url, inits := getFourOhFourServer(t, true)
	s := startProxy(t, nil, "--server", "expiring", "--url", url, "--transport", "http")
	s.Send(hostInit)
	if a, _ := s.expect("0"); isError(a) {
		t.Fatalf("initialize: %s", a)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	testutil.Eventually(t, "the proxy to give up re-initializing (or to loop)", func() bool {
		return strings.Contains(s.Stderr.String(), "giving up starting new sessions") || inits.Load() > 50
	})
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{}}}`)
	a, _ := s.expect("2")
	if !isError(a) || !strings.Contains(a, "HTTP 404") || !strings.Contains(a, "new sessions at once") {
		t.Fatalf("the call got %s, want an error naming the expiring sessions", a)
	}
	if n := inits.Load(); n > 6 {
		t.Fatalf("%d initialize POSTs, want at most 6", n)
	}
	s.end()
}
