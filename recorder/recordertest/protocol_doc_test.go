package recordertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder"
)

// docExample is one request of docs/protocol.md and the answer shown after it.
type docExample struct {
	line         int    // where the request's block starts
	method, path string // "POST", "/proxy/step"; or "" for a file shown (Info[0])
	flags        []string
	body         []byte
	status       int    // the answer's status, 0 when none is shown
	answer       []byte // the answer's body, nil when none is shown
}

func (e docExample) has(flag string) bool { return slices.Contains(e.flags, flag) }

// readProtocolDoc extracts the JSON blocks of docs/protocol.md: a block whose info
// string is "json METHOD PATH [FLAG...]" is a request, a "json STATUS" block right
// after it its answer, and "json FILE" a file the proxy reads.
func readProtocolDoc(t *testing.T) []docExample {
	t.Helper()
	f, err := os.Open(filepath.Join(testutil.ModuleRoot(t), "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docExample
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		info, ok := strings.CutPrefix(sc.Text(), "```json ")
		if !ok {
			continue
		}
		start := n
		var body bytes.Buffer
		for sc.Scan() {
			n++
			if sc.Text() == "```" {
				break
			}
			body.WriteString(sc.Text())
			body.WriteByte('\n')
		}
		b := bytes.TrimSpace(body.Bytes())
		fields := strings.Fields(info)
		if st, err := strconv.Atoi(fields[0]); err == nil {
			if len(out) == 0 || out[len(out)-1].status != 0 || out[len(out)-1].method == "" {
				t.Fatalf("docs/protocol.md:%d: an answer with no request before it", start)
			}
			out[len(out)-1].status, out[len(out)-1].answer = st, b
			continue
		}
		e := docExample{line: start, body: b}
		if len(fields) >= 2 && (fields[0] == http.MethodPost || fields[0] == http.MethodGet) {
			e.method, e.path, e.flags = fields[0], fields[1], fields[2:]
		} else {
			e.flags = fields
		}
		if len(b) > 0 && !json.Valid(b) {
			t.Fatalf("docs/protocol.md:%d: the example is not valid JSON:\n%s", start, b)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestProtocolDocExamples: every request docs/protocol.md shows, sent in order to the
// reference recorder, gets the answer the page shows after it; and the page shows
// every route the recorder serves, with the discovery file as Discover reads it.
func TestProtocolDocExamples(t *testing.T) {
	examples := readProtocolDoc(t)
	s := Start(t)
	routes := map[string]bool{}
	for _, e := range examples {
		where := fmt.Sprintf("docs/protocol.md:%d (%s %s %v)", e.line, e.method, e.path, e.flags)
		if e.method == "" {
			if !e.has(".bir/recorder.json") {
				t.Errorf("%s: a JSON block that is neither a request, an answer nor the discovery file", where)
				continue
			}
			checkDiscoveryExample(t, e.body)
			continue
		}
		if e.status == 0 {
			t.Errorf("%s: no answer shown after the request", where)
			continue
		}
		routes[e.path] = true
		s.Batch(e.has("batch"))
		if e.path == "/proxy/poll" && e.status == http.StatusOK {
			queueDocAnswer(t, s, e)
		}
		token := s.Token()
		if e.has("token=wrong") {
			token = "not-" + token
		}
		status, answer, err := docRequest(t.Context(), s.URL(), token, e.method, e.path, e.body)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if status != e.status {
			t.Errorf("%s: the recorder answered %d %s, the page shows %d", where, status, answer, e.status)
			continue
		}
		if len(e.answer) > 0 && !jsonEqual(answer, e.answer) {
			t.Errorf("%s: the recorder answered\n%s\nthe page shows\n%s", where, answer, e.answer)
		}
	}
	for _, r := range []string{"/proxy/register", "/proxy/step", "/proxy/poll", "/proxy/result", "/health"} {
		if !routes[r] {
			t.Errorf("docs/protocol.md shows no request to %s", r)
		}
	}
	if len(s.Steps()) == 0 || len(s.Results()) == 0 || len(s.Registrations()) == 0 {
		t.Errorf("the recorder took %d steps, %d results, %d registers from the page's examples",
			len(s.Steps()), len(s.Results()), len(s.Registrations()))
	}
}

// queueDocAnswer has the recorder hand out, to the poll e, the dispatches and
// cancels its documented answer shows.
func queueDocAnswer(t *testing.T, s *Server, e docExample) {
	t.Helper()
	var req struct {
		ProxyID string `json:"proxyId"`
	}
	var ans struct {
		Dispatches []struct {
			DispatchID string          `json:"dispatchId"`
			Tool       string          `json:"tool"`
			Arguments  json.RawMessage `json:"arguments"`
			TimeoutMs  int             `json:"timeoutMs"`
		} `json:"dispatches"`
		Cancel []string `json:"cancel"`
	}
	if err := json.Unmarshal(e.body, &req); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.answer, &ans); err != nil {
		t.Fatalf("docs/protocol.md:%d: the poll answer: %v", e.line, err)
	}
	for _, d := range ans.Dispatches {
		s.Dispatch(req.ProxyID, Dispatch{DispatchID: d.DispatchID, Tool: d.Tool, Arguments: d.Arguments, TimeoutMs: d.TimeoutMs})
	}
	if len(ans.Cancel) > 0 {
		s.Cancel(req.ProxyID, ans.Cancel...)
	}
}

// checkDiscoveryExample: the page's .bir/recorder.json, written where a proxy looks,
// is read by Discover as the endpoint it names.
func checkDiscoveryExample(t *testing.T, body []byte) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".bir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".bir", "recorder.json"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	ep, err := recorder.Discover(recorder.DiscoverOptions{Dir: dir})
	if err != nil || ep == nil {
		t.Fatalf("Discover of the page's recorder.json: %v %v", ep, err)
	}
	var df struct{ URL, Token string }
	json.Unmarshal(body, &df) //nolint:errcheck // checked valid by readProtocolDoc
	if ep.URL != df.URL || ep.Token != df.Token {
		t.Errorf("Discover read %q %q from the page's recorder.json, want %q %q", ep.URL, ep.Token, df.URL, df.Token)
	}
}

func docRequest(ctx context.Context, base, token, method, path string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var rd *bytes.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(http.MaxBytesReader(nil, resp.Body, 1<<20))
	return resp.StatusCode, b.Bytes(), err
}

// members is the top-level member names of a JSON object, or of each object of an array.
func members(t *testing.T, body []byte) []string {
	t.Helper()
	var objs []map[string]json.RawMessage
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		if err := json.Unmarshal(body, &objs); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
	} else {
		var o map[string]json.RawMessage
		if err := json.Unmarshal(body, &o); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		objs = append(objs, o)
	}
	var names []string
	for _, o := range objs {
		for k, v := range o {
			names = append(names, k)
			if k == "upstream" { // its members are documented too
				var u map[string]json.RawMessage
				json.Unmarshal(v, &u) //nolint:errcheck // a non-object has no members
				for uk := range u {
					names = append(names, "upstream."+uk)
				}
			}
		}
	}
	return names
}

// TestProtocolDocCoversTheProxy: a real bir-proxy, driven by a host through
// initialize, tools/list, a tools/call that succeeds, one that fails, and a replay
// dispatch, sends the recorder only members the page shows for each route, and only
// routes the page shows; every route the page shows for the proxy to send was sent.
func TestProtocolDocCoversTheProxy(t *testing.T) {
	documented := map[string]map[string]bool{}
	for _, e := range readProtocolDoc(t) {
		if e.method != http.MethodPost || e.status < 200 || e.status > 299 || len(e.body) == 0 {
			continue
		}
		if documented[e.path] == nil {
			documented[e.path] = map[string]bool{}
		}
		for _, k := range members(t, e.body) {
			documented[e.path][k] = true
		}
	}
	proxy := testutil.Build(t, "./cmd/bir-proxy")
	server := testutil.Build(t, "./testdata/mcpserver")
	s := Start(t)
	cmd := exec.Command(proxy, "--server", "docs", "--", server)
	cmd.Env = append(os.Environ(), s.Env()...)
	cmd.Env = append(cmd.Env, "BIR_OFF=0", "XDG_STATE_HOME="+t.TempDir())
	p := testutil.Start(t, cmd)
	p.Send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"doc","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	p.ReadLine()
	p.ReadLine()
	p.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","_bir_call_id":"c-1"}}}`)
	p.ReadLine()
	p.Send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fail","arguments":{}}}`)
	p.ReadLine()
	ctx := testutil.Context(t)
	regs, err := s.WaitRegistrations(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The register's version is the binary's --version line, less "bir-proxy ".
	if out, err := exec.Command(proxy, "--version").Output(); err != nil {
		t.Fatal(err)
	} else if want := strings.TrimPrefix(strings.TrimSpace(string(out)), "bir-proxy "); regs[0].Get("version").String() != want {
		t.Errorf("the register says version %s; --version says %q", regs[0].Get("version").Raw, want)
	}
	s.Dispatch(regs[0].ProxyID, Dispatch{DispatchID: "d-1", Tool: "echo", Arguments: json.RawMessage(`{"text":"again"}`), TimeoutMs: 10000})
	if _, err := s.Wait(ctx, func(v Snapshot) bool { return len(v.Results) >= 1 && len(v.Steps) >= 3 }); err != nil {
		t.Fatal(err)
	}
	sent := map[string]bool{}
	for _, r := range s.Requests() {
		sent[r.Path] = true
		doc, ok := documented[r.Path]
		if !ok {
			t.Errorf("the proxy sent %s %s, which docs/protocol.md does not show", r.Method, r.Path)
			continue
		}
		for _, k := range members(t, r.Body) {
			if !doc[k] {
				t.Errorf("the proxy's %s carries %q, which docs/protocol.md does not show:\n%s", r.Path, k, r.Body)
			}
		}
	}
	for path := range documented {
		if !sent[path] {
			t.Errorf("docs/protocol.md shows the proxy sending %s; it did not", path)
		}
	}
}
