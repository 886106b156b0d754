package replay

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// deepSeed is n levels of nested arrays, then of objects.
func deepSeed(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

// FuzzParsePoll: whatever a recorder answers a poll with, parsePoll neither panics
// nor recurses (the seeds nest a million levels deep, where gjson's validator used
// to overflow the stack), and every dispatch it lets through becomes a tools/call
// whose params are one JSON object on one line: nothing else can reach a server.
func FuzzParsePoll(f *testing.F) {
	const depth = 1_000_000
	for _, s := range []string{
		`{"dispatches":[{"dispatchId":"d1","tool":"echo","arguments":{"a":1},"timeoutMs":1e300}],"cancel":["d0"]}`,
		"{\"dispatches\":[{\"dispatchId\":\"d\",\"tool\":\"echo\",\"arguments\":{\"a\":\n{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"ping\"}\n}}]}",
		"{\"dispatches\":[{\"dispatchId\":\"d\",\"tool\":\"echo\",\"arguments\":{\"s\":\"a\nb\"}}]}",
		`{"dispatches":[{"dispatchId":"d","tool":"t","arguments":[1]},{"dispatchId":"e","tool":1},{"tool":"x"}]}`,
		`{"dispatches":[{"dispatchId":"d","tool":"t","timeoutMs":-5},{"dispatchId":"e","tool":"t","timeoutMs":"5"}]}`,
		`{"extra":` + deepSeed("[", "]", depth) + `,"dispatches":[]}`,
		`{"dispatches":[{"dispatchId":"d","tool":"t","arguments":{"x":` + deepSeed(`{"a":`, "}", depth) + `1}}]}`,
		`{"dispatches":` + deepSeed("[", "]", depth) + `}`,
		`{"cancel":[` + deepSeed("[", "]", depth) + `]}`,
		deepSeed("[", "]", depth),
		deepSeed(`{"a":`, "", depth),
		`{"dispatches":[{"dispatchId":"d","tool":"t","arguments":{"x":` + deepSeed("[", "", depth) + `}}]}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, body []byte) {
		a, ok := parsePoll(body, now, 1<<20)
		if !ok {
			return
		}
		for _, d := range a.dispatches {
			if d.id == "" {
				t.Fatalf("a dispatch without an id: %+v", d)
			}
			if d.timeout < 0 || d.timeout > maxTimeout {
				t.Fatalf("timeout %v out of [0, %v]", d.timeout, maxTimeout)
			}
			if d.refused != "" {
				continue
			}
			p := callParams(d, nil)
			if !jsonlex.Valid(p) || p[0] != '{' || bytes.ContainsAny(p, "\r\n") {
				t.Fatalf("params that are not one single-line object: %q", p)
			}
			if !jsonlex.Valid(d.args) || d.args[0] != '{' {
				t.Fatalf("arguments that are not an object: %q", d.args)
			}
		}
	})
}

// FuzzDispatchResult: a server's answer to a dispatch, however deep, is classified
// and made into a result body that is valid JSON, without recursion.
func FuzzDispatchResult(f *testing.F) {
	const depth = 1_000_000
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"bir:p:1","result":{"content":[],"isError":true}}`,
		`{"jsonrpc":"2.0","id":"bir:p:1","error":{"code":-1,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":"bir:p:1","result":{"resultType":"input_required"}}`,
		`{"jsonrpc":"2.0","id":"bir:p:1","result":` + deepSeed("[", "]", depth) + `}`,
		`{"jsonrpc":"2.0","id":"bir:p:1","result":{"deep":` + deepSeed(`{"a":`, "}", depth)[:5*depth] + `1` + strings.Repeat("}", depth) + `}}`,
		`{"jsonrpc":"2.0","id":"bir:p:1","result":` + deepSeed("[", "", depth) + `}`,
		`{"jsonrpc":"2.0","id":"bir:p:1","error":` + deepSeed("[", "]", depth) + `}`,
	} {
		f.Add([]byte(s))
	}
	d := &dispatch{id: "d1", tool: "echo"}
	f.Fuzz(func(t *testing.T, resp []byte) {
		o := classify(resp)
		if b := resultBody("p", d, o); !jsonlex.Valid(b) {
			t.Fatalf("a result body that is not JSON: %.200q", b)
		}
	})
}
