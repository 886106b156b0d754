package oauth

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// A metadata GET met by a transient failure (503, 429, 502, 504) is tried again, up to
// twice: a sign-in does not fail on an authorization server's passing hiccup. A 500
// or a 4xx is not tried again.
func TestDiscoveryRetriesTransientFailures(t *testing.T) {
	for _, c := range []struct {
		fails   int // answers before the document
		status  int
		ok      bool
		tries   int64
		wantErr string
	}{
		{1, http.StatusServiceUnavailable, true, 2, ""},
		{2, http.StatusTooManyRequests, true, 3, ""},
		{3, http.StatusBadGateway, false, 3, "HTTP 502"},
		{1, http.StatusInternalServerError, false, 1, "HTTP 500"},
	} {
		var n atomic.Int64
		var srv *httptest.Server
		srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if int(n.Add(1)) <= c.fails {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(c.status)
				return
			}
			fmt.Fprintf(w, `{"resource":%q,"authorization_servers":["https://as.example"]}`, srv.URL+"/mcp")
		}))
		m, err := discoverResource(testutil.Context(t), srv.Client(), srv.URL+"/mcp", srv.URL+"/prm")
		srv.Close()
		if c.ok != (err == nil && m != nil) || n.Load() != c.tries || (c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr))) {
			t.Errorf("%d × %d: %v, %v after %d GETs (want %d)", c.fails, c.status, m, err, n.Load(), c.tries)
		}
	}
}

// A connection refused is tried again; the error said is the last try's.
func TestDiscoveryRetriesARefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = discoverResource(testutil.Context(t), &http.Client{}, "http://"+addr+"/mcp", "http://"+addr+"/prm")
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("%v", err)
	}
}
