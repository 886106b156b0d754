package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeAuth is an Authorizer whose Refused hands out the token the server takes.
type fakeAuth struct {
	mu       sync.Mutex
	header   string
	give     string // what Refused switches to
	err      error
	headers  int
	refusals []string // "status sent" per Refused
}

func (a *fakeAuth) Header(context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.headers++
	return a.header, nil
}

func (a *fakeAuth) Refused(_ context.Context, status int, ch []string, sent string) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refusals = append(a.refusals, http.StatusText(status)+" "+sent+" "+strings.Join(ch, ";"))
	if a.err != nil {
		return false, a.err
	}
	a.header = a.give
	return true, nil
}

// authServer answers JSON-RPC requests taken with the Authorization "Bearer good",
// 401 with a challenge otherwise.
func authServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://x/m"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

const authReq = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

func TestAuthRenewsAndRetries(t *testing.T) {
	srv := authServer(t)
	a := &fakeAuth{give: "Bearer good"}
	cl := dial(t, Remote{URL: srv.URL, Transport: TransportHTTP, Auth: a})
	cl.write(authReq)
	if got := cl.next(); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("answer %s", got)
	}
	if len(a.refusals) != 1 || !strings.Contains(a.refusals[0], `Unauthorized  Bearer resource_metadata="http://x/m"`) {
		t.Errorf("Refused calls %q: want one, told the status, no token sent, the challenge", a.refusals)
	}
}

func TestAuthRetriesAreBounded(t *testing.T) {
	srv := authServer(t)
	a := &fakeAuth{give: "Bearer still-wrong"}
	cl := dial(t, Remote{URL: srv.URL, Transport: TransportHTTP, Auth: a})
	cl.write(authReq)
	if got := cl.next(); !strings.Contains(got, `"error"`) || !strings.Contains(got, "401") {
		t.Fatalf("answer %s", got)
	}
	if len(a.refusals) != maxAuthRetries {
		t.Errorf("%d Refused calls, want %d", len(a.refusals), maxAuthRetries)
	}
}

func TestAuthErrorReachesTheHost(t *testing.T) {
	srv := authServer(t)
	a := &fakeAuth{err: errors.New("run `bir-proxy login --url X`")}
	cl := dial(t, Remote{URL: srv.URL, Transport: TransportHTTP, Auth: a})
	cl.write(authReq)
	if got := cl.next(); !strings.Contains(got, "HTTP 401 Unauthorized: run `bir-proxy login --url X`") {
		t.Fatalf("answer %s", got)
	}
}

func TestAuthHeaderFlagWins(t *testing.T) {
	srv := authServer(t)
	a := &fakeAuth{header: "Bearer from-oauth", give: "Bearer from-oauth"}
	cl := dial(t, Remote{URL: srv.URL, Transport: TransportHTTP, Auth: a, Header: http.Header{"Authorization": {"Bearer good"}}})
	cl.write(authReq)
	if got := cl.next(); !strings.Contains(got, `"result"`) {
		t.Fatalf("answer %s", got)
	}
	if a.headers != 0 || len(a.refusals) != 0 {
		t.Errorf("the Authorizer was asked (%d Header, %d Refused) though --header gave Authorization", a.headers, len(a.refusals))
	}
}

// TestAuthLegacyTransport: over HTTP+SSE the refused event stream and the refused
// POSTs are renewed the same way, and every request carries the token after.
func TestAuthLegacyTransport(t *testing.T) {
	url, record := rawHTTP(t, "--legacy", "--auth", "Bearer good")
	a := &fakeAuth{give: "Bearer good"}
	cl := dial(t, Remote{URL: url, Transport: TransportSSE, Auth: a})
	cl.write(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if got := cl.next(); !strings.Contains(got, `"result"`) {
		t.Fatalf("initialize over HTTP+SSE: %s", got)
	}
	if len(a.refusals) != 1 {
		t.Errorf("Refused calls %q, want one (the event stream's 401)", a.refusals)
	}
	reqs := requests(t, record)
	if len(reqs) < 3 || reqs[0].Method != "GET" || reqs[0].Header["Authorization"] != "" {
		t.Fatalf("want the refused GET first, without a token, then more: %+v", reqs)
	}
	for _, r := range reqs[1:] {
		if r.Header["Authorization"] != "Bearer good" {
			t.Errorf("%s %s went with Authorization %q, want the renewed token", r.Method, r.Path, r.Header["Authorization"])
		}
	}
}
