package main

import (
	"bufio"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Issue 21 item 4: a redirect to another origin must not take the --header values,
// the session id or a POST's body (the tool's arguments) with it. The scripted server
// redirects to a second listener on another port, which must receive nothing at all;
// the host gets an error with its request's id naming where the server pointed.

const (
	redirToken = "tok-redir-5b7c9d1e3f"
	redirKey   = "key-redir-8a6b4c2d0e"
	redirArg   = "arg-redir-secret-4242"
)

func redirectHeaders() []string {
	return []string{"--header", "Authorization: Bearer " + redirToken, "--header", "X-Api-Key: " + redirKey}
}

// checkNothingReached fails when the sink got a connection, or any secret.
func checkNothingReached(t *testing.T, sink *rawSink) {
	t.Helper()
	n, got := sink.received()
	if n != 0 {
		t.Errorf("the other origin got %d connection(s): %q", n, got)
	}
	for _, secret := range []string{redirToken, redirKey, redirArg} {
		if strings.Contains(got, secret) {
			t.Errorf("the other origin got a secret (%s): %q", secret, got)
		}
	}
}

// wantRedirectError checks ans is an error answer for id naming the sink's URL.
func wantRedirectError(t *testing.T, ans, id string, sink *rawSink, stderr string) {
	t.Helper()
	if gjson.Get(ans, "id").Raw != id || !gjson.Get(ans, "error").Exists() {
		t.Fatalf("want an error answer with id %s, got %s\nstderr: %s", id, ans, stderr)
	}
	if msg := gjson.Get(ans, "error.message").String(); !strings.Contains(msg, sink.URL) {
		t.Errorf("the error does not name the Location %s: %s", sink.URL, msg)
	}
}

// TestRemoteRedirectPOSTNotFollowed: the POST of initialize and of a tools/call,
// answered 307, 308 or 302 to another port, are not followed (auto and http transports).
func TestRemoteRedirectPOSTNotFollowed(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"307 Temporary Redirect", "308 Permanent Redirect", "302 Found"} {
		t.Run(status[:3], func(t *testing.T) {
			t.Parallel()
			sink := startRawSink(t)
			srv := startRawServer(t, func(r *rawReq, w *bufio.Writer, _ <-chan struct{}) {
				writeResp(w, status, []string{"Location: " + sink.URL + "/mcp"}, "moved")
			})
			s := startProxy(t, nil, append([]string{"--server", "moved", "--url", srv.URL + "/mcp"}, redirectHeaders()...)...)
			s.Send(remoteInit)
			wantRedirectError(t, s.recv(), "0", sink, s.Stderr.String())
			s.Send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"secret":"` + redirArg + `"}}}`)
			wantRedirectError(t, s.recv(), "7", sink, s.Stderr.String())
			s.Stdin.Close()
			s.ExitCode()
			checkNothingReached(t, sink)
			if len(srv.requests()) == 0 {
				t.Fatal("the server got no request")
			}
			for _, secret := range []string{redirToken, redirKey} {
				if strings.Contains(s.Stderr.String(), secret) {
					t.Errorf("stderr shows a secret: %s", s.Stderr.String())
				}
			}
		})
	}
}

// TestRemoteRedirectGETStreamNotFollowed: a session whose GET stream (and then a
// call) is redirected to another port: the session id and credentials stay home.
func TestRemoteRedirectGETStreamNotFollowed(t *testing.T) {
	t.Parallel()
	sink := startRawSink(t)
	srv := startRawServer(t, func(r *rawReq, w *bufio.Writer, _ <-chan struct{}) {
		switch {
		case r.Method == "GET":
			writeResp(w, "307 Temporary Redirect", []string{"Location: " + sink.URL + "/stream"}, "")
		case rpcMethod(r.Body) == "initialize":
			writeResp(w, "200 OK", []string{"Content-Type: application/json", "Mcp-Session-Id: sess-redir-77"},
				`{"jsonrpc":"2.0","id":`+rpcID(r.Body)+`,"result":`+rawInitResult+`}`)
		case rpcID(r.Body) == "":
			writeResp(w, "202 Accepted", nil, "")
		default:
			writeResp(w, "308 Permanent Redirect", []string{"Location: " + sink.URL + "/mcp"}, "")
		}
	})
	s := startProxy(t, nil, append([]string{"--server", "moved", "--url", srv.URL + "/mcp", "--transport", "http"}, redirectHeaders()...)...)
	s.Send(remoteInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if ans := s.recv(); !gjson.Get(ans, "result.serverInfo").Exists() {
		t.Fatalf("initialize: %s", ans)
	}
	s.Send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"echo","arguments":{"secret":"` + redirArg + `"}}}`)
	wantRedirectError(t, s.recv(), `"c1"`, sink, s.Stderr.String())
	s.Stdin.Close()
	s.ExitCode()
	gets := 0
	for _, r := range srv.requests() {
		if r.Method == "GET" {
			gets++
		}
	}
	if gets == 0 {
		t.Fatalf("the proxy never opened the GET stream; requests: %v", srv.requests())
	}
	checkNothingReached(t, sink)
	if !strings.Contains(s.Stderr.String(), sink.URL) {
		t.Errorf("stderr does not say where the redirect pointed:\n%s", s.Stderr.String())
	}
}

// TestRemoteRedirectLegacyNotFollowed: the HTTP+SSE transport's GET, redirected
// to another port, is not followed; the host's initialize gets an error with its id.
func TestRemoteRedirectLegacyNotFollowed(t *testing.T) {
	t.Parallel()
	sink := startRawSink(t)
	srv := startRawServer(t, func(r *rawReq, w *bufio.Writer, _ <-chan struct{}) {
		writeResp(w, "307 Temporary Redirect", []string{"Location: " + sink.URL + "/sse"}, "")
	})
	s := startProxy(t, nil, append([]string{"--server", "moved", "--url", srv.URL + "/sse", "--transport", "sse"}, redirectHeaders()...)...)
	s.Send(remoteInit)
	ans := s.recv()
	if gjson.Get(ans, "id").Raw != "0" || !gjson.Get(ans, "error").Exists() {
		t.Fatalf("want an error for id 0, got %s", ans)
	}
	s.Stdin.Close()
	s.ExitCode()
	checkNothingReached(t, sink)
	if !strings.Contains(s.Stderr.String(), sink.URL) {
		t.Errorf("stderr does not say where the redirect pointed:\n%s", s.Stderr.String())
	}
}

// TestRemoteRedirectSameOriginFollowed: a redirect on the server's own origin
// that keeps the method (/mcp → /mcp/, as Starlette mounts answer) is followed; one
// that would turn a POST into a GET (303) is not.
func TestRemoteRedirectSameOriginFollowed(t *testing.T) {
	t.Parallel()
	srv := startRawServer(t, func(r *rawReq, w *bufio.Writer, _ <-chan struct{}) {
		switch {
		case r.Path == "/mcp":
			writeResp(w, "307 Temporary Redirect", []string{"Location: /mcp/"}, "")
		case r.Path == "/see-other":
			writeResp(w, "303 See Other", []string{"Location: /mcp/"}, "")
		case r.Method == "POST" && r.Header.Get("Authorization") == "Bearer "+redirToken && rpcMethod(r.Body) == "initialize":
			writeResp(w, "200 OK", []string{"Content-Type: application/json"},
				`{"jsonrpc":"2.0","id":`+rpcID(r.Body)+`,"result":`+rawInitResult+`}`)
		default:
			writeResp(w, "400 Bad Request", nil, "unexpected")
		}
	})
	s := startProxy(t, nil, append([]string{"--server", "slash", "--url", srv.URL + "/mcp", "--transport", "http"}, redirectHeaders()...)...)
	s.Send(remoteInit)
	if ans := s.recv(); !gjson.Get(ans, "result.serverInfo").Exists() {
		t.Fatalf("initialize through a same-origin 307: %s\nstderr: %s", ans, s.Stderr.String())
	}
	s.Stdin.Close()
	s.ExitCode()

	s = startProxy(t, nil, append([]string{"--server", "other", "--url", srv.URL + "/see-other", "--transport", "http"}, redirectHeaders()...)...)
	s.Send(remoteInit)
	ans := s.recv()
	if gjson.Get(ans, "id").Raw != "0" || !strings.Contains(gjson.Get(ans, "error.message").String(), "303") {
		t.Fatalf("a 303 of a POST: want an error naming it, got %s", ans)
	}
	s.Stdin.Close()
	s.ExitCode()
}
