package mock

import (
	"context"
	"io"
	"net"
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

// TestHTTPBodiesAreBounded: a request whose body does not come (slow-loris) is
// dropped at bodyTimeout, and the bodies read at once are bounded together (each
// was 256 MiB, however many clients): past maxHeld a request gets 503.
func TestHTTPBodiesAreBounded(t *testing.T) {
	m := New([]*cassette.Header{sessionHeader()}, nil, Options{})
	m.bodyTimeout = 500 * time.Millisecond
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()

	// A body announced and never sent.
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("a body that never came kept its connection: %v", err)
	}

	// One body being read holds 800 KB of the 1 MiB; another of 800 KB is refused.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m2 := New([]*cassette.Header{sessionHeader()}, nil, Options{})
	m2.maxHeld = 1 << 20
	srv2 := httptest.NewServer(m2.Handler())
	defer srv2.Close()
	ping := func(n int) string {
		return `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"` + strings.Repeat("p", n) + `"}}`
	}
	pr, pw := io.Pipe()
	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv2.URL, pr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	big := ping(800 << 10)
	half := len(big) - 10
	if _, err := io.WriteString(pw, big[:half]); err != nil {
		t.Fatal(err)
	}
	for m2.held.Load() < int64(half) { // the first body's bytes are counted
		if ctx.Err() != nil {
			t.Fatal("the first body was not read")
		}
		time.Sleep(time.Millisecond)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv2.URL, strings.NewReader(big))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	code := resp.StatusCode
	if code != http.StatusServiceUnavailable {
		t.Errorf("a second body past the bound: %d, want 503", code)
	}
	io.WriteString(pw, big[half:])
	pw.Close()
	if got := <-first; got != 200 {
		t.Errorf("the first body: %d, want 200", got)
	}
}
