package oauth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTokenNotB64TokenIsAFailedSignIn: an authorization server that issues a
// token with CR/LF (or anything outside RFC 6750's b64token) in it ends the sign-in
// with an error that says so; nothing is stored, so no later request (nor a later
// run) carries it into a header that net/http refuses ("invalid header field value")
// for ever.
func TestTokenNotB64TokenIsAFailedSignIn(t *testing.T) {
	for _, c := range []struct {
		name, body, want string
	}{
		{"access token with CR LF", `{"access_token":"abc\r\nX-Injected: 1","token_type":"Bearer"}`, "access token"},
		{"access token with a space", `{"access_token":"abc def","token_type":"Bearer"}`, "access token"},
		{"access token with = inside", `{"access_token":"ab=c","token_type":"Bearer"}`, "access token"},
		{"access token not ASCII", `{"access_token":"abcé","token_type":"Bearer"}`, "access token"},
		{"refresh token with LF", `{"access_token":"good","refresh_token":"r\n1","token_type":"Bearer"}`, "refresh token"},
		{"token type with CR LF", `{"access_token":"good","token_type":"Bearer\r\n"}`, "Bearer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newScriptedAS(t)
			a.token = func(int) (int, string) { return 200, c.body }
			cl := a.client(nil, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			retry, err := cl.Refused(ctx, 401, nil, "")
			if retry || err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Refused = %v, %v; want a failed sign-in naming the %s", retry, err, c.want)
			}
			var nl *NeedLoginError
			if !errors.As(err, &nl) {
				t.Errorf("the error is not a NeedLoginError (the host's advice): %v", err)
			}
			if strings.ContainsAny(err.Error(), "\r\n") || strings.Contains(err.Error(), "abc") {
				t.Errorf("the error quotes the token: %q", err)
			}
			e, _ := cl.o.Store.Load(cl.Resource())
			if e != nil && e.Token != nil {
				t.Errorf("the token was stored: %+v", e.Token)
			}
			h, _ := cl.Header(ctx)
			if h != "" {
				t.Errorf("Header = %q; want none", h)
			}
		})
	}
}

// TestB64Token: the RFC 6750 §2.1 grammar, 1*( ALPHA / DIGIT / "-" / "." /
// "_" / "~" / "+" / "/" ) *"=".
func TestB64Token(t *testing.T) {
	for s, want := range map[string]bool{
		"abc": true, "a-b.c_d~e+f/g": true, "abc==": true, "eyJ0eXAiOiJKV1QifQ.eyJzdWIiOiIxIn0.c2ln": true,
		"": false, "=": false, "==": false, "a=b": false, "a b": false, "a\r\nb": false, "a\x00": false,
		"a\"b": false, "a,b": false, "é": false, "a\tb": false,
	} {
		if got := b64token(s); got != want {
			t.Errorf("b64token(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestStoredInvalidTokenIsIgnored: a store written by an older version that
// kept a token with CR/LF in it: the token is not used (every request would fail with
// "invalid header field value" and no sign-in would ever start); the request goes
// without, and the 401 starts a sign-in whose good token replaces it.
func TestStoredInvalidTokenIsIgnored(t *testing.T) {
	a := newScriptedAS(t)
	a.token = func(int) (int, string) {
		return 200, `{"access_token":"fresh","refresh_token":"r2","token_type":"Bearer","expires_in":3600}`
	}
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, _ := CanonicalURI(a.serverURL())
	for _, bad := range []*Token{
		{AccessToken: "old\r\nX-Injected: 1", RefreshToken: "r1"},
		{AccessToken: "old", RefreshToken: "r\n1"},
	} {
		if err := st.Save(&Entry{ServerURL: res, Token: bad}); err != nil {
			t.Fatal(err)
		}
		e, err := st.Load(res)
		if err != nil || e == nil {
			t.Fatalf("Load: %+v, %v", e, err)
		}
		if e.Token != nil && (strings.ContainsAny(e.Token.AccessToken+e.Token.RefreshToken, "\r\n")) {
			t.Errorf("Load kept the invalid token: %q", e.Token)
		}
	}
	if err := st.Save(&Entry{ServerURL: res, Token: &Token{AccessToken: "old\r\nX-Injected: 1"}}); err != nil {
		t.Fatal(err)
	}
	cl := a.client(st, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if h, err := cl.Header(ctx); h != "" || err != nil {
		t.Fatalf("Header = %q, %v; want none (the stored token is not a token)", h, err)
	}
	retry, err := cl.Refused(ctx, 401, nil, "")
	if !retry || err != nil {
		t.Fatalf("Refused = %v, %v; want a new sign-in", retry, err)
	}
	if n := a.launches.Load(); n != 1 {
		t.Errorf("%d browser launches, want 1", n)
	}
	if h, err := cl.Header(ctx); h != "Bearer fresh" || err != nil {
		t.Fatalf("Header after the sign-in = %q, %v", h, err)
	}
}
