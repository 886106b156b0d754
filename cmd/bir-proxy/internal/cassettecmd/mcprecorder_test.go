package cassettecmd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/cassette"
)

const sample = `{"version":"1.0","metadata":{"recorded_at":"2026-02-17T20:25:23.855390+00:00","server_url":"stdio://python3 server.py --token abc","protocol_version":"2025-11-25","server_info":{"name":"calc","version":"1"}},
"interactions":[
{"type":"jsonrpc_request","request":{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcp","version":"0.1.0"}},"jsonrpc":"2.0","id":0},"response":{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"calc","version":"1"}}},"latency_ms":7},
{"type":"notification","request":{"method":"notifications/initialized","jsonrpc":"2.0"},"response":null},
{"type":"jsonrpc_request","request":{"method":"tools/list","jsonrpc":"2.0","id":1},"response":{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"add","inputSchema":{"type":"object"}}]}}},
{"type":"jsonrpc_request","request":{"method":"tools/call","params":{"name":"add","arguments":{"a": 2, "b": 3.0},"_meta":{"progressToken":2}},"jsonrpc":"2.0","id":2},"response":{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"5"}],"isError":false}},"latency_ms":18},
{"type":"jsonrpc_request","request":{"method":"tools/call","params":{"name":"add","arguments":{}},"jsonrpc":"2.0","id":3},"response":{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad"}}},
{"type":"jsonrpc_request","request":{"method":"tools/call","params":{"name":"add"},"jsonrpc":"2.0","id":4},"response":{"jsonrpc":"2.0","id":4,"result":{"content":[],"isError":true}}},
{"type":"jsonrpc_request","request":{"method":"resources/list","jsonrpc":"2.0","id":5},"response":{"jsonrpc":"2.0","id":5,"result":{"resources":[]}}},
{"type":"lifecycle","request":null,"response":null,"http_method":"DELETE","http_path":"/mcp"}]}`

func TestParseMCPRecorder(t *testing.T) {
	im, err := ParseMCPRecorder([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	h := im.Header
	if h.Era != cassette.EraSession || !h.Initialized || h.Server != "calc" || h.ProtocolVersion != "2025-11-25" ||
		strings.Contains(strings.Join(h.Command, " "), "abc") || h.Command[0] != "python3" || h.RecordedAt.IsZero() {
		t.Errorf("header %+v", h)
	}
	if len(im.ToolsLists) != 1 || len(im.Calls) != 3 {
		t.Fatalf("tools %d calls %d", len(im.ToolsLists), len(im.Calls))
	}
	c := im.Calls
	if string(c[0].Arguments) != `{"a": 2, "b": 3.0}` || c[0].Outcome != "ok" || c[0].Duration.Milliseconds() != 18 ||
		c[1].Outcome != "rpc_error" || string(c[1].Error) != `{"code":-32602,"message":"bad"}` ||
		c[2].Outcome != "tool_error" || c[2].Arguments != nil {
		t.Errorf("calls %+v", c)
	}
	if im.Left["lifecycle"] != 1 || im.Left["resources/list"] != 1 {
		t.Errorf("left %v", im.Left)
	}
	for _, bad := range []string{`[]`, `{"version":"2.0","interactions":[]}`, `{"version":"1.0"}`,
		`{"version":"1.0","interactions":[{"type":"jsonrpc_request","request":{"method":"tools/call","params":{}}}]}`} {
		if _, err := ParseMCPRecorder([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestExportMCPRecorderReadsBack(t *testing.T) {
	im, _ := ParseMCPRecorder([]byte(sample))
	h := im.Header
	h.Tools = json.RawMessage(`[{"name":"add","inputSchema":{"type":"object"}}]`)
	calls := []*cassette.Call{
		{Seq: 1, Tool: "add", Arguments: im.Calls[0].Arguments, Outcome: "ok", Result: im.Calls[0].Result, DurationMs: 18},
		{Seq: 2, Tool: "add", Arguments: json.RawMessage(`{"token":"[REDACTED]"}`), Redacted: true, Outcome: "ok", Result: json.RawMessage(`{}`)},
		{Seq: 3, Tool: "add", Outcome: "rpc_error", Error: im.Calls[1].Error},
	}
	i := 0
	out, n, left, err := ExportMCPRecorder(&h, func() (*cassette.Call, error) {
		if i == len(calls) {
			return nil, errEnd
		}
		i++
		return calls[i-1], nil
	})
	if err != nil || n != 2 || left != 1 {
		t.Fatalf("export: %d calls, %d left, %v", n, left, err)
	}
	back, err := ParseMCPRecorder(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(back.Calls) != 2 || back.Calls[1].Outcome != "rpc_error" || len(back.ToolsLists) != 1 ||
		back.Header.Server != "calc" || !back.Header.Initialized {
		t.Errorf("read back %+v", back)
	}
	var a, b any
	json.Unmarshal(im.Calls[0].Arguments, &a)
	json.Unmarshal(back.Calls[0].Arguments, &b)
	if ja, _ := json.Marshal(a); string(ja) != mustJSON(b) {
		t.Errorf("arguments %s → %s", im.Calls[0].Arguments, back.Calls[0].Arguments)
	}
	if strings.Contains(string(out), `"token"`) {
		t.Errorf("a redacted call was exported")
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func FuzzParseMCPRecorder(f *testing.F) {
	f.Add(sample)
	f.Add(`{"version":"1","interactions":[{"type":"jsonrpc_request","request":{"method":"tools/call","params":{"name":"x","arguments":[1]}},"response":{"result":1}}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		im, err := ParseMCPRecorder([]byte(s))
		if err != nil {
			return
		}
		for _, c := range im.Calls {
			for _, raw := range [][]byte{c.Arguments, c.Result, c.Error} {
				if raw != nil && !json.Valid(raw) {
					t.Fatalf("not JSON: %q", raw)
				}
			}
			if c.Outcome == "" {
				t.Fatal("no outcome")
			}
		}
	})
}
