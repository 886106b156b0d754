package oauth

import (
	"context"
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
