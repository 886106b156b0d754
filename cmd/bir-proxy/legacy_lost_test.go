package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// legacyServer is a scripted HTTP+SSE (2024-11-05) server. Each GET /sse is a session:
// it sends the endpoint, answers initialize and tools/call on the stream, sends the
// host one request of its own ("roots/list", id "s<session>") after initialize, and
// ends the stream, answering nothing, when it gets a tools/call of tool "drop".
type legacyServer struct {
	mu       sync.Mutex
	sessions int
	posts    map[int][]string // the bodies POSTed to each session
	streams  map[int]chan string
	drop     map[int]chan struct{}
	// cut, when set, says which sessions' streams end right after the endpoint event.
	cut func(n int) bool
}

func (l *legacyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/sse":
		l.mu.Lock()
		l.sessions++
		n := l.sessions
		out := make(chan string, 16)
		drop := make(chan struct{})
		l.streams[n], l.drop[n] = out, drop
		l.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: endpoint\ndata: /messages?session=%d\n\n", n)
		w.(http.Flusher).Flush()
		if l.cut != nil && l.cut(n) {
			return
		}
		for {
			select {
			case m := <-out:
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
				w.(http.Flusher).Flush()
			case <-drop:
				return // the stream ends, and with it the session
			case <-r.Context().Done():
				return
			}
		}
	case r.Method == http.MethodPost && r.URL.Path == "/messages":
		var n int
		fmt.Sscanf(r.URL.Query().Get("session"), "%d", &n)
		body, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		l.posts[n] = append(l.posts[n], string(body))
		out, drop := l.streams[n], l.drop[n]
		l.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		json.Unmarshal(body, &m)
		switch {
		case m.Method == "initialize":
			out <- fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"legacy","version":"1"}}}`, m.ID)
			out <- fmt.Sprintf(`{"jsonrpc":"2.0","id":"s%d","method":"roots/list"}`, n)
		case m.Method == "tools/call" && m.Params.Name == "drop":
			close(drop)
		case m.Method == "tools/call":
			out <- fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"session %d"}]}}`, m.ID, n)
		}
	default:
		http.NotFound(w, r)
	}
}

// TestLegacySessionLostIsSettledByTheRelay: an HTTP+SSE server ends its event stream
// (and with it the session) while a tools/call is pending and its own request to the
// host is unanswered. The host gets an error for its call, the journal says
// upstream_lost (as for a stdio server that died), and the host's late answer to the
// old session's request is not POSTed to the new session, which serves the next call.
func TestLegacySessionLostIsSettledByTheRelay(t *testing.T) {
	t.Parallel()
	l := &legacyServer{posts: map[int][]string{}, streams: map[int]chan string{}, drop: map[int]chan struct{}{}}
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	state := t.TempDir()
	s := startProxyIn(t, t.TempDir(), []string{"BIR_OFF=0", "XDG_STATE_HOME=" + state, "BIR_RECORDER_URL="},
		"--server", "legacy", "--transport", "sse", "--url", srv.URL+"/sse")
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{"roots":{}},"clientInfo":{"name":"t","version":"0"}}}`)
	s.expect("1")
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if _, before := s.expect(`"s1"`); len(before) != 0 {
		t.Fatalf("unexpected messages before the server's request: %q", before)
	}
	s.Send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"drop","arguments":{}}}`)
	lost, _ := s.expect("5")
	if !isError(lost) || !strings.Contains(lost, "event stream ended") {
		t.Fatalf("the call pending when the session was lost got %s", lost)
	}
	// The host answers the old session's request late; then calls again.
	s.Send(`{"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}`)
	s.Send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if a, _ := s.expect("6"); !strings.Contains(a, "session 2") {
		t.Fatalf("the next call after the loss got %s, want the new session's answer", a)
	}
	s.Stdin.Close()
	s.ExitCode()
	l.mu.Lock()
	second := strings.Join(l.posts[2], "\n")
	l.mu.Unlock()
	if strings.Contains(second, `"id":"s1"`) {
		t.Errorf("the host's late answer to the lost session's request reached the new session:\n%s", second)
	}
	outcomes := journalByTool(t, filepath.Join(state, "bir-proxy", "journal", "legacy.jsonl"))
	if outcomes["drop"] != "upstream_lost" || outcomes["echo"] != "ok" {
		t.Errorf("journal outcomes by tool %v, want drop upstream_lost and echo ok", outcomes)
	}
}

// journalByTool reads a journal's outcome for each tool (the last call of it).
func journalByTool(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct{ Tool, Outcome string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("journal line %q: %v", sc.Text(), err)
		}
		out[r.Tool] = r.Outcome
	}
	return out
}

// TestLegacyStreamsEndingAtOnceDoNotLoop: after its first session ends, an HTTP+SSE
// server ends every new event stream right after its endpoint event. The new
// sessions back off and are given up on: the GETs stay few, and the host's call gets
// an error.
func TestLegacyStreamsEndingAtOnceDoNotLoop(t *testing.T) {
	t.Parallel()
	l := &legacyServer{posts: map[int][]string{}, streams: map[int]chan string{}, drop: map[int]chan struct{}{},
		cut: func(n int) bool { return n > 1 }}
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	s := startProxy(t, nil, "--server", "legacy", "--transport", "sse", "--url", srv.URL+"/sse")
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{"roots":{}},"clientInfo":{"name":"t","version":"0"}}}`)
	s.expect("1")
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.expect(`"s1"`)
	s.Send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"drop","arguments":{}}}`)
	s.expect("5")
	s.Send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	a, _ := s.expect("6")
	time.Sleep(3 * time.Second) // long enough for a loop to show
	l.mu.Lock()
	n := l.sessions
	l.mu.Unlock()
	t.Logf("the call got %.200s; %d event streams opened", a, n)
	if !isError(a) {
		t.Errorf("the call got %s, want an error", a)
	}
	if n > 8 {
		t.Errorf("%d event streams opened, want at most 8", n)
	}
	s.Stdin.Close()
	s.ExitCode()
}

// TestLegacyStreamsEndingFromTheStart: an HTTP+SSE server ends every event stream,
// the first too, right after its endpoint event. The host's initialize gets an
// answer, and the streams opened stay few.
func TestLegacyStreamsEndingFromTheStart(t *testing.T) {
	t.Parallel()
	l := &legacyServer{posts: map[int][]string{}, streams: map[int]chan string{}, drop: map[int]chan struct{}{},
		cut: func(int) bool { return true }}
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	s := startProxy(t, nil, "--server", "legacy", "--transport", "sse", "--url", srv.URL+"/sse")
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	a, _ := s.expect("1")
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	b, _ := s.expect("2")
	time.Sleep(3 * time.Second)
	l.mu.Lock()
	n := l.sessions
	l.mu.Unlock()
	t.Logf("initialize got %.200s; the call got %.200s; %d event streams opened", a, b, n)
	if !isError(a) || !isError(b) {
		t.Errorf("want errors, got %s and %s", a, b)
	}
	if n > 8 {
		t.Errorf("%d event streams opened, want at most 8", n)
	}
	s.Stdin.Close()
	s.ExitCode()
}
