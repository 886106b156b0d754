package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestTokenRequestFollowsNoRedirect: a token endpoint that answers with a redirect
// (307 keeps the method and the body) does not get the refresh token sent on to
// where it points; the answer is a failure.
func TestTokenRequestFollowsNoRedirect(t *testing.T) {
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if strings.Contains(r.Form.Encode(), "R-secret") {
			leaked.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"access_token":"B","token_type":"Bearer","expires_in":3600}`))
	}))
	defer elsewhere.Close()
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/token", http.StatusTemporaryRedirect)
	}))
	defer as.Close()
	now := time.Now()
	c, _ := testClient(t, as.URL, &Token{AccessToken: "A", RefreshToken: "R-secret", Issued: now.Add(-time.Hour), Expiry: now.Add(-time.Second)})
	if _, err := c.refresh(context.Background(), "A", true); err == nil {
		t.Error("a redirected refresh succeeded")
	}
	if leaked.Load() != 0 {
		t.Error("the refresh token was sent on to where the token endpoint redirected")
	}
}

// TestTokenErrorQuotesNoSecret: a token endpoint whose error_description echoes
// what it was sent (the refresh token, the client secret) does not get them into the
// error, which reaches stderr and the host's error answer.
func TestTokenErrorQuotesNoSecret(t *testing.T) {
	srv, _ := tokenServer(t, func(int) (int, string) {
		return 400, `{"error":"invalid_request","error_description":"refresh_token=R-secret-1 client_secret=S-secret-2: unexpected"}`
	})
	now := time.Now()
	c, st := testClient(t, srv.URL, &Token{AccessToken: "A", RefreshToken: "R-secret-1", Issued: now.Add(-time.Hour), Expiry: now.Add(-time.Second)})
	e, _ := st.Load("https://h.example/mcp")
	e.Client = &ClientInfo{Kind: KindPreRegistered, ID: "c1", Secret: "S-secret-2", AuthMethod: "client_secret_post"}
	if err := st.Save(e); err != nil {
		t.Fatal(err)
	}
	c.reload()
	_, err := c.refresh(context.Background(), "A", true)
	if err == nil {
		t.Fatal("the refresh succeeded")
	}
	for _, s := range []string{"R-secret-1", "S-secret-2"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error quotes %s: %v", s, err)
		}
	}
	if !strings.Contains(err.Error(), "unexpected") {
		t.Errorf("the server's description is gone: %v", err)
	}
}

// TestResourceMismatchQuotesNoURLSecret: metadata that names another resource is
// refused with an error that shows the server URL redacted (the error reaches
// bir-proxy login's stderr as it is).
func TestResourceMismatchQuotesNoURLSecret(t *testing.T) {
	err := checkResource("https://h.example/mcp?api_key=sk-live-123456", "https://other.example/mcp")
	if err == nil {
		t.Fatal("another resource accepted")
	}
	if strings.Contains(err.Error(), "sk-live-123456") {
		t.Errorf("the error quotes the URL's secret: %v", err)
	}
}
