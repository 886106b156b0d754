package relay_test

import (
	"fmt"
	"strings"
	"testing"
)

// errorScript is a server's answers whose "error" members a line streamed as it
// arrives and one read whole may read differently: both a result and an error, in
// either order; an error nested in a result (no error); an escaped key; an error of
// null; two errors; an error and then a "method"; an error after a long result.
func errorScript() string {
	long := strings.Repeat("L", 100000)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]},"error":{"code":-32001,"message":"both"}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32002,"message":"both2"},"result":{"isError":true,"content":[]}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"error":{"code":1,"message":"nested"}}}`,
		`{"jsonrpc":"2.0","id":4,"\u0065rror":{"code":-32004,"message":"escaped"}}`,
		`{"jsonrpc":"2.0","id":5,"error":null}`,
		`{"jsonrpc":"2.0","id":6,"error":{"code":-32006,"message":"first"},"error":{"code":-32066,"message":"second"}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32007},"method":"sampling/createMessage"}`,
		`{"jsonrpc":"2.0","id":8,"error":{"code":-32008,"message":"` + long + `"}}`,
		`{"jsonrpc":"2.0","id":9,"result":{},"error":{"code":-32009},"id":10}`,
		`{"jsonrpc":"2.0","id":11,"error":"a string"}`,
		`{"jsonrpc":"2.0","id":12,"error":{"code":-32012,"message":"x"},"error":null}`,
		`{"jsonrpc":"2.0","id":13,"error":{"code":-32013,"result":{}}}`,
		`{"jsonrpc":"2.0","id":14,"result":{"content":[{"type":"text","text":"` + long + `"}]},"error":{"code":-32014,"message":"late"}}`,
		`{"jsonrpc":"2.0","id":15,"error":{"code":-32015,"message":"m"}} {"jsonrpc":"2.0","id":16,"result":{}}`,
		`{"jsonrpc":"2.0","id":17,"error":{"code":-32017,"message":"` + long + `"},"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":18,"result":{"content":[]},"error":{"code":-32018,"message":"` + long + `"}}`,
		`{"jsonrpc":"2.0","id":19,"error":{"code":-32019,"message":"` + long + `"},"error":{"code":-32091,"message":"short"}}`,
		`{"jsonrpc":"2.0","id":20,"error":{"code":-32020,"message":"short"},"error":{"code":-32092,"message":"` + long + `"}}`,
		`{"jsonrpc":"2.0","id":21,"error":{"code":-32021,"message":"` + long + `"},"method":"x"}`,
		`{"jsonrpc":"2.0","id":22,"error":{"code":-32022,"message":"m"},"error":{"code":-32022,"message":"m"}`,
		`{"jsonrpc":"2.0","id":23,"error":{"code":-32023,"message":"m"}}}`,
		`{"jsonrpc":"2.0","id":24,"result":{"content":[]},"error":{"code":-32024,"message":"a"` + strings.Repeat(" ", 70000) + `}}`,
		`[{"jsonrpc":"2.0","id":25,"error":{"code":-32025,"message":"` + long + `"}},{"jsonrpc":"2.0","id":26,"result":{}}]`,
		`{"jsonrpc":"2.0","id":27,"result":{"content":[{"type":"text","text":"` + long + `"}]},"x":"error","y":{"error":1},"errors":{},"error\u0000":{}}`,
		`{"jsonrpc":"2.0","id":28,"result":{"content":[{"type":"text","text":"` + long + `"}]},"\u0065rror":{"code":-32028}}`,
		`{"jsonrpc":"2.0","id":29,"error":{"code":-32029,"message":"` + long + `"},"id":30}`,
		`{"jsonrpc":"2.0","error":{"code":-32031,"message":"` + long + `"}}`,
		`{"jsonrpc":"2.0","id":31,"error":{"code":-32031,"message":"` + long + `"},"result":null}`,
		`{"jsonrpc":"2.0","id":34,"error":{"code":-32034,"message":"` + long + `"}` + strings.Repeat(" ", 10) + `}  `,
		`{"jsonrpc":"2.0","id":35,"result":{"content":[{"type":"text","text":"` + long + `"}]},"error":{"code":-32035,"message":"x"},"method":"notifications/x"}`,
	}
	return strings.Join(lines, "\n") + "\n"
}

const errorCalls = 35

// TestStreamedAndAssembledAgreeOnErrors: TestStreamedAndAssembledAgree of errorScript.
func TestStreamedAndAssembledAgreeOnErrors(t *testing.T) {
	script := errorScript()
	base := runScripted(t, script, errorCalls, baseThreshold, false, true)
	if len(base.steps) != errorCalls {
		t.Fatalf("recorded %d steps, want %d", len(base.steps), errorCalls)
	}
	for _, threshold := range []int{1} {
		got := runScripted(t, script, errorCalls, threshold, false, true)
		name := fmt.Sprintf("threshold %d", threshold)
		if d := firstDiff(base.host, got.host); d != "" {
			t.Errorf("%s: the host got other lines: %s", name, d)
		}
		for i := range max(len(base.steps), len(got.steps)) {
			var x, y string
			if i < len(base.steps) {
				x = base.steps[i]
			}
			if i < len(got.steps) {
				y = got.steps[i]
			}
			if x != y {
				t.Errorf("%s: step %d:\n  whole    %.300s\n  streamed %.300s", name, i, x, y)
			}
		}
	}
}
