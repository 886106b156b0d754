package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// expiringServer is a scripted Streamable HTTP (session era) server. Sessions are
// s1, s2, ...; each one's GET stream carries one request of the server's own to the
// host ("roots/list", id "r<n>"). A tools/call of "slow" is answered never (its event
// stream stays open); a tools/call of "expire" on s1 ends that session: it and every
// later request for it get 404.
type expiringServer struct {
	mu      sync.Mutex
	n       int                 // the current session
	expired map[string]bool     // session ids that 404
	posts   map[string][]string // bodies by session id
	slowing chan struct{}       // gets a value when a slow call's stream is open
	slow    chan struct{}       // closed when the session of the slow calls expires
}

func (e *expiringServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	e.mu.Lock()
	gone := e.expired[sid]
	e.mu.Unlock()
	if sid != "" && gone {
		http.Error(w, "session expired", http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"r%s\",\"method\":\"roots/list\"}\n\n", strings.TrimPrefix(sid, "s"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	case http.MethodDelete:
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
	e.mu.Lock()
	if m.Method == "initialize" {
		e.n++
		sid = fmt.Sprintf("s%d", e.n)
	}
	e.posts[sid] = append(e.posts[sid], string(body))
	e.mu.Unlock()
	switch {
	case m.ID == nil:
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "initialize":
		w.Header().Set("Mcp-Session-Id", sid)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"exp","version":"1"}}}`, m.ID)
	case m.Params.Name == "slow":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		e.slowing <- struct{}{}
		<-r.Context().Done()
	case m.Params.Name == "expire" && sid == "s1":
		// The first session ends here: this request is refused (404), as is every
		// later one for s1; the slow call's stream stays open, as a server that
		// forgot the session may leave it.
		e.mu.Lock()
		e.expired[sid] = true
		e.mu.Unlock()
		http.Error(w, "session expired", http.StatusNotFound)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"session %s"}]}}`, m.ID, sid)
	}
}

// TestExpiredSessionIsSettledByTheRelay: a Streamable HTTP server's session expires
// (404) with a tools/call pending on it and its own request to the host unanswered. The
// pending call gets an error and is reported upstream_lost, as for any server that went
// away; the call the 404 refused (never run) goes to the new session and is answered
// there; the host's late answer to the old session's request is dropped, not POSTed to
// the new session.
func TestExpiredSessionIsSettledByTheRelay(t *testing.T) {
	t.Parallel()
	e := &expiringServer{expired: map[string]bool{}, posts: map[string][]string{}, slowing: make(chan struct{}, 4)}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	state := t.TempDir()
	s := startProxyIn(t, t.TempDir(), []string{"BIR_OFF=0", "XDG_STATE_HOME=" + state, "BIR_RECORDER_URL="},
		"--server", "exp", "--log-level", "debug", "--transport", "http", "--url", srv.URL+"/mcp")
	s.Send(initializeReq)
	s.expect("1")
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.expect(`"r1"`)
	s.Send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	// The slow call is under way on s1 before s1 expires (sent together, the server
	// could take the expiring call first and refuse the slow one too: never run, it
	// would then rightly go to the new session).
	select {
	case <-e.slowing:
	case <-testutil.Context(t).Done():
		t.Fatal("the slow call never reached the server")
	}
	s.Send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"expire","arguments":{}}}`)
	answers := map[string]string{}
	for len(answers) < 2 {
		msg := s.recv()
		if id, ok := jsonID([]byte(msg)); ok && (id == "5" || id == "6") {
			answers[id] = msg
		}
	}
	if !isError(answers["5"]) || !strings.Contains(answers["5"], "session expired") {
		t.Errorf("the call pending on the expired session got %s", answers["5"])
	}
	if !strings.Contains(answers["6"], "session s2") {
		t.Errorf("the call the expired session refused got %s, want the new session's answer", answers["6"])
	}
	// The host answers the old session's request late, then calls on the new session.
	s.Send(`{"jsonrpc":"2.0","id":"r1","result":{"roots":[]}}`)
	s.Send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if a, _ := s.expect("7"); !strings.Contains(a, "session s2") {
		t.Fatalf("the next call got %s, want the new session's answer", a)
	}
	s.Stdin.Close()
	s.ExitCode()
	e.mu.Lock()
	second := strings.Join(e.posts["s2"], "\n")
	e.mu.Unlock()
	if strings.Contains(second, `"id":"r1"`) {
		t.Errorf("the host's late answer to the expired session's request reached the new one:\n%s", second)
	}
	outcomes := map[string]string{}
	for tool, o := range journalByTool(t, filepath.Join(state, "bir-proxy", "journal", "exp.jsonl")) {
		outcomes[tool] = o
	}
	if outcomes["slow"] != "upstream_lost" || outcomes["expire"] != "ok" || outcomes["echo"] != "ok" {
		t.Errorf("journal outcomes by tool %v, want slow upstream_lost, expire and echo ok", outcomes)
	}
}
