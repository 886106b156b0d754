package mcpspans

import (
	"testing"
	"time"
)

// A host's tool names, prompt names, URIs and ids are strings by JSON's rules, not
// UTF-8's: raw bytes that are not UTF-8, or an escaped lone surrogate. OTLP/protobuf's
// strings must be UTF-8 (a collector's decoder refuses the whole request), so one
// hostile name must not cost the batch: every span of it reaches the collector.
func TestHostileNamesKeepTheBatchValid(t *testing.T) {
	c, x, ic := tracingOnly(t)
	now := time.Now()
	for _, m := range [][2]string{
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\xff\xfeb\"}}", `{"jsonrpc":"2.0","id":1,"result":{}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"c\ud800d"}}`, `{"jsonrpc":"2.0","id":2,"result":{}}`},
		{"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/read\",\"params\":{\"uri\":\"file:///\xc3\"}}", `{"jsonrpc":"2.0","id":3,"result":{}}`},
		{"{\"jsonrpc\":\"2.0\",\"id\":\"\xe2\x82\",\"method\":\"ping\"}", "{\"jsonrpc\":\"2.0\",\"id\":\"\xe2\x82\",\"result\":{}}"},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sane"}}`, `{"jsonrpc":"2.0","id":5,"error":{"code":-1,"message":"x\udc00"}}`},
	} {
		ic.FromHost([]byte(m[0]), now)
		ic.Forwarded(now)
		ic.FromUpstream([]byte(m[1]), now)
	}
	closeTracing(ic, x)
	c.mu.Lock()
	n := len(c.spans)
	c.mu.Unlock()
	if n != 5 {
		t.Fatalf("the collector decoded %d spans, want 5", n)
	}
	c.byName(t, "tools/call sane")
}
