package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// farRetryServer is a Streamable HTTP server whose tools/call answer stream sends a
// priming event asking for "retry: 999999999999" (31 years) and ends before the
// answer; the resumption GET (Last-Event-ID) carries it.
func farRetryServer(t *testing.T) (url string, resumes *atomic.Int32) {
	resumes = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "":
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.Method == http.MethodGet:
			resumes.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[]}}\n\n")
		case strings.Contains(string(body), `"initialize"`):
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"far","version":"1"}}}`)
		case strings.Contains(string(body), `"tools/call"`):
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: e1\nretry: 999999999999\n\n")
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", resumes
}

// TestFarRetryStillAnswersTheHost: a stream that breaks after asking for a 31-year
// retry was resumed after 31 years, the host's call unanswered until then. The retry
// is capped at 30 s: the call is resumed and answered (within testutil.Guard).
func TestFarRetryStillAnswersTheHost(t *testing.T) {
	t.Parallel()
	url, resumes := farRetryServer(t)
	s := startProxy(t, nil, "--server", "far", "--url", url, "--transport", "http")
	s.Send(hostInit)
	if a, _ := s.expect("0"); isError(a) {
		t.Fatalf("initialize: %s", a)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{}}}`)
	if a, _ := s.expect("2"); isError(a) || !strings.Contains(a, `"result"`) {
		t.Fatalf("the call got %s, want its answer from the resumed stream", a)
	}
	if n := resumes.Load(); n != 1 {
		t.Fatalf("%d resumptions, want 1", n)
	}
	s.end()
}
