package oauth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tokenServer is a token endpoint that answers refreshes with answer.
func tokenServer(t *testing.T, answer func(n int) (int, string)) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("grant_type") != "refresh_token" || r.Form.Get("resource") != "https://h.example/mcp" {
			t.Errorf("refresh request %v: want grant_type=refresh_token and the resource", r.Form)
		}
		code, body := answer(int(n.Add(1)))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func testClient(t *testing.T, tokenURL string, tok *Token) (*Client, *Store) {
	t.Helper()
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &Entry{ServerURL: "https://h.example/mcp",
		Server: &ServerMetadata{Issuer: "https://as.example", TokenEndpoint: tokenURL},
		Client: &ClientInfo{Kind: KindDynamic, ID: "c1", AuthMethod: "none"}, Token: tok}
	if err := st.Save(e); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{ServerURL: "https://h.example/mcp", Store: st, Notify: io.Discard,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Open: func(context.Context, string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, st
}

// TestRefreshRefusedWhileValidKeepsTheGrant: a refresh the server refuses while the
// access token still works keeps the token (and asks no more until it expires); the
// same refusal after a 401 drops the token and keeps the client registration.
func TestRefreshRefusedWhileValidKeepsTheGrant(t *testing.T) {
	srv, n := tokenServer(t, func(int) (int, string) { return 400, `{"error":"invalid_grant"}` })
	now := time.Now()
	c, st := testClient(t, srv.URL, &Token{AccessToken: "A", RefreshToken: "R", Issued: now.Add(-time.Hour), Expiry: now.Add(10 * time.Second)})
	ctx := context.Background()
	for range 3 {
		if h, err := c.Header(ctx); h != "Bearer A" || err != nil {
			t.Fatalf("Header = %q, %v; want the token still valid", h, err)
		}
	}
	if n.Load() != 1 {
		t.Errorf("%d refresh requests; want 1, then none until the token expires", n.Load())
	}
	if e, _ := st.Load("https://h.example/mcp"); e == nil || e.Token == nil || e.Token.RefreshToken != "R" {
		t.Fatalf("the grant was dropped: %+v", e)
	}
	// The server refuses the access token now: the grant is gone, the client stays.
	if _, err := c.refresh(ctx, "A", true); err != errNoGrant {
		t.Fatalf("refresh after a 401: %v, want errNoGrant", err)
	}
	e, _ := st.Load("https://h.example/mcp")
	if e == nil || e.Token != nil || e.Client == nil || e.Client.ID != "c1" {
		t.Fatalf("after a refused refresh following a 401: %+v; want no token, the client kept", e)
	}
}

// TestConcurrentRefreshOnce: many requests of one process meeting an expiring token
// refresh it once, and a second Client on the same store (another process) reads
// that result instead of refreshing again.
func TestConcurrentRefreshOnce(t *testing.T) {
	srv, n := tokenServer(t, func(i int) (int, string) {
		// Makes the callers overlap the refresh, likely, not certain: which of them
		// come while it is in flight cannot be seen from here (they wait on a mutex
		// or on the store's file lock, another process's). A caller that comes after
		// it finds the new token, which the assertions accept too.
		time.Sleep(50 * time.Millisecond)
		return 200, fmt.Sprintf(`{"access_token":"A%d","token_type":"Bearer","expires_in":3600,"refresh_token":"R%d"}`, i, i)
	})
	now := time.Now()
	c, st := testClient(t, srv.URL, &Token{AccessToken: "A0", RefreshToken: "R0", Issued: now.Add(-time.Hour), Expiry: now.Add(-time.Second)})
	other, err := New(Options{ServerURL: "https://h.example/mcp", Store: st, Notify: io.Discard,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var wg sync.WaitGroup
	got := make(chan string, 40)
	for i := range 40 {
		cl := c
		if i%2 == 1 {
			cl = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := cl.Header(context.Background())
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
	}
	wg.Wait()
	close(got)
	for h := range got {
		if h != "Bearer A1" {
			t.Errorf("Header %q, want the one refreshed token", h)
		}
	}
	if n.Load() != 1 {
		t.Errorf("%d refreshes, want 1", n.Load())
	}
	e, _ := st.Load("https://h.example/mcp")
	if e.Token.RefreshToken != "R1" {
		t.Errorf("the rotated refresh token was not kept: %+v", e.Token)
	}
}

// TestRefreshInvalidClientDropsTheRegistration: a refresh refused with invalid_client
// (the authorization server forgot the dynamically registered client: a restart of
// an in-memory store, an expiry) drops that registration with the grant. Kept, it
// would be used by every sign-in after, and an authorization server answers an
// unknown client_id with an error page, never a redirect: no sign-in could finish.
func TestRefreshInvalidClientDropsTheRegistration(t *testing.T) {
	srv, _ := tokenServer(t, func(int) (int, string) { return 401, `{"error":"invalid_client"}` })
	now := time.Now()
	c, st := testClient(t, srv.URL, &Token{AccessToken: "A", RefreshToken: "R", Issued: now.Add(-time.Hour), Expiry: now.Add(-time.Second)})
	if _, err := c.refresh(context.Background(), "A", true); err != errNoGrant {
		t.Fatalf("refresh: %v, want errNoGrant", err)
	}
	e, _ := st.Load("https://h.example/mcp")
	if e == nil || e.Token != nil || e.Client != nil {
		t.Fatalf("after invalid_client: %+v; want neither the grant nor the registration", e)
	}
	if e.Server == nil {
		t.Error("the authorization server's metadata went too")
	}
}
