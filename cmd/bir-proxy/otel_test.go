package main

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

func TestHostPort(t *testing.T) {
	for in, want := range map[string]struct {
		host string
		port int
	}{
		"https://mcp.example.com/mcp": {"mcp.example.com", 443},
		"http://127.0.0.1:8080/mcp":   {"127.0.0.1", 8080},
		"http://[::1]:9/x":            {"::1", 9},
		"http://example.com":          {"example.com", 80},
		"::not a url":                 {"", 0},
	} {
		h, p := hostPort(in)
		if h != want.host || p != want.port {
			t.Errorf("%q: %q %d, want %q %d", in, h, p, want.host, want.port)
		}
	}
}

// With nothing configured, tracing starts nothing; a configuration that cannot be
// used is said, and the proxy goes on without it.
func TestStartTracingOffUnlessConfigured(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")
	t.Setenv("XDG_STATE_HOME", t.TempDir()) // the exporter's state file at stop
	var logs testutil.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	f := &proxyFlags{otlp: &otlpFlags{}, server: "s"}
	if tr, stop := f.startTracing(logger, "run-1"); tr != nil {
		stop()
		t.Fatal("tracing on with nothing configured")
	}
	f.otlp.endpoint = "ftp://nowhere"
	if tr, stop := f.startTracing(logger, "run-1"); tr != nil {
		stop()
		t.Fatal("tracing on with an unusable endpoint")
	}
	if logs.String() == "" {
		t.Fatal("an unusable configuration is not said")
	}
	f.otlp.endpoint = "http://127.0.0.1:1"
	f.url = "https://mcp.example.com:8443/mcp"
	tr, stop := f.startTracing(logger, "run-1")
	if tr == nil || tr.Transport != "tcp" || tr.ServerAddress != "mcp.example.com" || tr.ServerPort != 8443 {
		t.Fatalf("%+v", tr)
	}
	stop()
}

// passwordURLs are URLs whose password (h1dd3n?s3cr3t and the like) holds a '/', '?'
// or '#' unescaped, which end the authority by RFC 3986: cut there, the URL looked
// like it had no userinfo, and stderr showed it whole. base is the URL's start after
// the password's '@', path what follows it.
func passwordURLs(base string) []string {
	return []string{
		"http://user:h1dd3n/s3cr3t@" + base,
		"http://user:h1dd3n?s3cr3t@" + base,
		"http://user:h1dd3n#s3cr3t@" + base,
		"http://user:h1dd3n/s3cr3t@x@" + base,
		"http://user:h1dd3n%zz/s3cr3t@" + base,
	}
}

// noPassword fails t when stderr shows any piece of a passwordURLs password.
func noPassword(t *testing.T, what, stderr string) {
	t.Helper()
	if strings.Contains(stderr, "h1dd3n") || strings.Contains(stderr, "s3cr3t") {
		t.Errorf("%s: the password shows on stderr:\n%s", what, stderr)
	}
}

// TestOTLPEndpointPasswordNeverOnStderr: an OTLP endpoint with a password that holds
// '/', '?' or '#' (OTEL_EXPORTER_OTLP_ENDPOINT or --otlp-endpoint) is refused, and
// the line that says so shows no piece of the password; nor does anything later (a
// password "12/..." made a URL that parsed, with "user:12" for its host, and every
// failed export said it whole).
func TestOTLPEndpointPasswordNeverOnStderr(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	// Two that parse, the password's start taken for a port or a host, and its rest
	// for the path: refused for an endpoint (the exports' errors said the URL whole).
	urls := append(passwordURLs("127.0.0.1:1"), "http://user:12/h1dd3n@127.0.0.1:1", "http://us/h1dd3n:s3cr3t@127.0.0.1:1")
	for _, u := range urls {
		for _, flag := range []bool{false, true} {
			var s *testHost
			if flag {
				s = startProxy(t, nil, "--otlp-endpoint", u, "--", raw, "--reply")
			} else {
				s = startProxy(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + u}, "--", raw, "--reply")
			}
			s.Send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
			s.recv()
			s.end()
			what := fmt.Sprintf("%s (flag %v)", u, flag)
			noPassword(t, what, s.Stderr.String())
			if !strings.Contains(s.Stderr.String(), "OpenTelemetry is off") {
				t.Errorf("%s: not refused:\n%s", what, s.Stderr.String())
			}
		}
	}
}

// TestServerURLPasswordNeverOnStderr: a --url whose password holds '/', '?' or '#'
// is refused with no piece of the password on stderr (url.Parse's error, passed on,
// quoted the URL whole, and its detail a piece of it: "invalid port \":h1dd3n\"").
func TestServerURLPasswordNeverOnStderr(t *testing.T) {
	for _, u := range passwordURLs("127.0.0.1:1/mcp") {
		// With OAuth (its client reads the URL first), and without: --no-oauth, or an
		// Authorization header of the host's.
		for _, extra := range [][]string{nil, {"--no-oauth"}, {"--header", "Authorization: Bearer x"}} {
			s := startProxy(t, nil, append([]string{"--server", "pw", "--url", u}, extra...)...)
			s.Stdin.Close()
			if code := s.ExitCode(); code == 0 {
				t.Errorf("%s %q: exit status 0", u, extra)
			}
			noPassword(t, fmt.Sprintf("%s %q", u, extra), s.Stderr.String())
		}
	}
}
