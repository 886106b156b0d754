package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// remoteWait bounds each wait of these tests.
const remoteWait = 30 * time.Second

// httpServer starts a fixture that serves HTTP (rawhttp or mcpserver --http/--sse)
// and returns its URL.
func httpServer(t *testing.T, bin string, args ...string) string {
	t.Helper()
	return testutil.HTTPFixture(t, bin, args...)
}

const remoteInit = `{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}},"jsonrpc":"2.0","id":0}`

func recordedRequests(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("record line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// TestRemoteFidelity: through `bir-proxy --url`, the server receives each host message
// as its exact bytes (the correlation key removed) and the host each answer, over JSON
// and SSE answers, and the legacy transport found by --transport auto.
func TestRemoteFidelity(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawhttp")
	for _, mode := range [][]string{{"--answer", "json"}, {"--answer", "sse"}, {"--legacy"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			t.Parallel()
			record := filepath.Join(t.TempDir(), "requests.jsonl")
			url := httpServer(t, raw, append([]string{"--record", record}, mode...)...)
			s := startProxy(t, nil, "--server", "raw", "--url", url)
			s.Send(remoteInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			if got := s.recv(); !strings.Contains(got, `"serverInfo":{"name":"rawhttp"`) {
				t.Fatalf("initialize: %s", got)
			}
			calls := []struct{ sent, forwarded, answer string }{
				{
					`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"echo","arguments":{"_bir_call_id":"c-1","z":"é\u00e9","a":[1.50,null]}},"x-extra":{}}`,
					`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"echo","arguments":{"z":"é\u00e9","a":[1.50,null]}},"x-extra":{}}`,
					`{"jsonrpc":"2.0","id":9007199254740993,"result":{"content":[{"type":"text","text":"{\"z\":\"é\\u00e9\",\"a\":[1.50,null]}"}]}}`,
				},
				{
					`{"id":"s-1","params":{"arguments":{"k":1,"_bir_call_id":"c-2"},"name":"echo"},"method":"tools/call","jsonrpc":"2.0"}`,
					`{"id":"s-1","params":{"arguments":{"k":1},"name":"echo"},"method":"tools/call","jsonrpc":"2.0"}`,
					`{"jsonrpc":"2.0","id":"s-1","result":{"content":[{"type":"text","text":"{\"k\":1}"}]}}`,
				},
			}
			for _, c := range calls {
				s.Send(c.sent)
				if got := s.recv(); got != c.answer {
					t.Fatalf("answer\n got %s\nwant %s", got, c.answer)
				}
			}
			s.Stdin.Close()
			if code := s.ExitCode(); code != 0 {
				t.Fatalf("exit %d", code)
			}
			bodies := map[string]bool{}
			for _, r := range recordedRequests(t, record) {
				bodies[r["body"].(string)] = true
			}
			for _, c := range calls {
				if !bodies[c.forwarded] {
					t.Errorf("the server never got\n  %s\nit got %v", c.forwarded, bodies)
				}
			}
		})
	}
}

// TestRemoteMCPGo runs the mcp-go demo host through the proxy against mcp-go's own
// Streamable HTTP and SSE servers, in both eras: tools, progress, sampling and
// elicitation must all work (the host checks each answer). Where mcp-go's own client
// talks to the server reliably (SSE), the transcripts must be the direct one's, even
// where the demo fails: mcp-go's SSE server cannot send session-era sampling requests,
// and must fail the same way through the proxy.
func TestRemoteMCPGo(t *testing.T) {
	t.Parallel()
	host := testutil.Build(t, "./testdata/demohost")
	server := testutil.Build(t, "./testdata/mcpserver")
	proxy := testutil.Build(t, "./cmd/bir-proxy")
	for _, c := range []struct {
		name, era       string
		server          []string
		passes, compare bool
	}{
		{"http session", "session", []string{"--http"}, true, false},
		{"http stateless", "stateless", []string{"--http"}, true, false},
		{"http stateless server", "stateless", []string{"--http", "--stateless"}, true, false},
		{"sse session", "session", []string{"--sse"}, false, true},
		{"sse stateless", "stateless", []string{"--sse"}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := httpServer(t, server, c.server...)
			run := func(args ...string) (string, string) {
				cmd := exec.Command(host, append([]string{"--era", c.era, "--timeout", "20s"}, args...)...)
				cmd.Env = append(os.Environ(), "BIR_OFF=1")
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if c.passes && err != nil {
					t.Fatalf("%v: %v\n%s\n%s", args, err, out, stderr.String())
				}
				return string(out), stderr.String()
			}
			proxied, stderr := run("--", proxy, "--server", "demo", "--url", url)
			if c.passes && !strings.Contains(proxied, "demo passed") {
				t.Fatalf("through the proxy:\n%s\n%s", proxied, stderr)
			}
			if c.compare {
				args := []string{"--url", url}
				if c.server[0] == "--sse" {
					args = append(args, "--sse")
				}
				if direct, _ := run(args...); direct != proxied {
					t.Fatalf("transcripts differ\n--- direct\n%s\n--- through bir-proxy\n%s", direct, proxied)
				}
			}
		})
	}
}

// TestRemoteHeaders: --header with ${VAR}, --header-file, and no secret on stderr at
// the debug log level, even when the server refuses the credentials.
func TestRemoteHeaders(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawhttp")
	record := filepath.Join(t.TempDir(), "requests.jsonl")
	url := httpServer(t, raw, "--record", record)
	const token, key, query = "tok-4f1c9e2a77", "key-8b3d5c6e11", "qs-5e6f7a8b9c"
	file := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(file, []byte("# secrets\nX-Api-Key: ${API_KEY}\n\nX-Plain: plain\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startProxy(t, []string{"TOKEN=" + token, "API_KEY=" + key, "BIR_LOG_LEVEL=debug"},
		"--server", "hdr", "--url", url+"?token="+query, "--header", "Authorization: Bearer ${TOKEN}", "--header-file", file)
	s.Send(remoteInit)
	s.recv()
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	s.recv()
	s.Stdin.Close()
	s.ExitCode()
	got := recordedRequests(t, record)[0]["header"].(map[string]any)
	if got["Authorization"] != "Bearer "+token || got["X-Api-Key"] != key || got["X-Plain"] != "plain" {
		t.Fatalf("headers the server got: %v", got)
	}
	for _, secret := range []string{token, key, query} {
		if strings.Contains(s.Stderr.String(), secret) {
			t.Fatalf("stderr shows a secret (%s):\n%s", secret, s.Stderr.String())
		}
	}

	// The server refuses the credentials: one clear line, the host an error, no secret.
	locked := httpServer(t, raw, "--auth", "Bearer another")
	s = startProxy(t, []string{"TOKEN=" + token, "BIR_LOG_LEVEL=debug"}, "--server", "hdr", "--url", locked+"?token="+query, "--header", "Authorization: Bearer ${TOKEN}")
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	ans := s.recv()
	s.Stdin.Close()
	s.ExitCode()
	if !strings.Contains(ans, `"id":1,"error"`) || !strings.Contains(ans, "server hdr") || !strings.Contains(ans, "401") {
		t.Fatalf("answer: %s", ans)
	}
	if n := strings.Count(s.Stderr.String(), "refused the credentials (HTTP 401"); n != 1 {
		t.Errorf("the 401 was said %d times on stderr:\n%s", n, s.Stderr.String())
	}
	for _, secret := range []string{token, query} {
		if strings.Contains(s.Stderr.String(), secret) || strings.Contains(ans, secret) {
			t.Fatalf("a secret (%s) shows:\n%s\n%s", secret, ans, s.Stderr.String())
		}
	}
}

func TestRemoteUnsetVariable(t *testing.T) {
	t.Parallel()
	s := startProxy(t, nil, "--url", "http://127.0.0.1:9/mcp", "--header", "Authorization: Bearer ${BIR_TEST_SURELY_UNSET}")
	if code := s.ExitCode(); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if e := s.Stderr.String(); !strings.Contains(e, "BIR_TEST_SURELY_UNSET is not set") || !strings.Contains(e, "--header Authorization") {
		t.Fatalf("stderr: %s", e)
	}
}

// TestRemoteRecording: the registration says how the server is reached (its query
// secret redacted), the correlation key never reaches it, and calls are reported as
// for stdio.
func TestRemoteRecording(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawhttp")
	record := filepath.Join(t.TempDir(), "requests.jsonl")
	url := httpServer(t, raw, "--record", record, "--answer", "sse")
	rec := recordertest.Start(t)
	s := startProxy(t, append(recording(rec, t.TempDir()), "SECRET=sq-7a7a7a7a"), "--server", "remote", "--url", url+"?key=${SECRET}&region=eu")
	s.Send(remoteInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.recv()
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"_bir_call_id":"r-1","password":"hunter2","n":1}}}`)
	s.recv()
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang","arguments":{"_bir_call_id":"r-2"}}}`)
	s.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	steps, err := rec.WaitSteps(testutil.Context(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	s.Stdin.Close()
	s.ExitCode()
	outcomes := map[string]string{}
	for _, st := range steps {
		outcomes[st.Get("callId").String()] = st.Get("outcome").String()
		if strings.Contains(string(st.Body), "hunter2") {
			t.Errorf("a report holds the password: %s", st.Body)
		}
	}
	if outcomes["r-1"] != "ok" || outcomes["r-2"] != "cancelled" {
		t.Errorf("outcomes: %v", outcomes)
	}
	regs := rec.Registrations()
	if len(regs) == 0 {
		t.Fatal("no registration")
	}
	for _, reg := range regs {
		if tr := reg.Get("upstream.transport").String(); tr != "http" {
			t.Errorf("upstream.transport = %q", tr)
		}
		if u := reg.Get("upstream.url").String(); strings.Contains(u, "sq-7a7a") || !strings.Contains(u, "region=eu") || !strings.HasPrefix(u, url) {
			t.Errorf("upstream.url = %q", u)
		}
	}
	for _, r := range recordedRequests(t, record) {
		if strings.Contains(r["body"].(string), "_bir_call_id") {
			t.Errorf("the correlation key reached the server: %s", r["body"])
		}
	}
}

// TestRemoteRegistrationSaysTheSettledTransport: the registration says the transport
// the proxy uses, not the one it was told to try. With --transport auto against a
// server of the old HTTP+SSE transport only, the registration at start can only say
// "http" (nothing was asked yet); once the first POST has been refused and the event
// stream found, the proxy registers again saying "sse", before the host has the
// initialize answer, and every registration after that says it.
func TestRemoteRegistrationSaysTheSettledTransport(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawhttp")
	for _, c := range []struct {
		name       string
		server     []string
		flags      []string
		want       string
		registered []string // every registration's transport may be one of these
	}{
		{"auto falls back to sse", []string{"--legacy"}, nil, "sse", []string{"http", "sse"}},
		{"auto settles on http", nil, nil, "http", []string{"http"}},
		{"forced sse", []string{"--legacy"}, []string{"--transport", "sse"}, "sse", []string{"sse"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := httpServer(t, raw, c.server...)
			rec := recordertest.Start(t)
			s := startProxy(t, recording(rec, t.TempDir()), append([]string{"--server", "remote", "--url", url}, c.flags...)...)
			s.Send(remoteInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			if got := s.recv(); !strings.Contains(got, `"result"`) {
				t.Fatalf("initialize: %s", got)
			}
			// The registration with the initialize result's facts comes after the
			// transport was settled: it must say the settled one.
			if _, err := rec.Wait(testutil.Context(t), func(sn recordertest.Snapshot) bool {
				for _, reg := range sn.Registrations {
					if reg.Get("serverInfo").Exists() {
						return true
					}
				}
				return false
			}); err != nil {
				t.Fatalf("no registration with the server's facts: %v", err)
			}
			s.Stdin.Close()
			s.ExitCode()
			regs := rec.Registrations()
			for i, reg := range regs {
				tr := reg.Get("upstream.transport").String()
				if !slices.Contains(c.registered, tr) {
					t.Errorf("registration %d says transport %q, want one of %v: %s", i, tr, c.registered, reg.Body)
				}
				if reg.Get("serverInfo").Exists() && tr != c.want {
					t.Errorf("registration %d, made after the transport was settled, says %q, want %q: %s", i, tr, c.want, reg.Body)
				}
			}
			if tr := regs[len(regs)-1].Get("upstream.transport").String(); tr != c.want {
				t.Errorf("the last registration says transport %q, want %q", tr, c.want)
			}
		})
	}
}

// TestWrappedRemoteEntryRuns wraps a remote entry and starts it the way a host does:
// the proxy reaches the server with the entry's headers, ${VAR} expanded from the
// environment only when it starts; the file keeps the reference.
func TestWrappedRemoteEntryRuns(t *testing.T) {
	t.Parallel()
	proxy := testutil.Build(t, "./cmd/bir-proxy")
	raw := testutil.Build(t, "./testdata/rawhttp")
	url := httpServer(t, raw, "--auth", "Bearer tok-wrapped-1")
	path := filepath.Join(t.TempDir(), ".mcp.json")
	doc := `{"mcpServers": {"remote": {"type": "http", "url": "` + url + `", "headers": {"Authorization": "Bearer ${REMOTE_TOKEN}"}}}}` + "\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "wrap", "--config", path, "--proxy-path", proxy); code != 0 {
		t.Fatalf("wrap: %s", errOut)
	}
	wrapped := readFile(t, path)
	if !bytes.Contains(wrapped, []byte(`"--header", "Authorization: Bearer ${REMOTE_TOKEN}"`)) {
		t.Fatalf("the wrapped entry: %s", wrapped)
	}
	// The headers are in the arguments only: a stdio entry's "headers" is read by no
	// host, and unwrap writes it back from them.
	if bytes.Contains(wrapped, []byte(`"headers"`)) {
		t.Errorf("the wrapped entry keeps its headers member: %s", wrapped)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(wrapped, &cfg); err != nil {
		t.Fatal(err)
	}
	e := cfg.MCPServers["remote"]
	s := startProxy(t, []string{"REMOTE_TOKEN=tok-wrapped-1"}, e.Args...)
	s.Send(remoteInit)
	if got := s.recv(); !strings.Contains(got, `"result"`) {
		t.Fatalf("through the wrapped entry: %s", got)
	}
	s.Stdin.Close()
	s.ExitCode()
	if code, _, errOut := runCmd(t, "unwrap", "--config", path); code != 0 {
		t.Fatalf("unwrap: %s", errOut)
	}
	if got := readFile(t, path); string(got) != doc {
		t.Fatalf("unwrap(wrap(x)) != x:\n%s", got)
	}
}

// TestRemoteHonoursHTTPProxy: HTTP_PROXY applies to the server's requests (and
// NO_PROXY exempts a host). Go never proxies loopback addresses, so the server is
// named by a host that only the forward proxy here answers for.
func TestRemoteHonoursHTTPProxy(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	fwd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.String())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"via-proxy","version":"0"}}}`)
	}))
	t.Cleanup(fwd.Close)
	const url = "http://mcp.bir-test.invalid/mcp"
	s := startProxy(t, []string{"HTTP_PROXY=" + fwd.URL, "http_proxy=" + fwd.URL, "NO_PROXY=", "no_proxy="}, "--server", "p", "--url", url, "--transport", "http")
	s.Send(remoteInit)
	if got := s.recv(); !strings.Contains(got, `"via-proxy"`) {
		t.Fatalf("answer: %s", got)
	}
	s.Stdin.Close()
	s.ExitCode()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0] != "POST "+url {
		t.Fatalf("the forward proxy saw %v", seen)
	}

	// NO_PROXY names the host: it is reached directly, which here cannot work.
	s = startProxy(t, []string{"HTTP_PROXY=" + fwd.URL, "http_proxy=" + fwd.URL, "NO_PROXY=bir-test.invalid", "no_proxy=bir-test.invalid"}, "--server", "p", "--url", url, "--transport", "http")
	s.Send(remoteInit)
	if got := s.recv(); !strings.Contains(got, `"error"`) {
		t.Fatalf("with NO_PROXY the request went through the proxy: %s", got)
	}
	s.Stdin.Close()
	s.ExitCode()
}

// TestRemoteOverCapAnswersInParallelShareTheCap: each exchange with a --url server
// read its answer up to the cap, so calls in flight answered with chunked bodies just
// over --max-message cost the proxy the cap each (4 at the default 256 MiB: +1 GB).
// The answers being read share one budget: 8 at once over a 16 MiB cap keep the
// proxy's peak RSS within a few caps (was +117-129 MiB), and each call is answered
// with an error. The same for answers that are events of a stream (--answer sse).
func TestRemoteOverCapAnswersInParallelShareTheCap(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the proxy's peak RSS from /proc")
	}
	for _, mode := range []string{"--chunked", "--answer=sse"} {
		t.Run(mode, func(t *testing.T) { overCapInParallel(t, mode) })
	}
}

func overCapInParallel(t *testing.T, mode string) {
	const capBytes, inFlight = 16 << 20, 8
	url := httpServer(t, testutil.Build(t, "./testdata/rawhttp"), mode)
	s := startProxy(t, nil, "--server", "far", "--url", url, "--transport", "http", "--max-message", strconv.Itoa(capBytes))
	s.Send(remoteInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if got := s.recv(); !strings.Contains(got, `"serverInfo"`) {
		t.Fatalf("initialize: %.300s", got)
	}
	pid := s.Cmd.Process.Pid
	idle := procStatusKB(t, pid, "VmHWM") << 10
	for i := 1; i <= inFlight; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}}}`, i, capBytes))
	}
	for range inFlight {
		if got := s.recv(); !strings.Contains(got, `"error"`) {
			t.Fatalf("want an error answer for an answer over the cap, got %.300s", got)
		}
	}
	peak := procStatusKB(t, pid, "VmHWM") << 10
	s.Stdin.Close()
	s.ExitCode()
	t.Logf("peak RSS %d MiB over idle for %d answers over a %d MiB cap at once", (peak-idle)>>20, inFlight, capBytes>>20)
	if bound := int64(7 * capBytes / 2); peak-idle > bound { // was 117-129 MiB chunked, 69 as events
		t.Errorf("the proxy's peak RSS grew by %d MiB reading %d answers over the %d MiB cap at once, over %d MiB", (peak-idle)>>20, inFlight, capBytes>>20, bound>>20)
	}
}
