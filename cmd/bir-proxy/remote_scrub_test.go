package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/oauth"
)

// Issue 21 item 5: a server's error body that quotes the OAuth credentials back must
// not put them in the host's error, the journal or stderr, as a --header token is
// kept out. The token is refreshed at start (the stored one has expired), so the one
// quoted is one the proxy only learnt at run time.
func TestRemoteOAuthTokenQuotedBackIsScrubbed(t *testing.T) {
	t.Parallel()
	const (
		oldAccess  = "at-old-0f1e2d3c4b5a69788796"
		oldRefresh = "rt-old-a1b2c3d4e5f60718293a"
		newAccess  = "at-new-9a8b7c6d5e4f30211203"
		newRefresh = "rt-new-5d4c3b2a19f8e7d6c5b4"
		secret     = "cs-client-secret-77e1d2c3b4"
	)
	var srvURL string
	srv := startRawServer(t, func(r *rawReq, w *bufio.Writer, _ <-chan struct{}) {
		switch {
		case r.Path == "/token":
			form := string(r.Body)
			if !strings.Contains(form, "grant_type=refresh_token") || !strings.Contains(form, oldRefresh) {
				writeResp(w, "400 Bad Request", []string{"Content-Type: application/json"}, `{"error":"invalid_grant"}`)
				return
			}
			writeResp(w, "200 OK", []string{"Content-Type: application/json"},
				`{"access_token":"`+newAccess+`","token_type":"Bearer","expires_in":3600,"refresh_token":"`+newRefresh+`"}`)
		case r.Method == "GET":
			writeResp(w, "405 Method Not Allowed", nil, "")
		case rpcMethod(r.Body) == "initialize":
			writeResp(w, "200 OK", []string{"Content-Type: application/json"},
				`{"jsonrpc":"2.0","id":`+rpcID(r.Body)+`,"result":`+rawInitResult+`}`)
		case rpcID(r.Body) == "":
			writeResp(w, "202 Accepted", nil, "")
		case strings.Contains(string(r.Body), `"jsonerr"`):
			// The same, as a JSON-RPC error (relayed, but not with the token).
			writeResp(w, "400 Bad Request", []string{"Content-Type: application/json"},
				`{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"invalid token `+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+`"}}`)
		default:
			// A server that quotes what it was sent (and, hostile or buggy, the
			// grant's other secrets the proxy holds now) in a plain-text 500.
			auth := r.Header.Get("Authorization")
			tok := strings.TrimPrefix(auth, "Bearer ")
			writeResp(w, "500 Internal Server Error", []string{"Content-Type: text/plain"},
				"bad token "+tok+" in "+auth+"; also "+newRefresh+" "+secret)
		}
	})
	srvURL = srv.URL + "/mcp"
	config := t.TempDir()
	store, err := oauth.OpenStore(filepath.Join(config, "bir-proxy", "oauth"))
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := oauth.CanonicalURI(srvURL)
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Now().Add(-2 * time.Hour).UTC()
	if err := store.Save(&oauth.Entry{
		ServerURL: canonical,
		Server:    &oauth.ServerMetadata{Issuer: srv.URL, AuthorizationEndpoint: srv.URL + "/authorize", TokenEndpoint: srv.URL + "/token"},
		Client:    &oauth.ClientInfo{Kind: oauth.KindPreRegistered, ID: "cid", Secret: secret, AuthMethod: "client_secret_post", RedirectURI: "http://127.0.0.1:1/callback", Issuer: srv.URL},
		Token:     &oauth.Token{AccessToken: oldAccess, RefreshToken: oldRefresh, Issued: issued, Expiry: issued.Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(t.TempDir(), "j.jsonl")
	s := startProxy(t, []string{"XDG_CONFIG_HOME=" + config, "BROWSER=false", "BIR_OFF=0", "BIR_RECORDER_URL=", "BIR_LOG_LEVEL=debug"},
		"--server", "echoer", "--url", srvURL, "--transport", "http", "--journal", journal, "--oauth-port", "1")
	s.Send(remoteInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if ans := s.recv(); !gjson.Get(ans, "result.serverInfo").Exists() {
		t.Fatalf("initialize: %s\nstderr: %s", ans, s.Stderr.String())
	}
	s.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	ans := s.recv()
	if gjson.Get(ans, "id").Raw != "3" || !strings.Contains(gjson.Get(ans, "error.message").String(), "HTTP 500") {
		t.Fatalf("want an HTTP 500 error for id 3, got %s", ans)
	}
	s.Send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"jsonerr","arguments":{}}}`)
	jsonAns := s.recv()
	if gjson.Get(jsonAns, "id").Raw != "4" || gjson.Get(jsonAns, "error.code").Int() != -32001 ||
		gjson.Get(jsonAns, "error.message").String() != "invalid token [REDACTED]" {
		t.Fatalf("want the server's JSON-RPC error for id 4, the token scrubbed, got %s", jsonAns)
	}
	s.Stdin.Close()
	s.ExitCode()
	sentNew := false
	for _, r := range srv.requests() {
		if r.Header.Get("Authorization") == "Bearer "+newAccess {
			sentNew = true
		}
	}
	if !sentNew {
		t.Fatalf("the proxy never used the refreshed token; requests: %v", srv.requests())
	}
	reports, _ := os.ReadFile(journal)
	if !strings.Contains(string(reports), `"rpc_error"`) {
		t.Fatalf("the journal has no report of the call:\n%s", reports)
	}
	// The grant's secrets before the refresh were never sent, and are no longer held.
	for _, sec := range []string{newAccess, newRefresh, secret} {
		for name, text := range map[string]string{"the host's error": ans, "the host's JSON-RPC error": jsonAns, "the journal": string(reports), "stderr": s.Stderr.String()} {
			if strings.Contains(text, sec) {
				t.Errorf("%s holds a secret (%s):\n%s", name, sec, text)
			}
		}
	}
	if !strings.Contains(ans, "[REDACTED]") {
		t.Errorf("the quoted body was not scrubbed but dropped? %s", ans)
	}
}
