package mcpspans

import (
	"strings"
	"testing"
	"time"
)

// TestTaskSpanLastsToTheTaskEnd: a tools/call answered with a task handle is one
// span from the request to the task's end, with the task's outcome; the tasks/get
// polls have spans of their own; a task still open at the end is task_unfinished.
func TestTaskSpanLastsToTheTaskEnd(t *testing.T) {
	c, x, ic := tracingOnly(t)
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	host := func(ms int, m string) {
		ic.FromHost([]byte(m), at(ms))
		ic.Forwarded(at(ms))
	}
	up := func(ms int, m string) { ic.FromUpstream([]byte(m), at(ms)) }

	host(0, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	up(10, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t1","status":"working"}}`)
	host(20, `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"t1"}}`)
	up(30, `{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","taskId":"t1","status":"working"}}`)
	host(40, `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"t1"}}`)
	up(500, `{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","taskId":"t1","status":"completed","result":{"content":[],"isError":true}}}`)

	host(600, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"legacy","arguments":{},"task":{}}}`)
	up(610, `{"jsonrpc":"2.0","id":4,"result":{"task":{"taskId":"t2","status":"working"}}}`)
	host(620, `{"jsonrpc":"2.0","id":5,"method":"tasks/result","params":{"taskId":"t2"}}`)
	up(900, `{"jsonrpc":"2.0","id":5,"error":{"code":-32001,"message":"boom"}}`)

	host(1000, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"forever","arguments":{}}}`)
	up(1010, `{"jsonrpc":"2.0","id":6,"result":{"resultType":"task","taskId":"t3","status":"working"}}`)
	closeTracing(ic, x)

	slow, a := c.byName(t, "tools/call slow")
	if got := time.Unix(0, int64(slow.EndTimeUnixNano)).UTC(); !got.Equal(at(500)) || a["error.type"] != "tool_error" {
		t.Errorf("slow: ended %v (%s), want at the completed poll %v as tool_error", got, a["error.type"], at(500))
	}
	c.mu.Lock()
	polls := 0
	for _, s := range c.spans {
		if s.Name == "tasks/get" {
			polls++
		}
	}
	c.mu.Unlock()
	if polls != 2 {
		t.Errorf("%d tasks/get spans, want 2", polls)
	}
	legacy, a := c.byName(t, "tools/call legacy")
	if got := time.Unix(0, int64(legacy.EndTimeUnixNano)).UTC(); !got.Equal(at(900)) || a["error.type"] != "-32001" {
		t.Errorf("legacy: ended %v (%s), want at tasks/result's error %v", got, a["error.type"], at(900))
	}
	if _, a := c.byName(t, "tools/call forever"); a["error.type"] != "task_unfinished" {
		t.Errorf("an open task at the end: error.type %q", a["error.type"])
	}
}

// TestToolErrorStatusMessage: a tool error's span says what the tool said, redacted
// and clipped like the labels, as a JSON-RPC error's span says its message.
func TestToolErrorStatusMessage(t *testing.T) {
	c, x, ic := tracingOnly(t)
	now := time.Now()
	ic.FromHost([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy","arguments":{}}}`), now)
	ic.Forwarded(now)
	ic.FromUpstream([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"image","data":"x"},{"type":"text","text":"no access with token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}],"isError":true}}`), now)
	closeTracing(ic, x)
	sp, a := c.byName(t, "tools/call deploy")
	if a["error.type"] != "tool_error" || sp.Status == nil || !strings.HasPrefix(sp.Status.Message, "no access with token ") ||
		strings.Contains(sp.Status.Message, "ghp_0123") {
		t.Errorf("status %v, error.type %q: want the tool's words, its token redacted", sp.Status, a["error.type"])
	}
}
