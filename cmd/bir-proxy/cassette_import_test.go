package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// An mcp-recorder cassette as its recorder writes it (indented, Python's spacing).
const mcpRecorderCassette = `{
  "version": "1.0",
  "metadata": {"recorded_at": "2026-02-17T20:25:23.855390+00:00", "server_url": "http://127.0.0.1:8000", "protocol_version": "2025-11-25", "server_info": {"name": "calc", "version": "2.14.5"}},
  "interactions": [
    {"type": "jsonrpc_request", "request": {"method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "mcp", "version": "0.1.0"}}, "jsonrpc": "2.0", "id": 0},
     "response": {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": true}}, "serverInfo": {"name": "calc", "version": "2.14.5"}}},
     "response_is_sse": true, "response_status": 200, "latency_ms": 7, "http_method": null, "http_path": null},
    {"type": "notification", "request": {"method": "notifications/initialized", "jsonrpc": "2.0"}, "response": null, "response_is_sse": false, "response_status": 202, "latency_ms": 1, "http_method": null, "http_path": null},
    {"type": "jsonrpc_request", "request": {"method": "tools/list", "jsonrpc": "2.0", "id": 1},
     "response": {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}]}},
     "response_is_sse": true, "response_status": 200, "latency_ms": 22, "http_method": null, "http_path": null},
    {"type": "jsonrpc_request", "request": {"method": "tools/call", "params": {"name": "echo", "arguments": {"message": "hi"}, "_meta": {"progressToken": 2}}, "jsonrpc": "2.0", "id": 2},
     "response": {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "{\"message\": \"hi\"}"}], "isError": false}},
     "response_is_sse": true, "response_status": 200, "latency_ms": 18, "http_method": null, "http_path": null},
    {"type": "lifecycle", "request": null, "response": null, "response_is_sse": false, "response_status": 200, "latency_ms": 1, "http_method": "DELETE", "http_path": "/mcp"}
  ]
}
`

const readOnlyEcho = `[{"tools":[{"name":"echo","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}]`

// readCassette reads a cassette with the strict reader: its header and calls.
func readCassette(t *testing.T, path string) (*cassette.Header, []*cassette.Call) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := cassette.NewReader(f, path)
	if err != nil {
		t.Fatal(err)
	}
	var calls []*cassette.Call
	for {
		c, err := r.Next()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("%s: %v", path, err)
			}
			break
		}
		calls = append(calls, c)
	}
	return r.Header(), calls
}

func TestCassetteImportMCPRecorderVerifies(t *testing.T) {
	w := newCallWorld(t)
	in := filepath.Join(w.dir, "golden.json")
	os.WriteFile(in, []byte(mcpRecorderCassette), 0o600)
	pages := filepath.Join(w.dir, "pages.json")
	os.WriteFile(pages, []byte(readOnlyEcho), 0o600)
	out := filepath.Join(w.dir, "imported.jsonl")
	code, _, errs := w.run("cassette", "import", "--from", "mcp-recorder", in, "-o", out)
	if code != 0 || !strings.Contains(errs, "1 calls written") || !strings.Contains(errs, "1 lifecycle") {
		t.Fatalf("import: exit %d %s", code, errs)
	}
	h, calls := readCassette(t, out)
	if h.Era != cassette.EraSession || h.Server != "calc" || h.Initialize == nil || h.Tools == nil ||
		len(calls) != 1 || string(calls[0].Arguments) != `{"message": "hi"}` {
		t.Fatalf("header %+v calls %+v", h, calls)
	}
	// rawserver's echo answers the raw arguments: the same answer, replayed read-only.
	code, out2, errs := w.run("verify", out, "--json", "--", w.raw, "--reply", "--tools-pages", pages)
	if st, _ := statuses(t, out2); code != 0 || st["echo"] != "same" {
		t.Errorf("verify: exit %d %v\n%s", code, st, errs)
	}
	// Not an mcp-recorder cassette: said, nothing written.
	bad := filepath.Join(w.dir, "bad.json")
	os.WriteFile(bad, []byte(`{"interactions": 3}`), 0o600)
	if code, _, errs := w.run("cassette", "import", "--from", "mcp-recorder", bad, "-o", filepath.Join(w.dir, "x.jsonl")); code != 1 || !strings.Contains(errs, "not an mcp-recorder cassette") {
		t.Errorf("bad input: exit %d %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "x.jsonl")); err == nil {
		t.Error("a cassette was written from a bad input")
	}
}

func TestCassetteExportImportRoundTrip(t *testing.T) {
	w := newCallWorld(t)
	pages := filepath.Join(w.dir, "pages.json")
	os.WriteFile(pages, []byte(readOnlyEcho), 0o600)
	c := filepath.Join(w.dir, "c.jsonl")
	if code, _, errs := w.run("call", "--cassette", c, "echo", "text=x", "--", w.raw, "--reply", "--tools-pages", pages); code != 0 {
		t.Fatalf("call: exit %d %s", code, errs)
	}
	mr := filepath.Join(w.dir, "c.json")
	code, _, errs := w.run("cassette", "export", "--to", "mcp-recorder", c, "-o", mr)
	if st, err := os.Stat(mr); code != 0 || err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("export: exit %d %s %v", code, errs, err)
	}
	back := filepath.Join(w.dir, "back.jsonl")
	if code, _, errs := w.run("cassette", "import", "--from", "mcp-recorder", mr, "-o", back); code != 0 {
		t.Fatalf("import: exit %d %s", code, errs)
	}
	h, calls := readCassette(t, back)
	h0, calls0 := readCassette(t, c)
	if h.Server != h0.Server || len(calls) != 1 || calls[0].Tool != calls0[0].Tool || string(h.Initialize) == "" {
		t.Errorf("round trip: %+v %+v", h, calls)
	}
	code, out, errs := w.run("verify", back, "--json", "--", w.raw, "--reply", "--tools-pages", pages)
	if st, _ := statuses(t, out); code != 0 || st["echo"] != "same" {
		t.Errorf("verify: exit %d %v\n%s", code, st, errs)
	}
}

func TestCassetteImportJournalKeepsReplayableCalls(t *testing.T) {
	w := newCallWorld(t)
	for _, args := range [][]string{{"echo", "a=1"}, {"echo", "password=hunter2"}, {"fail"}} {
		w.run(append(append([]string{"call", "--server", "jr"}, args...), "--", w.raw, "--reply")...)
	}
	journal := filepath.Join(w.state, "bir-proxy", "journal", "jr.jsonl")
	out := filepath.Join(w.dir, "j.jsonl")
	code, _, errs := w.run("cassette", "import", "--from", "journal", journal, "-o", out)
	if code != 0 || !strings.Contains(errs, "2 calls written") || !strings.Contains(errs, "1 calls with redacted") {
		t.Fatalf("import: exit %d %s", code, errs)
	}
	h, calls := readCassette(t, out)
	if h.Server != "jr" || len(calls) != 2 || calls[1].Outcome != "tool_error" {
		t.Fatalf("header %+v calls %+v", h, calls)
	}
	b, _ := os.ReadFile(out)
	if strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "password") {
		t.Errorf("the redacted call is in the cassette:\n%s", b)
	}
	// No tools/list in a journal: verify runs the calls only with --allow-writes.
	code, o, errs := w.run("verify", out, "--json", "--allow-writes", "--", w.raw, "--reply")
	if st, _ := statuses(t, o); code != 0 || st["echo"] != "same" || st["fail"] != "same" {
		t.Errorf("verify: exit %d %v\n%s", code, st, errs)
	}
}

func TestCassetteCmdUsage(t *testing.T) {
	w := newCallWorld(t)
	for _, args := range [][]string{
		{"cassette"},
		{"cassette", "import", "x.json"},
		{"cassette", "import", "--from", "vcr", "x.json", "-o", "y"},
		{"cassette", "export", "--to", "vcr", "x.jsonl"},
		{"cassette", "frobnicate", "x"},
	} {
		if code, _, errs := w.run(args...); code != 2 {
			t.Errorf("%q: exit %d, want 2: %s", args, code, errs)
		}
	}
}

// TestCassetteImportLeftNoteIsBounded: what an import left out is said in a short
// line, whatever the file: 10,000 methods of their own names (one of 100 KB) made a
// line naming each, of over a megabyte.
func TestCassetteImportLeftNoteIsBounded(t *testing.T) {
	_, _ = isolate(t)
	bp := testutil.Build(t, "./cmd/bir-proxy")
	dir := t.TempDir()
	var its []string
	for i := range 10000 {
		its = append(its, `{"type":"jsonrpc_request","request":{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"m`+strconv.Itoa(i)+`"}}`)
	}
	its = append(its, `{"type":"jsonrpc_request","request":{"jsonrpc":"2.0","id":1,"method":"`+strings.Repeat("x", 100<<10)+`"}}`,
		`{"type":"jsonrpc_request","request":{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":{}}},"response":{"jsonrpc":"2.0","id":2,"result":{"content":[]}}}`)
	in := filepath.Join(dir, "many.json")
	os.WriteFile(in, []byte(`{"version":"1.0","metadata":{},"interactions":[`+strings.Join(its, ",")+`]}`), 0o600)
	p := testutil.Start(t, exec.Command(bp, "cassette", "import", "--from", "mcp-recorder", in, "-o", filepath.Join(dir, "out.jsonl")))
	p.Stdin.Close()
	code := p.ExitCode()
	errs := p.Stderr.String()
	if code != 0 || !strings.Contains(errs, "1 calls written") || len(errs) > 2048 || !strings.Contains(errs, "and 9993 more") {
		t.Errorf("exit %d, %d bytes on stderr: %.300s", code, len(errs), errs)
	}
}
