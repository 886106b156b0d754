package oauth

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestRefreshStallHoldsNoOtherRequest: while a refresh waits on a token endpoint that
// does not answer, a request whose token is still valid goes at once with it; it
// does not queue behind the refresh (for up to requestTimeout each, in turn).
func TestRefreshStallHoldsNoOtherRequest(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	defer close(release)
	now := time.Now()
	c, _ := testClient(t, srv.URL, &Token{AccessToken: "A", RefreshToken: "R", Issued: now.Add(-time.Hour), Expiry: now.Add(20 * time.Second)})
	first := make(chan struct{})
	go func() {
		defer close(first)
		c.Header(context.Background())
	}()
	testutil.Recv(t, arrived, "the first request's refresh")
	h, err := c.Header(testutil.Context(t))
	if h != "Bearer A" || err != nil {
		t.Fatalf("Header = %q, %v; want the still valid token", h, err)
	}
	select {
	case <-first:
		t.Fatal("the second request waited for the first one's refresh to give up")
	default:
	}
}

// TestFailedRefreshIsNotRetriedByEveryRequest: a refresh that failed (the token
// endpoint answered 503) is not tried again by each request that follows, each
// waiting for the endpoint in turn: one attempt, then a pause.
func TestFailedRefreshIsNotRetriedByEveryRequest(t *testing.T) {
	for _, c := range []struct {
		name string
		left time.Duration
	}{{"still valid", 20 * time.Second}, {"expired", -time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			now := time.Now()
			cl, _ := testClient(t, srv.URL, &Token{AccessToken: "A", RefreshToken: "R", Issued: now.Add(-time.Hour), Expiry: now.Add(c.left)})
			for range 5 {
				if h, _ := cl.Header(context.Background()); h != "Bearer A" {
					t.Fatalf("Header = %q; want the token there is", h)
				}
			}
			// The server refuses the stale token: its 401 is answered with the
			// failure, not with another wait on the endpoint.
			retry, err := cl.Refused(context.Background(), http.StatusUnauthorized, nil, "Bearer A")
			if retry || err == nil {
				t.Errorf("Refused after a failed refresh = %v, %v; want the failure", retry, err)
			}
			if got := n.Load(); got != 1 {
				t.Errorf("%d refresh requests; want 1", got)
			}
		})
	}
}

// TestStepUpNotForScopesAlreadyGranted: a 403 insufficient_scope naming scopes the
// refused token was granted is not answered with a sign-in (a browser tab) for those
// same scopes: it would end with the same token's worth and the same refusal.
func TestStepUpNotForScopesAlreadyGranted(t *testing.T) {
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &Entry{ServerURL: "https://h.example/mcp", Scopes: []string{"read", "admin"},
		Token: &Token{AccessToken: "A", Scope: "read admin", Expiry: time.Now().Add(time.Hour)}}
	if err := st.Save(e); err != nil {
		t.Fatal(err)
	}
	var opened atomic.Int32
	ln := listenFree(t)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c, err := New(Options{ServerURL: "https://h.example/mcp", Store: st, Notify: io.Discard, CallbackPort: port,
		Wait: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		HTTPClient: &http.Client{Transport: refuseAll{}},
		Open:       func(context.Context, string) error { opened.Add(1); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	retry, err := c.Refused(context.Background(), http.StatusForbidden,
		[]string{`Bearer error="insufficient_scope", scope="admin"`}, "Bearer A")
	if retry || err != nil {
		t.Errorf("Refused = %v, %v; want no retry and no sign-in", retry, err)
	}
	c.Close()
	if opened.Load() != 0 {
		t.Error("a browser was opened for scopes the token has")
	}
}

type refuseAll struct{}

func (refuseAll) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no network in this test")
}

func listenFree(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
