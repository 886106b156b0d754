package oauth

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSignInPauseDoublesAndEnds: after a failed sign-in, requests are answered
// with its failure and open no browser, for 30 s; a second failure in a row doubles
// that; a grant stored meanwhile by someone else (`bir-proxy login`) ends the pause,
// and the sign-in that then works clears it.
func TestSignInPauseDoublesAndEnds(t *testing.T) {
	a := newScriptedAS(t)
	var ok atomic.Bool
	a.token = func(int) (int, string) {
		if ok.Load() {
			return 200, `{"access_token":"good","token_type":"Bearer","expires_in":3600}`
		}
		return 400, `{"error":"invalid_grant","error_description":"the code was refused"}`
	}
	cl := a.client(nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pause := func() time.Duration {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		return time.Until(cl.signInAt)
	}
	if _, err := cl.Refused(ctx, 401, nil, ""); err == nil || !strings.Contains(err.Error(), "the code was refused") {
		t.Fatalf("Refused: %v; want the refusal", err)
	}
	if p := pause(); p < 25*time.Second || p > 30*time.Second {
		t.Errorf("pause %v after one failure, want 30s", p)
	}
	for range 10 {
		_, err := cl.Refused(ctx, 401, nil, "")
		if err == nil || !strings.Contains(err.Error(), "the code was refused") || !strings.Contains(err.Error(), "not tried again before") {
			t.Fatalf("Refused during the pause: %v", err)
		}
	}
	if n := a.launches.Load(); n != 1 {
		t.Fatalf("%d browser launches for 11 requests, want 1", n)
	}
	// The other processes of the user see it too, with the same pause.
	if f := cl.o.Store.failure(cl.Resource(), time.Now()); f == nil || !strings.Contains(f.Error, "the code was refused") || time.Until(f.Until) < 25*time.Second {
		t.Fatalf("the failure noted in the store: %+v", f)
	}
	// The pause is over: one more sign-in, which fails too: twice the pause.
	cl.mu.Lock()
	cl.signInAt = time.Now()
	cl.mu.Unlock()
	cl.o.Store.setFailure(cl.Resource(), nil)
	if _, err := cl.Refused(ctx, 401, nil, ""); err == nil || strings.Contains(err.Error(), "not tried again") {
		t.Fatalf("Refused after the pause: %v; want a new sign-in's failure", err)
	}
	if p := pause(); p < 55*time.Second || p > 60*time.Second {
		t.Errorf("pause %v after two failures in a row, want 60s", p)
	}
	if n := a.launches.Load(); n != 2 {
		t.Fatalf("%d browser launches, want 2", n)
	}
	// Someone stores a grant (expired by now, so it is no answer by itself): what
	// failed before says nothing about it; the next 401 signs in, and that works.
	ok.Store(true)
	e, _ := cl.o.Store.Load(cl.Resource())
	e.Token = &Token{AccessToken: "theirs", Expiry: time.Now().Add(-time.Minute)}
	if err := cl.o.Store.Save(e); err != nil {
		t.Fatal(err)
	}
	if retry, err := cl.Refused(ctx, 401, nil, ""); !retry || err != nil {
		t.Fatalf("Refused after a grant was stored: %v, %v; want a sign-in", retry, err)
	}
	if n := a.launches.Load(); n != 3 {
		t.Errorf("%d browser launches, want 3", n)
	}
	cl.mu.Lock()
	failed, fails := cl.signInFailed, cl.signInFails
	cl.mu.Unlock()
	if failed != nil || fails != 0 {
		t.Errorf("after a sign-in that worked: failure %v, %d in a row; want none", failed, fails)
	}
	if f := cl.o.Store.failure(cl.Resource(), time.Now()); f != nil {
		t.Errorf("after a sign-in that worked, the store still notes a failure: %+v", f)
	}
	if h, _ := cl.Header(ctx); h != "Bearer good" {
		t.Errorf("Header = %q", h)
	}
}

// TestSharedFailureBounded: a failure noted in the store is obeyed only while
// its pause could last: one that ends past the longest pause (a clock set back, a
// planted file) would hold every sign-in until then.
func TestSharedFailureBounded(t *testing.T) {
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const u = "https://h.example/mcp"
	now := time.Now()
	st.setFailure(u, &signInFailure{Error: "refused", Until: now.Add(time.Minute)})
	if f := st.failure(u, now); f == nil || f.Error != "refused" {
		t.Fatalf("failure = %+v", f)
	}
	if f := st.failure(u, now.Add(2*time.Minute)); f != nil {
		t.Errorf("a pause that is over: %+v", f)
	}
	st.setFailure(u, &signInFailure{Error: "refused", Until: now.Add(24 * time.Hour)})
	if f := st.failure(u, now); f != nil {
		t.Errorf("a pause of a day is obeyed: %+v", f)
	}
	st.setFailure(u, nil)
	if _, err := os.Lstat(st.base(u) + ".failed"); !os.IsNotExist(err) {
		t.Errorf("the note is still there: %v", err)
	}
}
