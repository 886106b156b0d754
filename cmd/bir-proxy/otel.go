package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/internal/version"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/redact"
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

// otelStateDir is where the proxies' exporters leave their counts for `bir-proxy
// status`: the state directory's otel/ (next to the journal and the spool).
func otelStateDir() string {
	state, err := recorder.DefaultStateDir()
	if err != nil {
		return ""
	}
	return filepath.Join(state, "otel")
}

// otelStatePath is the state file of server's exporter, "" when there is no state
// directory (then none is written). Its name is the server's as the journal's is
// (escaped, so two names never share a file).
func otelStatePath(server string) string {
	dir := otelStateDir()
	if dir == "" {
		return ""
	}
	name := strings.TrimSuffix(filepath.Base(recorder.JournalPath("", server)), ".jsonl")
	return filepath.Join(dir, name+telemetry.StateSuffix)
}

// otelStatus is what `bir-proxy status` says of the exporters' last states, a line
// per server that has one, each ending in a newline; "" when none.
func otelStatus(now time.Time) string {
	dir := otelStateDir()
	if dir == "" {
		return ""
	}
	sts, err := telemetry.ReadStates(dir)
	if err != nil {
		return "OpenTelemetry: " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, st := range sts {
		when := "at its exit"
		if st.Running {
			when = fmt.Sprintf("while running (pid %d)", st.PID)
		}
		fmt.Fprintf(&b, "OpenTelemetry: %s: %d spans exported, %d dropped, %d rejected by the collector; said %s, %s ago",
			redact.Label(st.Server, 128), st.Exported, st.Dropped, st.Rejected, when, age(now, st.Written))
		if st.LastError != "" && (st.Dropped > 0 || st.Rejected > 0) {
			fmt.Fprintf(&b, "; the last trouble, %s ago: %s", age(now, st.LastAt), redact.Label(st.LastError, 512))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// age is how long ago t was, rounded for a person.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	default:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
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
