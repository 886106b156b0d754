package main

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/oauthtest"
)

// holdPort serves plain HTTP on 127.0.0.1:port, as an unrelated program would.
func holdPort(t *testing.T, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("some dev server"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// TestOAuthCallbackPortHeldByAnotherProgram: when the callback port is held by a
// program that is not a bir-proxy, no sign-in is coming: the host's request is
// answered with that, naming the port and --oauth-port, at once rather than after
// --oauth-wait with "finish it in the browser" (there is no browser page), and
// `bir-proxy login` says so rather than wait out its --timeout.
func TestOAuthCallbackPortHeldByAnotherProgram(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{DCR: true})
	holdPort(t, w.port)
	s := w.proxy("", "--oauth-wait", "1m")
	s.Send(oauthInit)
	hostError(t, s, "0", "needs an OAuth sign-in", "127.0.0.1:"+strconv.Itoa(w.port), "another program", "--oauth-port")
	s.end()
	code, out := w.cli("", "login", "--url", w.srv.MCPURL, "--oauth-port", strconv.Itoa(w.port), "--timeout", "1m")
	if code == 0 || !strings.Contains(out, "another program") || !strings.Contains(out, "--oauth-port") {
		t.Errorf("login: exit %d: %s", code, out)
	}
	if n := w.browserVisits(); n != 0 {
		t.Errorf("%d browser visits", n)
	}
}

// TestOAuthDebugLogHoldsNoSecret: at --log-level debug, through a sign-in, an expiry
// and its refresh (rotated), a revoked grant and the sign-in again, and a step-up,
// no token, code or secret the fixture issued is on stderr (checkClean).
func TestOAuthDebugLogHoldsNoSecret(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, oauthtest.Options{MetadataInHeader: true, DCR: true, RotateRefresh: true,
		ChallengeScope: "mcp:read", StepUpTool: "admin", StepUpScope: "mcp:admin"})
	s := w.proxy("", "--log-level", "debug")
	handshake(t, s)
	wantResult(t, s, echo(t, s, 1, "echo"))
	w.srv.ExpireAccessTokens()
	wantResult(t, s, echo(t, s, 2, "echo"))
	w.srv.Revoke()
	wantResult(t, s, echo(t, s, 3, "echo"))
	wantResult(t, s, echo(t, s, 4, "admin"))
	s.end()
	if c := w.srv.Counts(); c.Refreshes < 1 || c.Authorizes < 3 {
		t.Errorf("counts %+v: want a refresh and three sign-ins", c)
	}
	if !strings.Contains(s.Stderr.String(), "level=DEBUG") && !strings.Contains(s.Stderr.String(), "DEBUG") {
		t.Errorf("no debug lines: %s", s.Stderr.String())
	}
}
