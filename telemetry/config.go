// Package telemetry makes bir-proxy an OpenTelemetry source: MCP spans and metrics by
// the MCP semantic conventions, encoded as OTLP (protobuf or JSON) by hand and sent over
// HTTP by one goroutine with a bounded queue (docs/otel.md). Nothing here runs unless
// it is configured, and nothing here ever makes the proxy's pumps wait.
package telemetry

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL this exporter speaks.
const (
	ProtoProtobuf = "http/protobuf"
	ProtoJSON     = "http/json"
)

// Config is what the standard OTEL_* variables and --otlp-endpoint say.
type Config struct {
	// TracesURL and MetricsURL are where spans and metrics are POSTed; "" sends none.
	TracesURL  string
	MetricsURL string
	Protocol   string // ProtoProtobuf or ProtoJSON
	// Headers go with every export, and only to the configured endpoints' origins.
	Headers     [][2]string
	ServiceName string // "" leaves the default, bir-proxy/SERVER
	// Resource holds OTEL_RESOURCE_ATTRIBUTES (service.name among them is overridden
	// by OTEL_SERVICE_NAME, as the specification says).
	Resource       [][2]string
	Timeout        time.Duration // one export's bound (OTEL_EXPORTER_OTLP_TIMEOUT, default 10 s)
	MetricInterval time.Duration // OTEL_METRIC_EXPORT_INTERVAL, default 60 s
}

// Enabled says whether anything is to be exported.
func (c Config) Enabled() bool { return c.TracesURL != "" || c.MetricsURL != "" }

// Caps on what the environment may hand in: the env is the user's, but a value pasted
// wrong should make an error, not a megabyte header.
const (
	maxEnvValue = 8 << 10
	maxPairs    = 64
)

// FromEnv reads the configuration from getenv (os.Getenv) and the --otlp-endpoint flag
// (flagEndpoint, "" when not given), which is a base endpoint like
// OTEL_EXPORTER_OTLP_ENDPOINT and wins over it. With neither endpoint set, or with
// OTEL_SDK_DISABLED=true, the Config is not Enabled and no error is returned.
func FromEnv(getenv func(string) string, flagEndpoint string) (Config, error) {
	var c Config
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}
	base := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if flagEndpoint != "" {
		base = flagEndpoint
	}
	var err error
	if c.TracesURL, err = signalURL(base, getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), "v1/traces"); err != nil {
		return Config{}, fmt.Errorf("the OTLP traces endpoint: %w", err)
	}
	if c.MetricsURL, err = signalURL(base, getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"), "v1/metrics"); err != nil {
		return Config{}, fmt.Errorf("the OTLP metrics endpoint: %w", err)
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		c.TracesURL = ""
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_METRICS_EXPORTER")), "none") {
		c.MetricsURL = ""
	}
	if !c.Enabled() {
		return Config{}, nil
	}
	switch p := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL")); p {
	case "", ProtoProtobuf:
		c.Protocol = ProtoProtobuf
	case ProtoJSON:
		c.Protocol = ProtoJSON
	default:
		return Config{}, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: bir-proxy speaks %s and %s (not gRPC)", p, ProtoProtobuf, ProtoJSON)
	}
	if c.Headers, err = pairs(getenv("OTEL_EXPORTER_OTLP_HEADERS")); err != nil {
		return Config{}, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %w", err)
	}
	for _, h := range c.Headers {
		if !validHeaderName(h[0]) || strings.ContainsAny(h[1], "\r\n\x00") {
			return Config{}, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %q is not a header", h[0])
		}
	}
	if c.Resource, err = pairs(getenv("OTEL_RESOURCE_ATTRIBUTES")); err != nil {
		return Config{}, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	c.ServiceName = strings.TrimSpace(getenv("OTEL_SERVICE_NAME"))
	if c.Timeout, err = millis(getenv, "OTEL_EXPORTER_OTLP_TIMEOUT", 10*time.Second); err != nil {
		return Config{}, err
	}
	if c.MetricInterval, err = millis(getenv, "OTEL_METRIC_EXPORT_INTERVAL", 60*time.Second); err != nil {
		return Config{}, err
	}
	return c, nil
}

// signalURL is a signal's endpoint: its own variable used as it is, or else the base
// with the signal's path appended (the specification's rule).
func signalURL(base, own, path string) (string, error) {
	own = strings.TrimSpace(own)
	if own != "" {
		return checkURL(own)
	}
	if base == "" {
		return "", nil
	}
	u, err := checkURL(base)
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(u, "/") {
		u += "/"
	}
	return u + path, nil
}

func checkURL(s string) (string, error) {
	if len(s) > maxEnvValue {
		return "", errors.New("too long")
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: not an http or https URL", s)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q: no host", s)
	}
	if u.User != nil {
		return "", fmt.Errorf("%q: credentials in the URL (put them in OTEL_EXPORTER_OTLP_HEADERS)", u.Redacted())
	}
	return s, nil
}

// pairs reads the specification's "key1=value1,key2=value2" lists (W3C Baggage
// syntax without properties), values percent-decoded.
func pairs(s string) ([][2]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if len(s) > maxEnvValue {
		return nil, errors.New("too long")
	}
	var out [][2]string
	for item := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		if len(out) == maxPairs {
			return nil, fmt.Errorf("more than %d entries", maxPairs)
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", item)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("the value of %q: %w", k, err)
		}
		out = append(out, [2]string{k, dv})
	}
	return out, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func millis(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 3600_000 {
		return 0, fmt.Errorf("%s=%q: not a number of milliseconds", name, v)
	}
	return time.Duration(n) * time.Millisecond, nil
}
