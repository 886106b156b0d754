package main

import (
	"bufio"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Issue 21 item 20: the URL's user name was scrubbed from every text, so a server's
// error quoting "user-agent" reached the host as "[REDACTED]-agent". The password is
// a secret and is scrubbed; a user name only when it looks like a credential (a token
// given as the user name).
func TestRemoteURLUserNameScrubbedOnlyWhenACredential(t *testing.T) {
	t.Parallel()
	const password = "pw-secret-3c5e7a9b1d"
	const tokenUser = "ghu4f8A2c9E1b7D3k5M"
	srv := startRawServer(t, func(r *rawReq, w *bufio.Writer, _ <-chan struct{}) {
		switch {
		case r.Method == "GET":
			writeResp(w, "405 Method Not Allowed", nil, "")
		default:
			writeResp(w, "400 Bad Request", []string{"Content-Type: text/plain"},
				"bad user-agent header from user; password "+password+", token "+tokenUser)
		}
	})
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range []struct {
		url, keep, secret string
	}{
		{"http://user:" + password + "@" + host + "/mcp", "bad user-agent header from user", password},
		{"http://" + tokenUser + "@" + host + "/mcp", "bad user-agent header from user", tokenUser},
	} {
		s := startProxy(t, nil, "--server", "ui", "--url", c.url, "--transport", "http")
		s.Send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		ans := s.recv()
		s.Stdin.Close()
		s.ExitCode()
		msg := gjson.Get(ans, "error.message").String()
		if gjson.Get(ans, "id").Raw != "1" || !strings.Contains(msg, "HTTP 400") {
			t.Fatalf("want an HTTP 400 error for id 1, got %s", ans)
		}
		if !strings.Contains(msg, c.keep) {
			t.Errorf("the quoted error lost its words (a common user name scrubbed): %s", msg)
		}
		if strings.Contains(msg, c.secret) || strings.Contains(s.Stderr.String(), c.secret) {
			t.Errorf("a secret (%s) shows: %s\n%s", c.secret, msg, s.Stderr.String())
		}
	}
}
