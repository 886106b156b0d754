package upstream

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFailedRequestsLeaveNothingInSetup: a request whose POST fails is answered by the
// reader (UnansweredError), never by a server message, so Setup, which waits for the
// answers to the host's tools/list, setLevel, subscribe and initialize requests, must
// be told it will not come: otherwise every failed one stays in Setup for the whole
// session (a host polling tools/list against a server that answers 500 grows the
// proxy without bound), and Setup reads every later message the server sends.
func TestFailedRequestsLeaveNothingInSetup(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	cl := dial(t, Remote{URL: srv.URL, Transport: TransportHTTP, Name: "broken"})
	const n = 50
	for i := range n {
		cl.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i))
		if got := cl.next(); !strings.Contains(got, fmt.Sprintf(`"id":%d,"error"`, i)) || !strings.Contains(got, "HTTP 500") {
			t.Fatalf("answer %d: %s", i, got)
		}
	}
	if w := cl.c.setup.waiting.Load(); w != 0 {
		t.Fatalf("Setup still waits for %d answers after %d failed requests were answered", w, n)
	}
}
