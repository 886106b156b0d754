package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// remoteSkips are the everything scenario's steps left out of the remote runs, and
// why: after the host aborts a call, the SDK's HTTP client resumes with Last-Event-ID,
// and server-everything's example event store answers a resumption with the events of
// every stream after that id, old answers included; a direct HTTP host then sees a
// flood of replayed messages that depends on timing. The proxy does not resume a
// cancelled call's stream (the cancel is a notification, and the host expects no
// answer), so the two runs would differ for the server's sake, not the proxy's.
var remoteSkips = []string{"tools/call trigger-long-running-operation cancelled by the host"}

// everythingHTTP starts server-everything serving transport ("streamableHttp" or
// "sse") on port, on every interface as it does, reached here on 127.0.0.1 only, and
// returns once it accepts connections. The returned func stops it and waits.
func (s *suite) everythingHTTP(t *testing.T, transport string, port int) func() {
	t.Helper()
	cmd := exec.Command(s.node, s.module("@modelcontextprotocol/server-everything/dist/index.js"), transport)
	cmd.Env = append(hostEnv(), fmt.Sprintf("PORT=%d", port))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting server-everything %s: %v", transport, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return stop
		}
		select {
		case <-done:
			t.Fatalf("server-everything %s exited before listening:\n%s", transport, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything %s is not listening on %d after 60 s:\n%s", transport, port, out.String())
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// testRemote runs the everything scenario against server-everything over HTTP: once
// with the host talking HTTP to it itself (the official SDK's HTTP client transport),
// once with the same stdio host as for every other scenario talking to
// `bir-proxy --url`, recording to the reference recorder. The transcripts must be the
// same; the step reports must be what the host's calls say. The server is started
// afresh for each run, on the same port (its answers name it).
func testRemote(t *testing.T, s *suite, proxy string) {
	sc := scenarioNamed(t, "everything")
	for _, tr := range []struct{ name, serve, path, host string }{
		{"streamable HTTP", "streamableHttp", "/mcp", "http"},
		// The legacy transport, found by --transport auto (the default): the first
		// POST to the SSE URL fails the way the spec's backwards-compatibility section
		// describes.
		{"HTTP+SSE via auto", "sse", "/sse", "sse"},
	} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			port := freePort(t)
			url := fmt.Sprintf("http://127.0.0.1:%d%s", port, tr.path)

			stop := s.everythingHTTP(t, tr.serve, port)
			direct := s.runHost(t, sc, launch{mode: "direct-http", url: url, urlTransport: tr.host, skip: remoteSkips})
			stop()
			if f := direct.hostFailure(); f != "" {
				t.Fatalf("run directly over HTTP: %s", f)
			}

			stop = s.everythingHTTP(t, tr.serve, port)
			rec := recordertest.Start(t)
			r := s.runHost(t, sc, launch{
				mode:    "proxy-http",
				remote:  []string{proxy, "--server", sc.name, "--url", url},
				env:     rec.Env(),
				callIDs: true,
				skip:    remoteSkips,
			})
			stop()
			// The proxy is a process, the HTTP server is not one of the host's: only
			// the proxied transcript can say how its command exited.
			const exited = "!! server command exited: code=0 signal=null\n"
			got := r.transcript
			if !bytes.Contains(got, []byte(exited)) {
				t.Errorf("the proxy did not exit 0:\n%s", tail(string(got), 5))
			}
			got = bytes.Replace(got, []byte(exited), nil, 1)
			if err := compareTranscripts(direct.transcript, got); err != nil {
				t.Errorf("%s through `bir-proxy --url` differs from the host talking HTTP itself at\n%v\n%s\nhost and proxy stderr ends:\n%s",
					tr.name, err, r.hostFailure(), tail(r.stderr, 30))
			} else if f := r.hostFailure(); f != "" {
				t.Errorf("through bir-proxy --url: %s", f)
			}

			steps := rec.Steps()
			reports := make([][]byte, len(steps))
			for i, st := range steps {
				reports[i] = st.Body
			}
			for _, p := range reportProblems(sc.name, r.calls, reports, append(r.calls.Secrets, rec.Token())) {
				t.Error(p)
			}
			for _, reg := range rec.Registrations() {
				if got := reg.Get("upstream.url").String(); got != url {
					t.Errorf("registration: upstream.url = %q, want %q", got, url)
				}
				if got := reg.Get("upstream.transport").String(); got != "http" {
					t.Errorf("registration: upstream.transport = %q, want http (auto)", got)
				}
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "DATA RACE") {
				t.Errorf("the proxy's stderr:\n%s", tail(r.stderr, 40))
			}
		})
	}
}
