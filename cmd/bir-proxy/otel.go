package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/bir-dev/bir-proxy/internal/version"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/telemetry"
	"github.com/bir-dev/bir-proxy/telemetry/mcpspans"
)

// otlpFlags are the OpenTelemetry flags (docs/otel.md); the OTEL_* variables say
// the rest.
type otlpFlags struct {
	endpoint string
	capture  bool
}

func defineOTLPFlags(fs *flag.FlagSet) *otlpFlags {
	o := &otlpFlags{}
	fs.StringVar(&o.endpoint, "otlp-endpoint", "", "send a span per request and the MCP metrics to this OTLP/HTTP `URL` (a base, like OTEL_EXPORTER_OTLP_ENDPOINT, which it overrides); the OTEL_* variables also switch it on")
	fs.BoolVar(&o.capture, "otlp-capture", false, "put the redacted, clipped arguments and result of each tools/call in its span (gen_ai.tool.call.arguments and .result)")
	return o
}

// otlpFlush bounds the exit's flush of what is queued for the collector.
const otlpFlush = time.Second

// startTracing starts the exporter when the flags or the environment configure one;
// nil and a no-op when they do not (no connection, no goroutine, no timer). A
// configuration that cannot be used is said on stderr, and the session goes on
// without tracing.
func (f *proxyFlags) startTracing(logger *slog.Logger, instance string) (*mcpspans.Tracing, func()) {
	cfg, err := telemetry.FromEnv(os.Getenv, f.otlp.endpoint)
	if err != nil {
		logger.Warn("OpenTelemetry is off: its configuration cannot be used", "err", err)
		return nil, func() {}
	}
	if !cfg.Enabled() {
		return nil, func() {}
	}
	x := telemetry.New(telemetry.Options{Config: cfg, Version: serviceVersion(), Server: f.server, Logger: logger, StatePath: otelStatePath(f.server),
		InstanceID: instance})
	tr := &mcpspans.Tracing{Exporter: x, Capture: f.otlp.capture, Transport: "pipe", Logger: logger}
	if f.url != "" {
		tr.Transport = "tcp"
		tr.ServerAddress, tr.ServerPort = hostPort(f.url)
	}
	return tr, func() {
		ctx, cancel := context.WithTimeout(context.Background(), otlpFlush)
		defer cancel()
		st := x.Close(ctx)
		logger.Debug("OpenTelemetry: exported", "spans", st.Exported, "dropped", st.Dropped, "rejected", st.Rejected)
	}
}

// tracingConfigured says the flags or the environment switch tracing on (startTracing
// will start an exporter).
func (f *proxyFlags) tracingConfigured() bool {
	cfg, err := telemetry.FromEnv(os.Getenv, f.otlp.endpoint)
	return err == nil && cfg.Enabled()
}

// otelStatePath is the state file of server's exporter, "" when there is no state
// directory (then none is written).
func otelStatePath(server string) string {
	state, err := recorder.DefaultStateDir()
	if err != nil {
		return ""
	}
	return telemetry.StatePath(state, server)
}

// hostPort is server.address and server.port of a server's URL (the port its
// scheme implies when it names none); ${VAR} references are left out of it.
func hostPort(raw string) (string, int) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", 0
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	n, _ := strconv.Atoi(port)
	if net.ParseIP(host) == nil && len(host) > 253 {
		return "", 0
	}
	return host, n
}

// serviceVersion is the module version for service.version: the tag or
// pseudo-version, or "dev" when the build recorded none.
func serviceVersion() string {
	if v := version.Get().Module; v != "" {
		return v
	}
	return "dev"
}
