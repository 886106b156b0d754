package main

import (
	"log/slog"
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
	if tr, stop := f.startTracing(logger); tr != nil {
		stop()
		t.Fatal("tracing on with nothing configured")
	}
	f.otlp.endpoint = "ftp://nowhere"
	if tr, stop := f.startTracing(logger); tr != nil {
		stop()
		t.Fatal("tracing on with an unusable endpoint")
	}
	if logs.String() == "" {
		t.Fatal("an unusable configuration is not said")
	}
	f.otlp.endpoint = "http://127.0.0.1:1"
	f.url = "https://mcp.example.com:8443/mcp"
	tr, stop := f.startTracing(logger)
	if tr == nil || tr.Transport != "tcp" || tr.ServerAddress != "mcp.example.com" || tr.ServerPort != 8443 {
		t.Fatalf("%+v", tr)
	}
	stop()
}
