package toolpolicy

import (
	"encoding/json"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// FuzzToolCutsHostView: FuzzToolCuts checks the cuts against jsonlex's own reading;
// this reads the cut answer as a host does, with another parser (encoding/json, the
// last of duplicate keys, keys case-sensitive through maps): a valid answer stays
// valid, and no tool the policy hides is left in its result.tools.
func FuzzToolCutsHostView(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"result":{"tools":[{"name":"a"},{"name":"h1"},{"name":"b"}]}}`,
		`{"id":1,"result":{"tools":[ {"name":"h1"} , {"name":"h2"} ]}}`,
		`{"id":1,"result":{"tools":[{"name":"h1"}],"tools":[{"name":"h2"},{"name":"a"}]}}`,
		`{"id":1,"result":{"tools":[{"name":"h1","name":"a"},{"name":"a","name":"\u0068"}]}}`,
		`{"id":1,"result":{},"result":{"tools":[{"name":"H","x":[[[{"name":"h"}]]]}]}}`,
		`{"id":1,"result":{"tools":[{"name":"h1"},]}}`,
		`{"result":{"tools":[{"n\u0061me":"h"},{"name":"a"}]}}`,
	} {
		f.Add(s)
	}
	p := &Policy{Ignore: []string{"h*"}}
	f.Fuzz(func(t *testing.T, in string) {
		b := []byte(in)
		start := jsonlex.SkipSpace(b, 0)
		if start >= len(b) || b[start] != '{' {
			return
		}
		cuts := p.ToolCuts(b, jsonlex.Span{Start: start, End: len(b)}, nil)
		for i, c := range cuts {
			if c.Start < 0 || c.End > len(b) || c.Start > c.End || i > 0 && cuts[i-1].End > c.Start {
				t.Fatalf("cuts %v of %d bytes", cuts, len(b))
			}
		}
		out := Cut(b, cuts)
		if !json.Valid(b) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("cut of %s is not JSON: %s", in, out)
		}
		var msg map[string]json.RawMessage
		var result map[string]json.RawMessage
		var tools []json.RawMessage
		if json.Unmarshal(out, &msg) != nil || json.Unmarshal(msg["result"], &result) != nil || json.Unmarshal(result["tools"], &tools) != nil {
			return // not the shape a host reads tools from
		}
		for _, tool := range tools {
			var fields map[string]json.RawMessage
			var name string
			if json.Unmarshal(tool, &fields) == nil && json.Unmarshal(fields["name"], &name) == nil && p.Hidden(name) {
				t.Fatalf("cut of %s shows the hidden %q: %s", in, name, out)
			}
		}
	})
}
