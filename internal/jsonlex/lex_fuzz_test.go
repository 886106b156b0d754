package jsonlex

import (
	"bytes"
	"encoding/json"
	"testing"
)

// lexAttackSeeds are hostile spellings of the keys the fast paths know: near eight
// bytes, escaped, prefixes and suffixes of known names, duplicates, at the line's end.
var lexAttackSeeds = []string{
	`{"\u0069d":1,"id":2}`, `{"id":1,"\u0069d":2}`, `{"ids":1,"id":2,"i":3}`,
	`{"method2":"x","method":"y","metho":"z"}`, `{"jsonrpc":"2.0 ","id":1}`,
	`{"jsonrpc":"2\u002e0","id":-0}`, `{"jsonrpc":"2.0","id":1e2}`,
	`{"id":99999999999999999999,"method":"m"}`, `{"id":-1,"result":1,"result":2}`,
	`{"params":{"name":"a","n\u0061me":"b","arguments":{"x":1}}}`,
	`{"params":{"argumentsX":1,"arguments":{"a":1},"argument":2}}`,
	`{"params":{"arguments":{"a":1},"\u0061rguments":{"b":2}}}`,
	`{"error":1,"errors":2,"erro":3,"id"`, `{"resulting":1,"result":[1]}`,
	`{"jsonrpc"`, `{"id"  :  7 }`, `{"paramsX":{},"params":{"name":"n"}}`,
	`[{"id":1},{"\u006dethod":"q","id":2}]`, `{"id":1}`, `{"id":"\u0000"}`,
}

// FuzzLexAgainstDecode holds Lex to encoding/json's reading of a valid object (each
// member's last value, keys decoded): what a host's JSON.parse sees.
func FuzzLexAgainstDecode(f *testing.F) {
	for _, s := range lexAttackSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var m map[string]json.RawMessage
		if json.Unmarshal(in, &m) != nil || bytes.TrimSpace(in)[0] != '{' {
			return
		}
		var l Line
		l.Lex(in)
		if len(l.Objs) != 1 {
			t.Fatalf("%q: %d objects", in, len(l.Objs))
		}
		o := &l.Objs[0]
		check := func(name string, s Span) {
			raw, ok := m[name]
			got := in[s.Start:s.End]
			if ok != (s != Span{}) || ok && !bytes.Equal(bytes.TrimSpace(raw), got) {
				t.Fatalf("%q: %s = %q, decode says %q (present %v)", in, name, got, raw, ok)
			}
		}
		if !o.Recheck {
			check("method", o.Method)
			check("id", o.ID)
			check("params", o.Params)
		}
		check("result", o.Result)
		check("error", o.Error)
		if o.Recheck || !bytes.HasPrefix(bytes.TrimSpace(m["params"]), []byte("{")) {
			return
		}
		var p map[string]json.RawMessage
		if json.Unmarshal(m["params"], &p) != nil {
			return
		}
		check2 := func(name string, s Span) {
			raw, ok := p[name]
			got := in[s.Start:s.End]
			if ok != (s != Span{}) || ok && !bytes.Equal(bytes.TrimSpace(raw), got) {
				t.Fatalf("%q: params.%s = %q, decode says %q (present %v)", in, name, got, raw, ok)
			}
		}
		check2("name", o.Name)
		check2("arguments", o.Arguments)
	})
}
