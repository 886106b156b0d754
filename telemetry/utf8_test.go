package telemetry

import (
	"testing"
	"time"
)

// Strings from the environment (OTEL_RESOURCE_ATTRIBUTES percent-decodes to any
// bytes, OTEL_SERVICE_NAME is what the shell holds), the server's serverInfo and a
// span's own name, status and attributes may not be UTF-8; what is sent must still
// decode with the official types (a collector refuses the whole request otherwise),
// for either protocol, traces and metrics.
func TestExportsAreValidUTF8(t *testing.T) {
	for _, p := range []string{ProtoProtobuf, ProtoJSON} {
		t.Run(p, func(t *testing.T) {
			c := newCollector(t)
			cfg, err := FromEnv(env(map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": c.srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": p,
				"OTEL_RESOURCE_ATTRIBUTES": "team=%ff%fe,k\xc3=v", "OTEL_SERVICE_NAME": "svc\xe2\x82",
			}), "")
			if err != nil {
				t.Fatal(err)
			}
			cfg.MetricInterval = time.Hour
			x := New(Options{Config: cfg, Version: "1\xff", Server: "s\x80", BatchDelay: time.Hour})
			x.SetServer("n\xed\xa0\x80", "v\xff")
			x.SetSession([]Attr{String("mcp.protocol.version", "\xf4\x90\x80\x80")})
			s := span(0)
			s.Name, s.Status, s.StatusMsg = "tools/call \xff", StatusError, "boom\xc0"
			s.Attrs = append(s.Attrs, String("gen_ai.tool.name\xfe", "\xff"))
			x.Submit(s)
			x.Record([]Attr{String("gen_ai.tool.name", "\xff")}, time.Millisecond)
			if st := closeWithin(t, x, 2*time.Second); st.Exported != 1 {
				t.Fatalf("%+v", st)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.batches) != 1 || len(c.metrics) != 1 {
				t.Fatalf("%d trace requests, %d metrics requests decoded", len(c.batches), len(c.metrics))
			}
		})
	}
}
