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
