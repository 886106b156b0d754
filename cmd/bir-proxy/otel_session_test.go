package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestOTelSpansCarryTheHTTPSessionID: over Streamable HTTP each span says the
// session the server named (mcp.session.id), from the Mcp-Session-Id of its
// initialize answer; the stdio transport has none.
func TestOTelSpansCarryTheHTTPSessionID(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	got := make(chan struct{}, 16)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if r.URL.Path == "/v1/traces" {
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
			got <- struct{}{}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`)) //nolint:errcheck // the proxy's business
	}))
	t.Cleanup(collector.Close)
	const sid = "sess-7f3a"
	srv := startRawServer(t, func(r *rawReq, w *bufio.Writer, done <-chan struct{}) {
		switch {
		case r.Method == "GET" || r.Method == "DELETE":
			writeResp(w, "405 Method Not Allowed", nil, "")
		case rpcMethod(r.Body) == "initialize":
			writeResp(w, "200 OK", []string{"Content-Type: application/json", "Mcp-Session-Id: " + sid},
				`{"jsonrpc":"2.0","id":`+rpcID(r.Body)+`,"result":`+rawInitResult+`}`)
		case rpcID(r.Body) == "":
			writeResp(w, "202 Accepted", nil, "")
		default:
			writeResp(w, "200 OK", []string{"Content-Type: application/json"},
				`{"jsonrpc":"2.0","id":`+rpcID(r.Body)+`,"result":{"content":[{"type":"text","text":"ok"}]}}`)
		}
	})
	s := startProxy(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
		"--server", "sess", "--url", srv.URL+"/mcp", "--transport", "http")
	s.Send(remoteInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if ans := s.recv(); !gjson.Get(ans, "result").Exists() {
		t.Fatalf("initialize: %s", ans)
	}
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if ans := s.recv(); gjson.Get(ans, "id").Int() != 1 {
		t.Fatalf("tools/call: %s", ans)
	}
	s.end() // the exit flushes what is queued
	testutil.Recv(t, got, "an export of spans")
	mu.Lock()
	all := strings.Join(bodies, "\n")
	mu.Unlock()
	if !strings.Contains(all, `"tools/call echo"`) {
		t.Fatalf("no tools/call span was exported:\n%.2000s", all)
	}
	if !strings.Contains(all, `"mcp.session.id"`) || !strings.Contains(all, `"`+sid+`"`) {
		t.Fatalf("no span carries mcp.session.id %s:\n%.2000s", sid, all)
	}
}
