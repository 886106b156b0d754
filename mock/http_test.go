package mock

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
)

// TestHTTPAnswersAsStdio: over Streamable HTTP the answers are stdio's, a
// notification gets 202, a foreign Origin 403, a GET 405.
func TestHTTPAnswersAsStdio(t *testing.T) {
	m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{call(1, "echo", `{"a":1}`, `{"r": 1}`)}}, Options{})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	post := func(body, origin string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, got := post(toolsCall("7", "echo", `{"a":1.0}`), ""); code != 200 || got != `{"jsonrpc":"2.0","id":7,"result":{"r": 1}}` {
		t.Errorf("tools/call: %d %s", code, got)
	}
	if code, got := post(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`, "http://localhost:3000"); code != 200 || got != `[{"jsonrpc":"2.0","id":1,"result":{}}]` {
		t.Errorf("a batch: %d %s", code, got)
	}
	if code, _ := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, ""); code != 202 {
		t.Errorf("a notification: %d", code)
	}
	if code, _ := post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "https://evil.example"); code != 403 {
		t.Errorf("a foreign origin: %d", code)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/mcp", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
}
