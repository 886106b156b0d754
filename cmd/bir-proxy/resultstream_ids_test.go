package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// TestAServerRequestWithAHandshakesIDLeavesItsAnswerWhole: the server sends a long
// line whose head is an answer to the host's tools/list (id 2) but which turns out
// to be a request of its own (a "method" after the result); then the real answer to
// tools/list, long. (A later page's: the first is read whole before the relay sees
// it.) Registration must learn the tools from it, as it does when
// every line is read whole. The head alone had the id forgotten, the real answer
// was reduced, and the recorder was told the server has no tools.
func TestAServerRequestWithAHandshakesIDLeavesItsAnswerWhole(t *testing.T) {
	pad := strings.Repeat("0123456789abcdef", 8<<10) // 128 KiB
	for _, threshold := range []string{"0", "", "1"} {
		t.Run("threshold="+threshold, func(t *testing.T) {
			rec := recordertest.Start(t)
			env := append(recording(rec, t.TempDir()), "BIR_STREAM_THRESHOLD="+threshold)
			r := startStreamRig(t, env, "--server", "s")
			s := r.server()
			r.handshake(t, s)
			// A later page (a cursor): the session's set-up reads only the first page
			// whole itself (upstream.Setup), registration every page it is the first
			// tools/list answer of.
			r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"c"}}`)
			s.recvLine(t)
			s.print(t, `{"jsonrpc":"2.0","id":2,"result":{"pad":"`+pad+`"},"method":"ping"}`+"\n")
			r.lines(2)
			s.print(t, `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"write","description":"`+pad+`","inputSchema":{"type":"object"}}]}}`+"\n")
			r.lines(3)
			if _, err := rec.Wait(testutil.Context(t), func(v recordertest.Snapshot) bool {
				for _, reg := range v.Registrations {
					if strings.Contains(reg.Get("tools").Raw, `"write"`) {
						return true
					}
				}
				return false
			}); err != nil {
				var tools []string
				for _, reg := range rec.Registrations() {
					tools = append(tools, reg.Get("tools").Raw)
				}
				t.Fatalf("no registration learned the tool write from the tools/list answer: %v (tools registered: %q)", err, tools)
			}
		})
	}
}

// TestALongErrorKeepsItsCode: an error value over 64 KiB is reported as not
// recorded when the answer streams (docs/recording.md), but with the server's code,
// which the whole answer's report shows: the report said no code at all.
func TestALongErrorKeepsItsCode(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":7,"error":{"code":-32099,"message":"` + strings.Repeat("m", 80<<10) + `"}}`
	code := func(threshold string) any {
		journal := filepath.Join(t.TempDir(), "j.jsonl")
		r := startStreamRig(t, []string{"BIR_OFF=0", "BIR_STREAM_THRESHOLD=" + threshold}, "--server", "s", "--journal", journal)
		s := r.server()
		r.handshake(t, s)
		r.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write","arguments":{}}}`)
		s.recvLine(t)
		s.print(t, answer+"\n")
		if got := r.lines(2)[1]; got != answer {
			t.Fatalf("threshold %q: the host got %d bytes, want the answer's %d", threshold, len(got), len(answer))
		}
		r.stdin.Close()
		r.exited("the host closed its input")
		m := writeReport(t, journal)
		if m == nil {
			t.Fatalf("threshold %q: no report", threshold)
		}
		if m["outcome"] != "rpc_error" {
			t.Fatalf("threshold %q: outcome %v, want rpc_error", threshold, m["outcome"])
		}
		e, _ := m["error"].(map[string]any)
		return e["code"]
	}
	whole := code("0")
	for _, threshold := range []string{"", "1"} {
		if got := code(threshold); got != whole {
			w, _ := json.Marshal(whole)
			g, _ := json.Marshal(got)
			t.Errorf("threshold %q: the report's error code %s, the whole answer's %s", threshold, g, w)
		}
	}
}
