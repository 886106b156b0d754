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
		// Escapes with no quote for a long way (the skip's quote search is kept
		// across them), and quotes escaped among them.
		{`{"result":{"t":"` + strings.Repeat(`\\`, 50000) + `\"` + strings.Repeat(`\u0000`, 9000) + `"},"id":"after"}`, `"after"`, ``},
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

// TestPeekTellsAnIDTooLongToKeep: an id over the bound is not kept, but said to be
// there, so a line over the cap is answered with an id of null rather than taken for
// a notification and never answered; a later id, the one JSON.parse keeps, wins.
func TestPeekTellsAnIDTooLongToKeep(t *testing.T) {
	long := `"` + strings.Repeat("i", peekIDMax) + `"`
	kept := `"` + strings.Repeat("k", 2000) + `"`
	cases := []struct{ msg, want string }{
		{`{"id":` + long + `,"method":"ping"}`, `null`},
		{`{"method":"ping","params":{},"id":` + long + `}`, `null`},
		{`{"method":"ping","id":` + kept + `}`, kept},
		{`{"id":` + long + `,"method":"ping","id":3}`, `3`},
		{`{"id":3,"method":"ping","id":` + long + `}`, `null`},
		{`{"method":"notifications/x"}`, ``},
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 7, 4096, 1 << 20} {
			if p := peekAll(c.msg, chunk); string(p.IDOrNull()) != c.want {
				t.Fatalf("chunk %d of %.60q: id to answer by %.40q, want %.40q", chunk, c.msg, p.IDOrNull(), c.want)
			}
		}
	}
}

// tapAll peeks msg in pieces of chunk bytes with a Tap, and returns the last result
// and error values it was given, each assembled from its pieces.
func tapAll(msg []byte, chunk int) (p *Peek, result, errv []byte) {
	p = &Peek{}
	p.Tap = func(b []byte, begin, isErr bool) {
		v := &result
		if isErr {
			v = &errv
		}
		if begin {
			*v = []byte{}
		}
		*v = append(*v, b...)
	}
	for i := 0; i < len(msg); i += chunk {
		p.Write(msg[i:min(i+chunk, len(msg))])
	}
	return p, result, errv
}

func TestPeekTapsResultAndError(t *testing.T) {
	big := strings.Repeat(`{"a":[1,"}\"]",{}]},`, 100)
	cases := []struct{ msg, result, errv string }{
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[` + big + `1]}}`, `{"content":[` + big + `1]}`, ``},
		{`{"id":1,"result":5}`, `5`, ``},
		{`{"id":1,"result": true ,"x":1}`, `true`, ``},
		{`{"id":1,"result":"a\"}b"}`, `"a\"}b"`, ``},
		{`{"result":1,"id":1,"result":[2]}`, `[2]`, ``},
		{`{"id":1,"error":{"code":-1,"message":"x"},"jsonrpc":"2.0"}`, ``, `{"code":-1,"message":"x"}`},
		{`{"id":1,"r\u0065sult":-1.5e3}`, `-1.5e3`, ``},
		{`{"id":1,"params":{"result":1}}`, ``, ``},
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 2, 3, 7, 64, 1 << 20} {
			_, res, errv := tapAll([]byte(c.msg), chunk)
			if string(res) != c.result || string(errv) != c.errv {
				t.Fatalf("chunk %d of %.60q: result %q error %q, want %q %q", chunk, c.msg, res, errv, c.result, c.errv)
			}
		}
	}
	rp := &Peek{Names: &[2]string{"isError", "resultType"}}
	rp.Write([]byte(`{"content":[{"isError":false}],"resultType":"input_required","isError":true}`))
	if string(rp.ID) != "true" || string(rp.Method) != `"input_required"` {
		t.Fatalf("Names: isError %q resultType %q", rp.ID, rp.Method)
	}
}

// FuzzPeek: on any valid JSON object, Peek finds what the one lexer finds.
func FuzzPeek(f *testing.F) {
	// Nesting depth: a message nested 100,000 levels (the peek must not recurse).
	f.Add([]byte(`{"id":1,"result":`+strings.Repeat(`[`, 100000)+strings.Repeat(`]`, 100000)+`}`), 1)

	f.Add([]byte(`{"id":1,"method":"a","params":{"id":2}}`), 3)
	f.Add([]byte(`{"result":"\"}","id":"x\\"}`), 1)
	f.Add([]byte(`{"id":1,"\u0065rror":null,"result":{"error":1}}`), 2)
	f.Fuzz(func(t *testing.T, msg []byte, chunk int) {
		if chunk <= 0 || chunk > len(msg)+1 {
			chunk = len(msg) + 1
		}
		p := peekAll(string(msg), chunk)
		tp, res, errv := tapAll(msg, chunk)
		if string(tp.ID) != string(p.ID) || string(tp.Method) != string(p.Method) || tp.Answer != p.Answer || tp.Broken() != p.Broken() || tp.Done() != p.Done() || tp.More != p.More {
			t.Fatalf("a Tap changed what Peek found: %+v vs %+v", tp, p)
		}
		if !json.Valid(msg) {
			return
		}
		f, ok := TopFields(msg)
		if !ok {
			return
		}
		if p.Error != (f.Error != nil) || tp.Error != p.Error {
			t.Fatalf("Peek Error %v (tapped %v), TopFields error %q", p.Error, tp.Error, f.Error)
		}
		if string(res) != string(f.Result) || string(errv) != string(f.Error) {
			t.Fatalf("Tap gave result %q error %q, TopFields %q %q", res, errv, f.Result, f.Error)
		}
		if f.Result != nil && f.Result[0] == '{' {
			rp := &Peek{Names: &[2]string{"isError", "resultType"}}
			rp.Write(f.Result)
			ie, rt := Get(f.Result, "isError"), Get(f.Result, "resultType")
			if len(ie) <= peekValueMax && string(rp.ID) != string(ie) || len(rt) <= peekValueMax && string(rp.Method) != string(rt) {
				t.Fatalf("Peek with Names read isError %q resultType %q, Get %q %q", rp.ID, rp.Method, ie, rt)
			}
		}
		if len(f.ID) <= peekIDMax && (string(p.ID) != string(f.ID) || p.IDOver) {
			t.Fatalf("Peek id %q (over %v), TopFields %q", p.ID, p.IDOver, f.ID)
		}
		if len(f.ID) > peekIDMax && (p.ID != nil || string(p.IDOrNull()) != "null") {
			t.Fatalf("Peek id %.40q of an id over the bound, want none (null to answer by)", p.ID)
		}
		if len(f.Method) <= peekValueMax && string(p.Method) != string(f.Method) {
			t.Fatalf("Peek method %q, TopFields %q", p.Method, f.Method)
		}
	})
}

// TestPeekSaysAnError: Error says a top-level "error" member came, in any piece and
// order, as a Fields reader takes any error member for an error answer; a nested one
// is not.
func TestPeekSaysAnError(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}`, true},
		{`{"jsonrpc":"2.0","error":{"code":-1},"result":{},"id":1}`, true},
		{`{"jsonrpc":"2.0","id":1,"\u0065rror":null}`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"error":{"code":1}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, false},
	} {
		for _, chunk := range []int{1, 5, 1 << 20} {
			if p := peekAll(c.msg, chunk); p.Error != c.want || !p.Answer {
				t.Fatalf("chunk %d of %s: Error %v Answer %v, want Error %v", chunk, c.msg, p.Error, p.Answer, c.want)
			}
		}
	}
}

// BenchmarkPeekEscapes: a 4 MiB string of escapes in 1 MiB pieces, as a server's long
// answer reaches Peek. The next quote was searched for again at every backslash, so
// the cost grew with the piece's square (a 6 MB line took 40 s); it is linear now.
func BenchmarkPeekEscapes(b *testing.B) {
	msg := []byte(`{"result":{"t":"` + strings.Repeat(`\\`, 2<<20) + `"},"id":1}`)
	b.SetBytes(int64(len(msg)))
	var p Peek
	for b.Loop() {
		p.Reset()
		for rest := msg; len(rest) > 0; {
			n := min(len(rest), 1<<20)
			p.Write(rest[:n])
			rest = rest[n:]
		}
	}
}
