package mock

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// FuzzServe: whatever a host sends, every line the mock writes is one JSON value.
func FuzzServe(f *testing.F) {
	f.Add([]byte(toolsCall("1", "echo", `{"a":1}`) + "\n"))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"id":2,"method":"tools/list"}]` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"name":"lookup","arguments":{"\ud800":1}}}`))
	f.Add([]byte("not json\n{}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		m := New([]*cassette.Header{sessionHeader()}, [][]*cassette.Call{{
			call(1, "echo", `{"a":1}`, `{"r":1}`), call(2, "lookup", `{"k":"\ud800"}`, `{"r":2}`)}}, Options{})
		var out bytes.Buffer
		_ = m.Serve(context.Background(), bytes.NewReader(in), &out)
		for _, l := range bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
			if len(l) > 0 && (!jsonlex.Valid(l) || !json.Valid(l)) {
				t.Fatalf("an answer that is not JSON: %q", l)
			}
		}
	})
}
