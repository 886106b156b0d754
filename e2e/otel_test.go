package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// The OpenTelemetry tests run bir-proxy against a real OpenTelemetry Collector
// (testdata/otelcol: the core collector, its OTLP receiver and the contrib file
// exporter, built from the Go module proxy as a module of its own) and read what the
// Collector wrote and what its own metrics say it accepted and refused.

var otelcolOnce struct {
	sync.Once
	path string
	err  error
}

// otelcolPath is the Collector's binary, built once per version of its sources into
// the user cache (scripts/otelcol builds it at the same path before CI's tests).
func otelcolPath(t *testing.T) string {
	t.Helper()
	otelcolOnce.Do(func() {
		dir := filepath.Join(testutil.ModuleRoot(t), "testdata", "otelcol")
		h := sha256.New()
		for _, f := range []string{"go.mod", "go.sum", "main.go"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				otelcolOnce.err = err
				return
			}
			h.Write(b)
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			otelcolOnce.err = err
			return
		}
		out := filepath.Join(cache, "bir-proxy", "otelcol-"+hex.EncodeToString(h.Sum(nil))[:16])
		if _, err := os.Stat(out); err == nil {
			otelcolOnce.path = out
			return
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			otelcolOnce.err = err
			return
		}
		tmp := fmt.Sprintf("%s.tmp.%d", out, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, ".")
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			otelcolOnce.err = fmt.Errorf("building the Collector (scripts/otelcol): %v\n%s", err, b)
			return
		}
		otelcolOnce.path, otelcolOnce.err = out, os.Rename(tmp, out)
	})
	if otelcolOnce.err != nil {
		t.Fatalf("e2e: %v", otelcolOnce.err)
	}
	return otelcolOnce.path
}

// otelcol is one running Collector.
type otelcol struct {
	t        *testing.T
	cmd      *exec.Cmd
	stderr   *testutil.SyncBuffer
	endpoint string // the OTLP/HTTP base URL
	metrics  string // its own Prometheus endpoint
	traces   string // the file exporter's output
	done     chan struct{}
}

func startOtelcol(t *testing.T) *otelcol {
	t.Helper()
	bin := otelcolPath(t)
	dir := t.TempDir()
	recv, prom := freePort(t), freePort(t)
	c := &otelcol{t: t, stderr: &testutil.SyncBuffer{}, endpoint: fmt.Sprintf("http://127.0.0.1:%d", recv),
		metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", prom), traces: filepath.Join(dir, "traces.jsonl"), done: make(chan struct{})}
	config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  file/traces:
    path: %s
  file/metrics:
    path: %s
service:
  telemetry:
    metrics:
      level: basic
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %d
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file/traces]
    metrics:
      receivers: [otlp]
      exporters: [file/metrics]
`, recv, c.traces, filepath.Join(dir, "metrics.jsonl"), prom)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	c.cmd = exec.Command(bin, "--config", cfgPath)
	c.cmd.Stderr, c.cmd.Stdout = c.stderr, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("e2e: starting the Collector: %v", err)
	}
	go func() { c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { c.stop() })
	if err := c.stderr.WaitFor(testutil.Context(t), "Everything is ready"); err != nil {
		t.Fatalf("e2e: the Collector did not start: %v\n%s", err, c.stderr.String())
	}
	return c
}

// stop ends the Collector the way a service manager does, so its file is complete.
func (c *otelcol) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(testutil.Guard):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// counter reads one of the Collector's own metrics (summed over its label sets).
func (c *otelcol) counter(name string) float64 {
	c.t.Helper()
	req, _ := http.NewRequestWithContext(testutil.Context(c.t), http.MethodGet, c.metrics, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("e2e: reading the Collector's metrics: %v", err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// Spans as the Collector's file exporter writes them (OTLP/JSON).
type otAttr struct {
	Key   string `json:"key"`
	Value struct {
		S *string `json:"stringValue"`
		I *string `json:"intValue"`
	} `json:"value"`
}

type otSpan struct {
	TraceID  string             `json:"traceId"`
	SpanID   string             `json:"spanId"`
	Parent   string             `json:"parentSpanId"`
	Name     string             `json:"name"`
	Kind     int                `json:"kind"`
	Attrs    []otAttr           `json:"attributes"`
	Status   struct{ Code int } `json:"status"`
	resource map[string]string
}

func attrMap(as []otAttr) map[string]string {
	m := map[string]string{}
	for _, a := range as {
		switch {
		case a.Value.S != nil:
			m[a.Key] = *a.Value.S
		case a.Value.I != nil:
			m[a.Key] = *a.Value.I
		}
	}
	return m
}

func (s *otSpan) attr(k string) string { return attrMap(s.Attrs)[k] }

// spans stops the Collector and reads every span it wrote.
func (c *otelcol) spans() []otSpan {
	c.t.Helper()
	c.stop()
	data, err := os.ReadFile(c.traces)
	if err != nil {
		c.t.Fatalf("e2e: the Collector wrote no traces: %v\n%s", err, c.stderr.String())
	}
	var out []otSpan
	for line := range bytes.Lines(data) {
		var doc struct {
			ResourceSpans []struct {
				Resource   struct{ Attributes []otAttr }
				ScopeSpans []struct{ Spans []otSpan }
			}
		}
		if err := json.Unmarshal(line, &doc); err != nil {
			c.t.Fatalf("e2e: the Collector's file: %v", err)
		}
		for _, rs := range doc.ResourceSpans {
			res := attrMap(rs.Resource.Attributes)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					s.resource = res
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// hostRequests are the methods of the requests the host sent (and that the server
// sent the host), from a transcript.
func hostRequests(transcript []byte) (host, server []string) {
	for line := range bytes.Lines(transcript) {
		dir, text, ok := bytes.Cut(bytes.TrimRight(line, "\n"), []byte(" "))
		if !ok || (string(dir) != "->" && string(dir) != "<-") {
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(text, &m) != nil || m.Method == "" || len(m.ID) == 0 {
			continue
		}
		if string(dir) == "->" {
			host = append(host, m.Method)
		} else {
			server = append(server, m.Method)
		}
	}
	return host, server
}

// TestOTelCollector: a session through bir-proxy in front of an official server, with
// tracing on in each protocol, reaches a real Collector as one span per request with
// the conventions' attributes, every span accepted; the session itself is unchanged.
func TestOTelCollector(t *testing.T) {
	s := newSuite(t)
	proxy := testutil.BuildRace(t, "./cmd/bir-proxy")
	sc := scenarios()[0] // server-everything
	if sc.name != "everything" {
		t.Fatalf("e2e: the first scenario is %q", sc.name)
	}
	for _, proto := range []string{"http/protobuf", "http/json"} {
		t.Run(strings.ReplaceAll(proto, "/", "-"), func(t *testing.T) {
			t.Parallel()
			col := startOtelcol(t)
			// The server is given the OTEL_* variables too (a server may be traced
			// itself): the direct run has them, so its env-printing tool shows the same.
			env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=" + proto}
			direct := s.runHost(t, sc, launch{mode: "direct-otel", env: env})
			if f := direct.hostFailure(); f != "" {
				t.Fatalf("run directly: %s", f)
			}
			wantHost, wantServer := hostRequests(direct.transcript)
			if len(wantHost) < 10 || len(wantServer) == 0 {
				t.Fatalf("e2e: the direct run shows %d host requests and %d server requests; the transcript's format changed?", len(wantHost), len(wantServer))
			}
			r := s.runHost(t, sc, launch{
				mode:    "proxy-otel-" + strings.ReplaceAll(proto, "/", "-"),
				wrap:    func(sc scenario) []string { return []string{proxy, "--server", sc.name, "--otlp-capture", "--"} },
				env:     env,
				callIDs: true,
			})
			if err := compareTranscripts(direct.transcript, r.transcript); err != nil {
				t.Fatalf("with tracing on, the session differs from the direct run at\n%v\n%s", err, tail(r.stderr, 30))
			} else if f := r.hostFailure(); f != "" {
				t.Fatalf("through bir-proxy with tracing: %s", f)
			}
			accepted, refused := col.counter("otelcol_receiver_accepted_spans"), col.counter("otelcol_receiver_refused_spans")
			spans := col.spans()
			if refused != 0 || int(accepted) != len(spans) {
				t.Errorf("the Collector accepted %v spans and refused %v; its file has %d", accepted, refused, len(spans))
			}
			var gotHost, gotServer []string
			for _, sp := range spans {
				m := sp.attr("mcp.method.name")
				switch sp.Kind {
				case 3:
					gotHost = append(gotHost, m)
				case 2:
					gotServer = append(gotServer, m)
				default:
					t.Errorf("span %q of kind %d", sp.Name, sp.Kind)
				}
				want := m
				switch m {
				case "tools/call":
					want += " " + sp.attr("gen_ai.tool.name")
					if sp.attr("gen_ai.operation.name") != "execute_tool" || sp.attr("gen_ai.tool.name") == "" || sp.attr("gen_ai.tool.call.arguments") == "" {
						t.Errorf("tools/call span without the tool's attributes: %+v", sp.Attrs)
					}
				case "prompts/get":
					want += " " + sp.attr("gen_ai.prompt.name")
				case "resources/read":
					if sp.attr("mcp.resource.uri") == "" {
						t.Errorf("resources/read without mcp.resource.uri")
					}
				}
				if sp.Name != want {
					t.Errorf("span name %q, want %q", sp.Name, want)
				}
				if sp.attr("jsonrpc.request.id") == "" || sp.attr("network.transport") != "pipe" || sp.attr("mcp.protocol.version") == "" {
					t.Errorf("span %q lacks the session's attributes: %+v", sp.Name, sp.Attrs)
				}
				if (sp.attr("error.type") != "") != (sp.Status.Code == 2) {
					t.Errorf("span %q: error.type %q with status %d", sp.Name, sp.attr("error.type"), sp.Status.Code)
				}
				if sp.resource["service.name"] != "bir-proxy/everything" || sp.resource["bir.server.name"] == "" {
					t.Errorf("resource %v", sp.resource)
				}
				if len(sp.TraceID) != 32 || len(sp.SpanID) != 16 {
					t.Errorf("ids %q %q", sp.TraceID, sp.SpanID)
				}
			}
			slices.Sort(gotHost)
			slices.Sort(gotServer)
			wh, ws := slices.Sorted(slices.Values(wantHost)), slices.Sorted(slices.Values(wantServer))
			if !slices.Equal(gotHost, wh) {
				t.Errorf("CLIENT spans %v\nhost requests %v", gotHost, wh)
			}
			if !slices.Equal(gotServer, ws) {
				t.Errorf("SERVER spans %v\nserver requests %v", gotServer, ws)
			}
		})
	}
}

// TestOTelTraceparent: a host's traceparent in params._meta makes the span a child of
// the host's span in the host's trace, and the server receives the host's bytes.
func TestOTelTraceparent(t *testing.T) {
	if os.Getenv(skipEnv) == "1" {
		t.Skipf("%s=1", skipEnv)
	}
	proxy := testutil.BuildRace(t, "./cmd/bir-proxy")
	raw := testutil.Build(t, "./testdata/rawserver")
	col := startOtelcol(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "received")
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"a" : 1},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"rojo=00f067aa0ba902b7"}}}`,
	}
	in := strings.Join(lines, "\n") + "\n"
	ctx := testutil.Context(t)
	cmd := exec.CommandContext(ctx, proxy, "--server", "raw", "--", raw, "--reply", "--record", record)
	cmd.Env = append(hostEnv(), "XDG_STATE_HOME="+dir, "OTEL_EXPORTER_OTLP_ENDPOINT="+col.endpoint)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte(in)); err != nil {
		t.Fatal(err)
	}
	// Both answers, then the end of the session.
	rd := bufio.NewReader(stdout)
	for range 2 {
		if _, err := rd.ReadBytes('\n'); err != nil {
			t.Fatalf("reading the proxy's answers: %v\n%s", err, stderr.String())
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bir-proxy: %v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != in {
		t.Fatalf("the server received\n%s\nwant the host's bytes\n%s", got, in)
	}
	var call *otSpan
	spans := col.spans()
	for i := range spans {
		if spans[i].Name == "tools/call echo" {
			call = &spans[i]
		}
	}
	if call == nil {
		t.Fatalf("no tools/call span among %d", len(spans))
	}
	if call.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || call.Parent != "00f067aa0ba902b7" {
		t.Fatalf("the span is in trace %s under %s, want the host's", call.TraceID, call.Parent)
	}
}
