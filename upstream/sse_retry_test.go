package upstream

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestSSERetryIsCapped: the reader takes a stream's retry field as it is only up to
// maxRetry (30 s); "retry: 999999999999" (31 years) was honoured as is.
func TestSSERetryIsCapped(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"retry: 999999999999\n\n": maxRetry,
		"retry: 30001\n\n":        maxRetry,
		"retry: 29999\n\n":        29999 * time.Millisecond,
		"retry: 1500\n\n":         1500 * time.Millisecond,
	} {
		sr := newSSEReader(strings.NewReader(in), 0)
		for {
			if _, err := sr.Next(); err != nil {
				break
			}
		}
		if sr.Retry != want {
			t.Errorf("%q: Retry %v, want %v", in, sr.Retry, want)
		}
	}
}

// retryServer is a Streamable HTTP server whose tools/call stream sends one priming
// event (an id, and the retry it asks for) and ends; the resumption GET then carries
// the answer. resumedAt says when that GET came.
type retryServer struct {
	retry string

	mu        sync.Mutex
	brokeAt   time.Time
	resumedAt time.Time
}

func (s *retryServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil { // a client-side GET (handlerTransport) has none
		body, _ = io.ReadAll(r.Body)
	}
	switch {
	case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "":
		w.WriteHeader(http.StatusMethodNotAllowed) // no standalone GET stream
	case r.Method == http.MethodGet:
		s.mu.Lock()
		s.resumedAt = time.Now()
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[]}}\n\n")
	case strings.Contains(string(body), `"initialize"`):
		w.Header().Set("Mcp-Session-Id", "s1")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"r","version":"1"}}}`)
	case strings.Contains(string(body), `"tools/call"`):
		s.mu.Lock()
		s.brokeAt = time.Now()
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: e1\nretry: "+s.retry+"\n\n") // then the stream ends
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

type handlerTransport = testutil.HandlerTransport

// TestBrokenStreamResumesWithinTheRetryCap: a stream that asks for a 31-year retry
// and breaks before the answer is resumed after 30 s (fake time), and the host gets
// its answer; before, the request waited the 31 years.
func TestBrokenStreamResumesWithinTheRetryCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &retryServer{retry: "999999999999"}
		cl := dial(t, Remote{URL: "http://fake.invalid/mcp", Transport: TransportHTTP, Client: &http.Client{Transport: handlerTransport{H: srv}}})
		cl.write(initReq)
		if m := <-cl.msgs; !strings.Contains(string(m), `"id":0`) {
			t.Fatalf("initialize: %s", m)
		}
		cl.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		cl.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{}}}`)
		select {
		case m := <-cl.msgs:
			if !strings.Contains(string(m), `"id":2,"result"`) {
				t.Fatalf("the call got %s, want its answer from the resumed stream", m)
			}
		case <-time.After(365 * 24 * time.Hour):
			t.Fatal("no answer to the call within a (fake) year")
		}
		srv.mu.Lock()
		waited := srv.resumedAt.Sub(srv.brokeAt)
		srv.mu.Unlock()
		if waited < maxRetry || waited > maxRetry+time.Second {
			t.Fatalf("the stream was resumed after %v, want the %v cap", waited, maxRetry)
		}
	})
}
