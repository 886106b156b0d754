// Package telemetry makes bir-proxy an OpenTelemetry source: the OTEL_* configuration,
// the W3C trace context, spans and metrics encoded as OTLP (protobuf or JSON) by hand
// and sent over HTTP by one goroutine with a bounded queue (docs/otel.md). Which spans
// and metrics the MCP semantic conventions make of a session is mcpspans', intercept's
// Observer. Nothing here runs unless it is configured, and nothing here ever makes the
// proxy's pumps wait.
package telemetry

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/redact"
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
	// Protocol, Headers and Timeout are the generic settings (OTEL_EXPORTER_OTLP_*):
	// a signal's own (Traces, Metrics) take precedence where set.
	Protocol string // ProtoProtobuf or ProtoJSON
	// Headers go with every export, and only to the configured endpoints' origins.
	Headers [][2]string
	// Traces and Metrics are OTEL_EXPORTER_OTLP_TRACES_* and _METRICS_*: a field left
	// zero takes the generic one (Headers: nil; a signal's headers replace the
	// generic ones, they are not merged).
	Traces, Metrics Signal
	ServiceName     string // "" leaves the default, bir-proxy/SERVER
	// Resource holds OTEL_RESOURCE_ATTRIBUTES (service.name among them is overridden
	// by OTEL_SERVICE_NAME, as the specification says).
	Resource       [][2]string
	Timeout        time.Duration // one export's bound (OTEL_EXPORTER_OTLP_TIMEOUT, default 10 s)
	MetricInterval time.Duration // OTEL_METRIC_EXPORT_INTERVAL, default 60 s
}

// Signal is one signal's own protocol, headers and timeout.
type Signal struct {
	Protocol string
	Headers  [][2]string
	Timeout  time.Duration
}

// TracesSignal and MetricsSignal are the settings each signal's exports use: its own,
// else the generic ones.
func (c Config) TracesSignal() Signal  { return c.Traces.or(c) }
func (c Config) MetricsSignal() Signal { return c.Metrics.or(c) }

func (s Signal) or(c Config) Signal {
	if s.Protocol == "" {
		s.Protocol = c.Protocol
	}
	if s.Protocol == "" {
		s.Protocol = ProtoProtobuf
	}
	if s.Headers == nil {
		s.Headers = c.Headers
	}
	if s.Timeout <= 0 {
		s.Timeout = c.Timeout
	}
	if s.Timeout <= 0 {
		s.Timeout = 10 * time.Second
	}
	return s
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
	if c.Protocol, err = protocol(getenv, "OTEL_EXPORTER_OTLP_PROTOCOL"); err != nil {
		return Config{}, err
	}
	if c.Headers, err = headers(getenv, "OTEL_EXPORTER_OTLP_HEADERS"); err != nil {
		return Config{}, err
	}
	if c.Timeout, err = millis(getenv, "OTEL_EXPORTER_OTLP_TIMEOUT", 10*time.Second); err != nil {
		return Config{}, err
	}
	for _, sig := range []struct {
		name string
		s    *Signal
	}{{"TRACES", &c.Traces}, {"METRICS", &c.Metrics}} {
		v := "OTEL_EXPORTER_OTLP_" + sig.name + "_"
		if sig.s.Protocol, err = protocol(getenv, v+"PROTOCOL"); err != nil {
			return Config{}, err
		}
		if sig.s.Headers, err = headers(getenv, v+"HEADERS"); err != nil {
			return Config{}, err
		}
		if sig.s.Timeout, err = millis(getenv, v+"TIMEOUT", 0); err != nil {
			return Config{}, err
		}
	}
	if c.Protocol == "" {
		c.Protocol = ProtoProtobuf
	}
	if c.Resource, err = pairs(getenv("OTEL_RESOURCE_ATTRIBUTES")); err != nil {
		return Config{}, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	c.ServiceName = strings.TrimSpace(getenv("OTEL_SERVICE_NAME"))
	if c.MetricInterval, err = millis(getenv, "OTEL_METRIC_EXPORT_INTERVAL", 60*time.Second); err != nil {
		return Config{}, err
	}
	return c, nil
}

// protocol reads one of the PROTOCOL variables; "" when it is not set.
func protocol(getenv func(string) string, name string) (string, error) {
	switch p := strings.TrimSpace(getenv(name)); p {
	case "", ProtoProtobuf, ProtoJSON:
		return p, nil
	default:
		if len(p) > 64 {
			p = p[:64] + "..."
		}
		return "", fmt.Errorf("%s=%q: bir-proxy speaks %s and %s (not gRPC)", name, p, ProtoProtobuf, ProtoJSON)
	}
}

// headers reads one of the HEADERS variables: nil when it is not set (or holds no
// pair). A name that is not a token, or a value (once percent-decoded) with a control
// character in it, is refused here, at start: a header must never be able to end
// itself and start another header or request line. The error names the header, never
// its value (an API key).
func headers(getenv func(string) string, name string) ([][2]string, error) {
	hs, err := pairs(getenv(name))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, h := range hs {
		if !validHeaderName(h[0]) {
			// Shown only up to where it stops being a name: past it may be the value
			// ("Authorization Bearer TOKEN=").
			i := 0 // the first byte that is not a name's (pairs refused an empty name)
			for i < len(h[0]) && validHeaderName(h[0][i:i+1]) {
				i++
			}
			return nil, fmt.Errorf("%s: %q... is not a header name (byte 0x%02x at %d)", name, redact.Label(h[0][:i], 64), h[0][i], i)
		}
		if i := controlAt(h[1]); i >= 0 {
			return nil, fmt.Errorf("%s: the value of %q holds a control character (byte 0x%02x at %d, after percent-decoding); a header value cannot", name, h[0], h[1][i], i)
		}
	}
	return hs, nil
}

// controlAt is the index of the first byte of v that a header value may not hold
// (RFC 9110 field-value: CTLs but horizontal tab, and DEL), -1 when none.
func controlAt(v string) int {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return i
		}
	}
	return -1
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
	// Appended to the URL's path: a query or fragment stays after it (checkURL
	// parsed u, so its first '?' or '#' ends the path).
	rest := ""
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u, rest = u[:i], u[i:]
	}
	if !strings.HasSuffix(u, "/") {
		u += "/"
	}
	return u + path + rest, nil
}

func checkURL(s string) (string, error) {
	if len(s) > maxEnvValue {
		return "", errors.New("too long")
	}
	// Errors show the URL without its userinfo, which may be a password or a token
	// (url.Parse's own error quotes the whole input).
	shown, hidden := withoutUserinfo(s)
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if hidden {
			// Its detail quotes a piece of the input ("invalid port \":pa\" after
			// host"), which can be of a password holding a '/', '?' or '#'.
			return "", fmt.Errorf("%q: %s", shown, hideQuoted(err.Error()))
		}
		return "", fmt.Errorf("%q: %w", shown, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: not an http or https URL", shown)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q: no host", shown)
	}
	if u.User != nil || hidden {
		// hidden with no User: an '@' past the host, as in "http://user:12/ss@host",
		// whose password's '/' ends the host: a parse takes "user:12" for it, and the
		// exports' errors then said the URL whole.
		return "", fmt.Errorf("%q: credentials in the URL (put them in OTEL_EXPORTER_OTLP_HEADERS)", shown)
	}
	return s, nil
}

// withoutUserinfo is s with everything between the authority's start and the last
// '@' after it shown as xxxxx; hidden says there was such an '@'. That is the
// userinfo, and more when a password holds a '/', '?' or '#' unescaped: by RFC 3986
// they end the authority, but people paste such URLs, and cutting there first left
// the password whole in the message. An '@' in a path is hidden with what comes
// before it: an error shows less of such a URL, never a password.
func withoutUserinfo(s string) (string, bool) {
	i := strings.Index(s, "//") + 2 // the authority's start
	if i < 2 {
		i = strings.IndexByte(s, ':') + 1 // "http:user:pass@host" has none
	}
	at := strings.LastIndexByte(s[i:], '@')
	if at < 0 {
		return s, false
	}
	return s[:i] + "xxxxx" + s[i+at:], true
}

// hideQuoted is msg with what it quotes shown as "xxxxx".
func hideQuoted(msg string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(msg, '"')
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		b.WriteString(msg[:i])
		b.WriteString(`"xxxxx"`)
		j := closingQuote(msg, i+1)
		if j < 0 {
			return b.String()
		}
		msg = msg[j+1:]
	}
}

// closingQuote is the index of the '"' that closes a Go-quoted string begun before
// i, -1 when none does.
func closingQuote(s string, i int) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
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
	entry := 0
	for item := range strings.SplitSeq(s, ",") {
		entry++
		if strings.TrimSpace(item) == "" {
			continue
		}
		if len(out) == maxPairs {
			return nil, fmt.Errorf("more than %d entries", maxPairs)
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			// Not quoted: "Authorization: Bearer TOKEN" is a header's usual mistake.
			return nil, fmt.Errorf("entry %d (of %d bytes) is not key=value", entry, len(item))
		}
		v = strings.TrimSpace(v)
		if i := badEscape(v); i >= 0 {
			// Not the escape itself: the value may be a secret.
			return nil, fmt.Errorf("the value of %q: malformed percent-encoding at byte %d (a %% must start %%XX, two hex digits)", redact.Label(k, 64), i)
		}
		dv, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("the value of %q: malformed percent-encoding", redact.Label(k, 64))
		}
		out = append(out, [2]string{k, dv})
	}
	return out, nil
}

// badEscape is the index of the first '%' of v not followed by two hex digits, -1
// when none.
func badEscape(v string) int {
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && (i+2 >= len(v) || !ishex(v[i+1]) || !ishex(v[i+2])) {
			return i
		}
	}
	return -1
}

func ishex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

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
