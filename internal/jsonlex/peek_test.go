package jsonlex

import (
	"encoding/json"
	"strings"
	"testing"
)

func peekAll(msg string, chunk int) *Peek {
	var p Peek
	for i := 0; i < len(msg); i += chunk {
		p.Write([]byte(msg[i:min(i+chunk, len(msg))]))
	}
	return &p
}

func TestPeekFindsIDAnywhere(t *testing.T) {
	big := strings.Repeat(`{"a":[1,"}\"]",{}]},`, 1000)
	cases := []struct{ msg, id, method string }{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":[` + big + `1]}}`, `7`, `"tools/call"`},
		{`{"result":{"content":[` + big + `1],"id":99},"jsonrpc":"2.0","id":"last"}`, `"last"`, ``},
		{`{"id":"first","id":9007199254740993,"result":{}}`, `9007199254740993`, ``},
		{` { "\u0069d" : null , "method":"x\"y" } `, `null`, `"x\"y"`},
		{`{"params":{"id":1,"method":"inner"},"id":[1,2]}`, `[1,2]`, ``},
		{`{"jsonrpc":"2.0","method":"notifications/progress"}`, ``, `"notifications/progress"`},
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 3, 7, 64, 1 << 20} {
			p := peekAll(c.msg, chunk)
			if string(p.ID) != c.id || string(p.Method) != c.method {
				t.Fatalf("chunk %d of %.60q: id %q method %q, want %q %q", chunk, c.msg, p.ID, p.Method, c.id, c.method)
			}
		}
	}
}

// FuzzPeek: on any valid JSON object, Peek finds what the one lexer finds.
func FuzzPeek(f *testing.F) {
	// Nesting depth: a message nested 100,000 levels (the peek must not recurse).
	f.Add([]byte(`{"id":1,"result":`+strings.Repeat(`[`, 100000)+strings.Repeat(`]`, 100000)+`}`), 1)

	f.Add([]byte(`{"id":1,"method":"a","params":{"id":2}}`), 3)
	f.Add([]byte(`{"result":"\"}","id":"x\\"}`), 1)
	f.Fuzz(func(t *testing.T, msg []byte, chunk int) {
		if chunk <= 0 || chunk > len(msg)+1 {
			chunk = len(msg) + 1
		}
		p := peekAll(string(msg), chunk)
		if !json.Valid(msg) {
			return
		}
		f, ok := TopFields(msg)
		if !ok {
			return
		}
		if len(f.ID) <= peekValueMax && string(p.ID) != string(f.ID) {
			t.Fatalf("Peek id %q, TopFields %q", p.ID, f.ID)
		}
		if len(f.Method) <= peekValueMax && string(p.Method) != string(f.Method) {
			t.Fatalf("Peek method %q, TopFields %q", p.Method, f.Method)
		}
	})
}
