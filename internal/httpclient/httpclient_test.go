package httpclient

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// The redirect rules, against real servers on 127.0.0.1: one origin that redirects
// within itself (n times from /hop/n) and to another origin (/away), and the other.
func TestRedirects(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.Redirect(w, r, "/hop/"+strconv.Itoa(n-1), http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, c := range []struct {
		o    Options
		path string
		want int // the status the client ends with
		away int64
	}{
		{Options{}, "/hop/1", http.StatusTemporaryRedirect, 0},
		{Options{Redirects: NoRedirects}, "/away", http.StatusFound, 0},
		{Options{Redirects: SameOrigin}, "/hop/2", http.StatusNoContent, 0},
		{Options{Redirects: SameOrigin}, "/hop/3", http.StatusTemporaryRedirect, 0}, // a 4th request
		{Options{Redirects: SameOrigin, MaxHops: 6}, "/hop/5", http.StatusNoContent, 0},
		{Options{Redirects: SameOrigin, MaxHops: 6}, "/hop/6", http.StatusTemporaryRedirect, 0},
		{Options{Redirects: SameOrigin}, "/away", http.StatusFound, 0},
		{Options{Redirects: Follow}, "/away", http.StatusOK, 1},
		{Options{Redirects: Follow, Standard: true}, "/hop/9", http.StatusNoContent, 1},
	} {
		hc := New(c.o)
		resp, err := hc.Get(srv.URL + c.path)
		if err != nil {
			t.Fatalf("%+v %s: %v", c.o, c.path, err)
		}
		resp.Body.Close()
		hc.CloseIdleConnections()
		if resp.StatusCode != c.want || elsewhere.Load() != c.away {
			t.Errorf("%+v %s: HTTP %d (want %d), %d requests to the other origin (want %d)", c.o, c.path, resp.StatusCode, c.want, elsewhere.Load(), c.away)
		}
	}
}

// NoProxy ignores the environment's proxy; FromEnv takes it.
func TestProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.invalid:3128")
	t.Setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
	t.Setenv("NO_PROXY", "")
	req, _ := http.NewRequest(http.MethodGet, "http://server.invalid/", nil)
	for _, c := range []struct {
		p    Proxy
		want string
	}{{NoProxy, ""}, {FromEnv, "http://proxy.invalid:3128"}} {
		for _, standard := range []bool{false, true} {
			tr := New(Options{Proxy: c.p, Standard: standard}).Transport.(*http.Transport)
			var got string
			if tr.Proxy != nil {
				u, err := tr.Proxy(req)
				if err != nil {
					t.Fatal(err)
				}
				if u != nil {
					got = u.String()
				}
			}
			if got != c.want {
				t.Errorf("proxy %d (standard %v): %q, want %q", c.p, standard, got, c.want)
			}
		}
	}
}

// The transport settings given are the ones made.
func TestTransportSettings(t *testing.T) {
	tr := New(Options{DialTimeout: 5 * time.Second, MaxIdleConns: 7, MaxIdleConnsPerHost: 7, IdleConnTimeout: time.Second,
		ResponseHeaderTimeout: 2 * time.Second, MaxResponseHeaderBytes: 64 << 10, WriteBufferSize: 64 << 10, DisableKeepAlives: true}).Transport.(*http.Transport)
	if tr.DialContext == nil || tr.MaxIdleConns != 7 || tr.MaxIdleConnsPerHost != 7 || tr.IdleConnTimeout != time.Second ||
		tr.ResponseHeaderTimeout != 2*time.Second || tr.MaxResponseHeaderBytes != 64<<10 || tr.WriteBufferSize != 64<<10 ||
		!tr.DisableKeepAlives || tr.ForceAttemptHTTP2 || tr.TLSHandshakeTimeout != 0 {
		t.Errorf("%+v", tr)
	}
	std := New(Options{Standard: true, MaxIdleConns: 2}).Transport.(*http.Transport)
	if !std.ForceAttemptHTTP2 || std.TLSHandshakeTimeout != 10*time.Second || std.MaxIdleConns != 2 {
		t.Errorf("standard: %+v", std)
	}
}
