package main

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestReplayDispatchCannotInjectMessages: a dispatch whose arguments hold raw
// line feeds used to be written to a stdio server as it was, so each line of it was a
// message of its own: the server received an initialize, a resources/read, a
// notification and a ping with id 77, and the host got the server's answer to that
// ping as the answer to its own request 77, still in flight. Now arguments must be
// one JSON object and are re-emitted compactly; anything else is refused with
// rpc_error -32602 without contacting the server, and the server receives exactly
// one tools/call per dispatch it runs.
func TestReplayDispatchCannotInjectMessages(t *testing.T) {
	t.Parallel()
	h := startHostileRecorder(t, nil)
	s := startHostileReplay(t, h)
	ctx := testutil.Context(t)

	// The host's own request 77, in flight throughout (rawserver never answers hang).
	s.Send(`{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"hang","arguments":{}}}`)
	testutil.Eventually(t, "the server to receive the host's call 77", func() bool {
		for _, l := range s.received() {
			if gjson.Get(l, "id").Raw == "77" {
				return true
			}
		}
		return false
	})

	inject := "{\"a\":\n" +
		`{"jsonrpc":"2.0","id":"x1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"evil","version":"1"}}}` + "\n" +
		`,"b":` + "\n" +
		`{"jsonrpc":"2.0","id":"x2","method":"resources/read","params":{"uri":"file:///etc/passwd"}}` + "\n" +
		`,"c":` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}` + "\n" +
		`,"d":` + "\n" +
		`{"jsonrpc":"2.0","id":77,"method":"ping"}` + "\n" +
		"}"
	poll := `{"dispatches":[` +
		`{"dispatchId":"inject","tool":"echo","timeoutMs":3000,"arguments":` + inject + `},` +
		`{"dispatchId":"cr","tool":"echo","timeoutMs":3000,"arguments":{"s":1}` + "\r\r" + `},` +
		`{"dispatchId":"array","tool":"echo","arguments":[1,2]},` +
		`{"dispatchId":"string","tool":"echo","arguments":"{}"},` +
		`{"dispatchId":"badtool","tool":{"n":1},"arguments":{}},` +
		`{"dispatchId":"ws","tool":"echo","timeoutMs":3000,"arguments":{ "a" : [ 1 ,` + "\n\t" + ` 2 ] ,` + "\r\n" + ` "b" : "x y\n\u00e9" }},` +
		`{"dispatchId":"none","tool":"echo"},` +
		`{"dispatchId":"null","tool":"echo","arguments":null}` +
		`],"cancel":[]}`
	h.answer([]byte(poll))

	// The injection and the carriage returns are valid objects: they run, compact.
	refused := []string{"array", "string", "badtool"}
	ran := []string{"inject", "cr", "ws", "none", "null"}
	got := h.waitResults(ctx, t, append(append([]string{}, refused...), ran...)...)
	for _, id := range refused {
		r := got[id]
		if o := gjson.Get(r, "outcome").String(); o != "rpc_error" || gjson.Get(r, "error.code").Int() != -32602 || gjson.Get(r, "error.message").String() == "" {
			t.Errorf("dispatch %s: want rpc_error -32602 with a message, got %s", id, r)
		}
	}
	for _, id := range ran {
		if o := gjson.Get(got[id], "outcome").String(); o != "ok" {
			t.Errorf("dispatch %s: want ok, got %s", id, got[id])
		}
	}

	// The host's next message answers its next request: no forged answer to 77.
	s.Send(`{"jsonrpc":"2.0","id":78,"method":"ping"}`)
	var unasked []string
	for a := s.recv(); gjson.Get(a, "id").Raw != "78"; a = s.recv() {
		unasked = append(unasked, a)
	}
	if len(unasked) > 0 {
		t.Fatalf("the host got %d messages it never asked for:\n%s", len(unasked), strings.Join(unasked, "\n"))
	}

	// The server received the host's four messages and one tools/call per dispatch
	// that ran, each a single-line JSON object, with the arguments compact.
	lines := s.received()
	var own []string
	for _, l := range lines {
		if !gjson.Valid(l) || !strings.HasPrefix(strings.TrimSpace(l), "{") {
			t.Errorf("the server received a line that is not a JSON object: %q", l)
			continue
		}
		if strings.HasPrefix(gjson.Get(l, "id").String(), "bir:") {
			own = append(own, l)
			if m := gjson.Get(l, "method").String(); m != "tools/call" {
				t.Errorf("the server received an own %s: %s", m, l)
			}
		}
	}
	if len(lines) != 4+len(ran) || len(own) != len(ran) {
		t.Fatalf("the server received %d lines (%d of the proxy's own), want %d (%d):\n%s", len(lines), len(own), 4+len(ran), len(ran), strings.Join(lines, "\n"))
	}
	want := map[string]bool{
		strings.ReplaceAll(inject, "\n", ""): false,
		`{"s":1}`:                            false,
		`{"a":[1,2],"b":"x y\n\u00e9"}`:      false,
		`{}`:                                 false,
	}
	for _, l := range own {
		args := gjson.Get(l, "params.arguments").Raw
		if _, ok := want[args]; !ok {
			t.Errorf("a dispatch reached the server with arguments %s", args)
		}
		if args == "{}" && want["{}"] {
			continue // "none" and "null" both become {}
		}
		want[args] = true
	}
	for args, seen := range want {
		if !seen {
			t.Errorf("no dispatch reached the server with arguments %s", args)
		}
	}

	// A raw line feed inside a string is not JSON at all; in an answer of its own,
	// since the old parser refused the whole answer for it.
	h.answer([]byte(`{"dispatches":[{"dispatchId":"ctl","tool":"echo","arguments":{"s":"a` + "\n" + `{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"ping\"}` + "\n" + `b"}}]}`))
	r := h.waitResults(ctx, t, "ctl")["ctl"]
	if gjson.Get(r, "outcome").String() != "rpc_error" || gjson.Get(r, "error.code").Int() != -32602 {
		t.Errorf("dispatch ctl: want rpc_error -32602, got %s", r)
	}
	if n := len(s.received()); n != len(lines) {
		t.Errorf("the server received %d more lines for a refused dispatch", n-len(lines))
	}
	s.Stdin.Close()
	s.ExitCode()
}
