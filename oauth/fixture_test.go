package oauth

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// scriptedAS is a hostile authorization server (and the protected resource's
// metadata) on 127.0.0.1, for the client alone: each document is what the test says,
// byte for byte. Its browser is an Opener that answers the callback with a code at
// once, counting launches.
type scriptedAS struct {
	t   *testing.T
	srv *httptest.Server
	// asMeta, when set, is the authorization server metadata body; token is the token
	// endpoint's answer to the n-th request (1-based).
	asMeta   func() string
	token    func(n int) (int, string)
	tokens   atomic.Int32
	launches atomic.Int32
	visits   sync.WaitGroup
}

func newScriptedAS(t *testing.T) *scriptedAS {
	t.Helper()
	a := &scriptedAS{t: t}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := a.srv.URL
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource":
			io.WriteString(w, `{"resource":"`+base+`/mcp","authorization_servers":["`+base+`"]}`)
		case "/.well-known/oauth-authorization-server":
			if a.asMeta != nil {
				io.WriteString(w, a.asMeta())
				return
			}
			io.WriteString(w, `{"issuer":"`+base+`","authorization_endpoint":"`+base+`/authorize","token_endpoint":"`+base+
				`/token","registration_endpoint":"`+base+`/register","code_challenge_methods_supported":["S256"]}`)
		case "/register":
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"client_id":"c1","token_endpoint_auth_method":"none"}`)
		case "/token":
			code, body := a.token(int(a.tokens.Add(1)))
			w.WriteHeader(code)
			io.WriteString(w, body)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		a.visits.Wait()
		a.srv.Close()
	})
	return a
}

// serverURL is the protected MCP server's URL (the client never calls it here: the
// test plays the transport, calling Refused as a 401 would).
func (a *scriptedAS) serverURL() string { return a.srv.URL + "/mcp" }

// open is the browser: it answers the authorization URL's redirect URI with a code
// and the state, as an authorization server's consent page would.
func (a *scriptedAS) open(_ context.Context, authURL string) error {
	a.launches.Add(1)
	u, err := url.Parse(authURL)
	if err != nil {
		a.t.Errorf("the authorization URL %q: %v", authURL, err)
		return err
	}
	q := u.Query()
	cb := q.Get("redirect_uri") + "?" + url.Values{"code": {"the-code"}, "state": {q.Get("state")}}.Encode()
	a.visits.Add(1)
	go func() {
		defer a.visits.Done()
		resp, err := http.Get(cb)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	return nil
}

// client is a Client of the scripted server with its own store and callback port.
func (a *scriptedAS) client(store *Store, log io.Writer) *Client {
	a.t.Helper()
	if store == nil {
		var err error
		if store, err = OpenStore(a.t.TempDir()); err != nil {
			a.t.Fatal(err)
		}
	}
	if log == nil {
		log = io.Discard
	}
	c, err := New(Options{ServerURL: a.serverURL(), Name: "fx", Store: store, Notify: io.Discard,
		Logger: slog.New(slog.NewTextHandler(log, nil)), Open: a.open, CallbackPort: freeCallbackPort(a.t)})
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(c.Close)
	return c
}

func freeCallbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
