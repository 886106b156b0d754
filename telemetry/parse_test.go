package telemetry

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/backoff"
)

func TestParseTraceparent(t *testing.T) {
	good := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tc, ok := ParseTraceparent([]byte(good))
	if !ok || tc.TraceID[0] != 0x4b || tc.TraceID[15] != 0x36 || tc.SpanID[1] != 0xf0 || tc.SpanID[7] != 0xb7 || !tc.Sampled() {
		t.Fatalf("%v %v", tc, ok)
	}
	if tc, ok := ParseTraceparent([]byte("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-next")); !ok || tc.Sampled() {
		t.Fatal("a later version's prefix is read")
	}
	for _, bad := range []string{
		"", good[:54], good + "-", good + "x",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span id
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
		"0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
		"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + strings.Repeat("a", 300),
	} {
		if _, ok := ParseTraceparent([]byte(bad)); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCleanTraceState(t *testing.T) {
	if s := CleanTraceState([]byte("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")); s != "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" {
		t.Fatal(s)
	}
	for _, bad := range []string{strings.Repeat("a", 513), "a=b\n", strings.Repeat("a=b,", 33), "a=\xff"} {
		if CleanTraceState([]byte(bad)) != "" {
			t.Errorf("%q kept", bad)
		}
	}
}

func FuzzParseTraceparent(f *testing.F) {
	f.Add([]byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	f.Add([]byte("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x"))
	f.Add([]byte("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tc, ok := ParseTraceparent(b)
		if !ok {
			return
		}
		// What it accepts is the lowercase hex form of what it read.
		s := string(b)
		if s[:2] == "ff" || tc.TraceID == [16]byte{} || tc.SpanID == [8]byte{} || strings.ToLower(s[:55]) != s[:55] {
			t.Fatalf("accepted %q", b)
		}
		if s[:2] == "00" && len(s) != 55 {
			t.Fatalf("accepted %q", b)
		}
	})
}

// FuzzFromMeta: a host's params, whatever they hold, give a trace context only
// from a _meta.traceparent ParseTraceparent accepts, and a tracestate only with it,
// clean; spelt with escapes or not, as JSON.parse reads them.
func FuzzFromMeta(f *testing.F) {
	f.Add([]byte(`{"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=b"}}`))
	f.Add([]byte(`{"_m\u0065ta":{"tr\u0061ceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}}`))
	f.Add([]byte(`{"_meta":{"traceparent":1},"_meta":{"traceparent":"x"}}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		tc, ok := FromMeta(params)
		if !ok {
			if tc.State != "" {
				t.Fatalf("a tracestate without a traceparent from %q", params)
			}
			return
		}
		if tc.TraceID == [16]byte{} || tc.SpanID == [8]byte{} {
			t.Fatalf("zero ids from %q", params)
		}
		if tc.State != "" && CleanTraceState([]byte(tc.State)) != tc.State {
			t.Fatalf("tracestate %q not clean", tc.State)
		}
	})
}

func FuzzCleanTraceState(f *testing.F) {
	f.Add([]byte("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if s := CleanTraceState(b); s != "" && (s != string(b) || len(s) > maxTraceState) {
			t.Fatalf("%q from %q", s, b)
		}
	})
}

func TestPartialSuccess(t *testing.T) {
	// ExportTraceServiceResponse{partial_success{rejected_spans: 3, error_message: "no"}}
	body := []byte{0x0a, 0x06, 0x08, 0x03, 0x12, 0x02, 'n', 'o'}
	if n, msg, ok := partialSuccess(body, false, ""); !ok || n != 3 || msg != "no" {
		t.Fatal(n, msg, ok)
	}
	if n, _, ok := partialSuccess(nil, false, ""); !ok || n != 0 {
		t.Fatal("an empty answer is a full success")
	}
	if _, _, ok := partialSuccess([]byte{0x0a, 0x7f}, false, ""); ok {
		t.Fatal("a length past the end is refused")
	}
	if n, msg, ok := partialSuccess([]byte(`{"partialSuccess":{"rejectedSpans":"2","errorMessage":"x"}}`), true, "rejectedSpans"); !ok || n != 2 || msg != "x" {
		t.Fatal(n, msg, ok)
	}
	if n, _, ok := partialSuccess([]byte(`{"partialSuccess":{"rejectedSpans":5}}`), true, "rejectedSpans"); !ok || n != 5 {
		t.Fatal(n, ok)
	}
	if n, _, ok := partialSuccess([]byte(`{}`), true, "rejectedSpans"); !ok || n != 0 {
		t.Fatal(n, ok)
	}
}

func FuzzPartialSuccess(f *testing.F) {
	f.Add([]byte{0x0a, 0x06, 0x08, 0x03, 0x12, 0x02, 'n', 'o'}, false)
	f.Add([]byte(`{"partialSuccess":{"rejectedSpans":"2","errorMessage":"x"}}`), true)
	f.Fuzz(func(t *testing.T, b []byte, isJSON bool) {
		if _, msg, _ := partialSuccess(b, isJSON, "rejectedSpans"); len(msg) > 256 {
			t.Fatal("message not clipped")
		}
	})
}

// A collector's Retry-After silences the exporter at most 60 s, its backoff 32 s.
func TestRetryAfterBound(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"3": 3 * time.Second, "0": time.Second, "x": time.Second, "100000": time.Minute, "1000000000": time.Minute,
		now.Add(5 * time.Second).Format(http.TimeFormat): 5 * time.Second,
	} {
		if got := pace.Next(0, backoff.RetryAfter(v, now)); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
	if got := pace.Next(40, 0); got != 32*time.Second {
		t.Errorf("the backoff's cap: %v", got)
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnv(t *testing.T) {
	c, err := FromEnv(env(nil), "")
	if err != nil || c.Enabled() {
		t.Fatal("off unless configured", c, err)
	}
	c, err = FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
		"OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x-team = t ", "OTEL_SERVICE_NAME": "svc",
		"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=dev,service.name=ignored"}), "")
	if err != nil || c.TracesURL != "http://127.0.0.1:4318/v1/traces" || c.MetricsURL != "http://127.0.0.1:4318/v1/metrics" || c.Protocol != ProtoProtobuf {
		t.Fatal(c, err)
	}
	if len(c.Headers) != 2 || c.Headers[0] != [2]string{"api-key", "a b"} || c.Headers[1] != [2]string{"x-team", "t"} {
		t.Fatal(c.Headers)
	}
	res := attrsOf(baseResource(c, "1.0", "echo", "run-1"))
	if res["service.name"] != "svc" || res["deployment.environment"] != "dev" || res["service.version"] != "1.0" || res["service.instance.id"] != "run-1" {
		t.Fatal(res)
	}
	if res := attrsOf(baseResource(Config{}, "1.0", "echo", "")); res["service.name"] != "bir-proxy/echo" || res["service.instance.id"] != "" {
		t.Fatal(res)
	}
	// The user's resource attributes win over the run's id.
	c.Resource = append(c.Resource, [2]string{"service.instance.id", "mine"})
	if res := attrsOf(baseResource(c, "1.0", "echo", "run-1")); res["service.instance.id"] != "mine" {
		t.Fatal(res)
	}
	c, err = FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1/base/",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:2/t", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}), "")
	if err != nil || c.TracesURL != "http://b:2/t" || c.MetricsURL != "http://a:1/base/v1/metrics" || c.Protocol != ProtoJSON {
		t.Fatal(c, err)
	}
	c, err = FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1"}), "http://flag:3")
	if err != nil || c.TracesURL != "http://flag:3/v1/traces" {
		t.Fatal("the flag wins over the base variable", c, err)
	}
	c, err = FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_SDK_DISABLED": "true"}), "http://flag:3")
	if err != nil || c.Enabled() {
		t.Fatal("OTEL_SDK_DISABLED turns everything off", c, err)
	}
	c, err = FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:2/t"}), "")
	if err != nil || c.MetricsURL != "" {
		t.Fatal("no metrics endpoint is configured: none is made up", c, err)
	}
	for _, bad := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://a"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://u:p@a"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_HEADERS": "bad header=1"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_HEADERS": "a=%0d%0ab"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon"},
	} {
		if _, err := FromEnv(env(bad), ""); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func attrsOf(as []Attr) map[string]string {
	m := map[string]string{}
	for _, a := range as {
		m[a.Key] = a.Str
	}
	return m
}

func FuzzPairs(f *testing.F) {
	f.Add("a=b,c=%20d")
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := pairs(s)
		if err == nil && len(ps) > maxPairs {
			t.Fatal("too many pairs")
		}
	})
}

// The per-signal variables (OTEL_EXPORTER_OTLP_TRACES_*, _METRICS_*) take precedence
// over the generic ones, each signal on its own; a signal's headers replace the
// generic headers rather than add to them.
func TestFromEnvPerSignal(t *testing.T) {
	base := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	c, err := FromEnv(env(with()), "")
	if err != nil {
		t.Fatal(err)
	}
	if tr, mt := c.TracesSignal(), c.MetricsSignal(); tr.Protocol != ProtoProtobuf || mt.Protocol != ProtoProtobuf ||
		tr.Timeout != 10*time.Second || mt.Timeout != 10*time.Second || tr.Headers != nil || mt.Headers != nil {
		t.Fatalf("defaults: %+v %+v", tr, mt)
	}
	c, err = FromEnv(env(with(
		"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json",
		"OTEL_EXPORTER_OTLP_HEADERS", "a=generic,b=2",
		"OTEL_EXPORTER_OTLP_TIMEOUT", "3000",
	)), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Signal{c.TracesSignal(), c.MetricsSignal()} {
		if s.Protocol != ProtoJSON || s.Timeout != 3*time.Second || len(s.Headers) != 2 || s.Headers[0] != [2]string{"a", "generic"} {
			t.Fatalf("the generic variables apply to both signals: %+v", s)
		}
	}
	c, err = FromEnv(env(with(
		"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json",
		"OTEL_EXPORTER_OTLP_HEADERS", "a=generic,b=2",
		"OTEL_EXPORTER_OTLP_TIMEOUT", "3000",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "a=traces",
		"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1500",
		"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "7000",
	)), "")
	if err != nil {
		t.Fatal(err)
	}
	tr, mt := c.TracesSignal(), c.MetricsSignal()
	if tr.Protocol != ProtoProtobuf || tr.Timeout != 1500*time.Millisecond || len(tr.Headers) != 1 || tr.Headers[0] != [2]string{"a", "traces"} {
		t.Fatalf("the traces' own variables win: %+v", tr)
	}
	if mt.Protocol != ProtoJSON || mt.Timeout != 7*time.Second || len(mt.Headers) != 2 || mt.Headers[0] != [2]string{"a", "generic"} {
		t.Fatalf("the metrics keep the generic protocol and headers, with their own timeout: %+v", mt)
	}
	c, err = FromEnv(env(with("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/json", "OTEL_EXPORTER_OTLP_METRICS_HEADERS", "m=1")), "")
	if err != nil {
		t.Fatal(err)
	}
	if tr, mt := c.TracesSignal(), c.MetricsSignal(); tr.Protocol != ProtoProtobuf || tr.Headers != nil || mt.Protocol != ProtoJSON || len(mt.Headers) != 1 {
		t.Fatalf("a metrics variable leaves the traces alone: %+v %+v", tr, mt)
	}
	for _, bad := range [][]string{
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"},
		{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/xml"},
		{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "-1"},
		{"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "1s"},
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "a=%0a"},
		{"OTEL_EXPORTER_OTLP_METRICS_HEADERS", "a b=1"},
	} {
		if _, err := FromEnv(env(with(bad...)), ""); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v (want an error naming the variable)", bad, err)
		}
	}
}

// A header value that holds a control character once percent-decoded (CR, LF, NUL,
// any CTL but tab, DEL), or malformed percent-encoding, is refused when the
// configuration is read, with an error naming the header and never its value.
func TestFromEnvRefusesHeaderInjection(t *testing.T) {
	const secret = "s3cr3t"
	for _, v := range []string{
		"k=" + secret + "%0d%0aX-Injected: 1",
		"k=" + secret + "%0aGET / HTTP/1.1",
		"k=" + secret + "%00",
		"k=" + secret + "%01",
		"k=" + secret + "%7f",
		"k=" + secret + "%1b[31m",
		"k=" + secret + "\r\nX-Injected: 1",
		"k=" + secret + "\x00",
		"k=" + secret + "%zz",
		"k=" + secret + "%4",
		"k=" + secret + "%",
		"k=%G0" + secret,
	} {
		_, err := FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_HEADERS": v}), "")
		if err == nil {
			t.Errorf("%q accepted", v)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "OTEL_EXPORTER_OTLP_HEADERS") || !strings.Contains(msg, `"k"`) || strings.Contains(msg, secret) {
			t.Errorf("%q: %q (want the variable and the header named, the value not shown)", v, msg)
		}
	}
	c, err := FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a",
		"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Basic%20dTpw,x-tab=a%09b,x-eq=a==,x-utf8=%C3%A9"}), "")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"authorization", "Basic dTpw"}, {"x-tab", "a\tb"}, {"x-eq", "a=="}, {"x-utf8", "é"}}
	if fmt.Sprint(c.Headers) != fmt.Sprint(want) {
		t.Fatalf("%q, want %q", c.Headers, want)
	}
}

func FuzzHeaders(f *testing.F) {
	f.Add("a=b,c=%20d")
	f.Add("k=%0d%0aX: 1")
	f.Add("k=%")
	f.Fuzz(func(t *testing.T, s string) {
		hs, err := headers(func(string) string { return s }, "H")
		if err != nil {
			return
		}
		for _, h := range hs {
			if !validHeaderName(h[0]) || strings.ContainsAny(h[1], "\r\n\x00") || controlAt(h[1]) >= 0 {
				t.Fatalf("%q accepted", h)
			}
		}
	})
}
