package jsonlex

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// lineAgrees checks that one Lex of line finds what the per-reader walks found before
// it: EachRPC's objects and fields (RPC), and EachObject's objects less those TopFields
// cannot read (Objs); Recheck whenever a method, id or params member is repeated, and
// otherwise the members of params.arguments recorded, as Members reads them.
func lineAgrees(t *testing.T, line []byte) {
	t.Helper()
	var lx Line
	lx.Lex(line)
	var want []string
	EachRPC(line, func(obj []byte, f Fields) {
		want = append(want, fmt.Sprintf("%s|%s|%s|%s|%s|%s", obj, f.Method, f.ID, f.Params, f.Result, f.Error))
	})
	var got []string
	for _, o := range lx.RPC() {
		f := o.Fields(line)
		got = append(got, fmt.Sprintf("%s|%s|%s|%s|%s|%s", o.Bytes(line), f.Method, f.ID, f.Params, f.Result, f.Error))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Lex(%q).RPC():\n got %q\nwant %q (EachRPC)", line, got, want)
	}
	var objs []string
	EachObject(line, func(s Span) {
		if _, ok := TopFields(line[s.Start:s.End]); ok {
			objs = append(objs, string(line[s.Start:s.End]))
		}
	})
	got = got[:0]
	for i, o := range lx.Objs {
		got = append(got, string(o.Bytes(line)))
		ms, _, _ := Members(line, o.Start)
		n := map[string]int{}
		for _, m := range ms {
			n[StringOf(line[m.Key.Start:m.Key.End])]++
		}
		if dup := n["method"] > 1 || n["id"] > 1 || n["params"] > 1; dup && !o.Recheck {
			t.Fatalf("Lex(%q): object %d has duplicates but no Recheck", line, i)
		}
		if o.Recheck {
			continue
		}
		var want []Member
		if f := o.Fields(line); f.Params != nil && f.Params[0] == '{' {
			pms, _, ok := Members(line, o.Params.Start)
			if !ok {
				t.Fatalf("Lex(%q): object %d: params unreadable, no Recheck", line, i)
			}
			nargs := 0
			for _, m := range pms {
				if KeyIs(line[m.Key.Start:m.Key.End], "arguments") {
					nargs++
					if line[m.Value.Start] == '{' {
						if want, _, ok = Members(line, m.Value.Start); !ok {
							t.Fatalf("Lex(%q): object %d: arguments unreadable, no Recheck", line, i)
						}
					}
				}
			}
			if nargs > 1 {
				t.Fatalf("Lex(%q): object %d: %d arguments, no Recheck", line, i, nargs)
			}
		}
		if got := lx.Arguments(&lx.Objs[i]); fmt.Sprint(got) != fmt.Sprint(want) && len(got)+len(want) > 0 {
			t.Fatalf("Lex(%q): object %d: arguments %v, want %v", line, i, got, want)
		}
		// Name and Arguments are what Get reads of params.
		if f := o.Fields(line); f.Params != nil && f.Params[0] == '{' {
			for _, c := range []struct {
				name string
				got  Span
			}{{"name", o.Name}, {"arguments", o.Arguments}} {
				if g, w := spanOf(line, c.got), Get(f.Params, c.name); string(g) != string(w) || (g == nil) != (w == nil) {
					t.Fatalf("Lex(%q): object %d: params.%s %q, Get reads %q", line, i, c.name, g, w)
				}
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(objs) {
		t.Fatalf("Lex(%q).Objs:\n got %q\nwant %q (EachObject)", line, got, objs)
	}
}

func TestLineAgreesWithEachRPC(t *testing.T) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`,
		` {"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1}} [{"id":"s","result":{}},{"error":{"code":1},"id":null}] 7 {"\u0069d":9,"id":10}`,
		`{"method":"a","method":"b","params":1,"params":{"x":2}}`,
		`{"i\u0064":1,"\u006dethod":"x","\u0070arams":{},"r\u0065sult":1,"\u0065rror":2,"\"id":3,"id\u0000":4}`,
		`{}`, `[]`, `[{}]`, `[1,{"id":2},[{"id":3}]]`,
		`{"id" 1} {"id":2}`,            // a broken object: EachRPC stops, EachObject does not
		`[{"id":1} {"id":2}] {"id":3}`, // a broken batch whose brackets match
		`[{"id":1},{"id" 2},{"id":3}]`, // a broken element: both step over it
		`{"id":1`, `{"a":"\"}`, `"x" {"id":5}`, `{"id":1}}{"id":2}`,
		`{"id":"a\\"}`, `{"method":"\u0074ools/call"}`,
		`{"params":{"arguments":{"a":1,"b":[2]},"x":3}}`, `{"params":{"\u0061rguments":{"a":1}}}`,
		`{"params":{"arguments":{"a":1},"arguments":{"b":2}}}`, `{"params":{"arguments":{"a":1} "x"}}`,
		`{"params":{"arguments":{"a" 1}}}`, `{"params":{"arguments":[1]}}`, `{"params":{}}`, `{"params":{"arguments":{}}}`,
		`{"params":{"name":"a","x":{"name":"in"},"name":"b","arguments":{"name":1}}}`, `{"params":{"n\u0061me":"e"}}`,
	} {
		lineAgrees(t, []byte(s))
	}
	// The usual messages need no second look, and a call's arguments are at hand.
	var lx Line
	call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","_bir_call_id":"c"}}}`)
	lx.Lex(call)
	if len(lx.Objs) != 1 || lx.Objs[0].Recheck || len(lx.Arguments(&lx.Objs[0])) != 2 {
		t.Fatalf("Lex(%s) = %+v", call, lx.Objs)
	}
}

func TestLineShift(t *testing.T) {
	line := []byte(`[{"id":1,"params":{"arguments":{"k":"x","a":2},"name":"n"},"method":"m"},{"params":{"name":"o","arguments":{"k":1}},"id":2}]`)
	// Cut `"k":"x",` and `"k":1` as the key strip would; and each alone (one cut
	// takes a path of its own).
	for _, cuts := range [][]string{{`"k":"x",`, `"k":1`}, {`"k":"x",`}, {`"k":1`}} {
		var lx Line
		lx.Lex(line)
		var dels []Span
		for _, cut := range cuts {
			i := bytes.Index(line, []byte(cut))
			dels = append(dels, Span{i, i + len(cut)})
		}
		var out []byte
		at := 0
		for _, d := range dels {
			out = append(out, line[at:d.Start]...)
			at = d.End
		}
		out = append(out, line[at:]...)
		lx.Shift(dels)
		var fresh Line
		fresh.Lex(out)
		if fmt.Sprint(spans(&lx)) != fmt.Sprint(spans(&fresh)) {
			t.Fatalf("cuts %q: shifted %v, lexed afresh %v", cuts, spans(&lx), spans(&fresh))
		}
		if lx.Arguments(&lx.Objs[0]) != nil || lx.Arguments(&lx.Objs[1]) != nil {
			t.Fatalf("cuts %q: the arguments' members outlived the edit", cuts)
		}
	}
}

// spans is what Shift keeps of a Line.
func spans(l *Line) [][9]Span {
	var out [][9]Span
	for _, o := range l.Objs {
		out = append(out, [9]Span{o.Span, o.Method, o.ID, o.Params, o.Result, o.Error, o.Name, o.Arguments, {Start: len(l.RPC())}})
	}
	return out
}

// TestLineReuse: a Line reused for the next message allocates nothing, and a huge
// batch's array is not kept.
func TestLineReuse(t *testing.T) {
	var lx Line
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	lx.Lex(msg)
	if n := testing.AllocsPerRun(100, func() { lx.Lex(msg) }); n != 0 {
		t.Fatalf("Lex allocated %v times", n)
	}
	big := append([]byte{'['}, bytes.Repeat([]byte(`{"id":1},`), 2000)...)
	big[len(big)-1] = ']'
	lx.Lex(big)
	if len(lx.Objs) != 2000 {
		t.Fatalf("%d objects, want 2000", len(lx.Objs))
	}
	lx.Lex(msg)
	if cap(lx.Objs) > maxKeptObjs {
		t.Fatalf("kept an array of %d objects", cap(lx.Objs))
	}
}

// FuzzLine: one Lex finds what EachRPC and EachObject find, whatever the input.
func FuzzLine(f *testing.F) {
	// Nesting depth: a peer's message nested 100,000 levels (the lexer must not recurse).
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat(`[{"a":`, 100000) + `1` + strings.Repeat(`}]`, 100000) + `}`))

	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"_bir_call_id":"c"}}}`,
		`[{"id":1,"result":{}},{"id" 2}] {"id":3}`, `{"\u0069d":1,"id":2,"method":"x","method":"y"}`,
		`{"id" 1} {"id":2}`, `[{"id":1} {"id":2}] {"id":3}`, `7 "x" [] {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { lineAgrees(t, b) })
}

// FuzzKeyIs: the length shortcuts of KeyIs and of the lexer's member names agree with
// decoding the literal and comparing.
func FuzzKeyIs(f *testing.F) {
	for _, s := range [][2]string{{`"id"`, "id"}, {`"\u0069d"`, "id"}, {`"i\\"`, `i\`}, {`"a\b"`, `a\b`}, {`"method"`, "method"}, {`"\u006dethod"`, "method"}, {`"x"`, ""}, {`"jsonrpc"`, "id"}, {`"i\u0064"`, "id"}, {`"erro\u0072"`, "error"}, {`"\u0065rror"`, "error"}, {`"par\u0061ms"`, "params"}, {`"r\u0065sult"`, "result"}, {`"n\u0061me"`, "name"}, {`"\u0061rguments"`, "arguments"}} {
		f.Add([]byte(s[0]), s[1])
	}
	f.Fuzz(func(t *testing.T, lit []byte, name string) {
		if len(lit) < 2 || lit[0] != '"' || SkipString(lit, 0) != len(lit) {
			return // not a string literal: never a key the lexer passes on
		}
		s, ok := DecodeString(lit)
		if want := ok && s == name; KeyIs(lit, name) != want {
			t.Fatalf("KeyIs(%q, %q) = %v, want %v", lit, name, !want, want)
		}
		want := memberOther
		if ok {
			want = map[string]member{"id": memberID, "method": memberMethod, "params": memberParams, "result": memberResult, "error": memberError}[s]
		}
		if got := rpcMember(lit); got != want {
			t.Fatalf("rpcMember(%q) = %v, want %v", lit, got, want)
		}
		if isName, isArgs := paramsKey(lit); isName != (ok && s == "name") || isArgs != (ok && s == "arguments") {
			t.Fatalf("paramsKey(%q) = %v, %v; the literal decodes to %q (%v)", lit, isName, isArgs, s, ok)
		}
	})
}

// lineString is all a Line holds, to pin it: each object's spans, Recheck, the
// members of its arguments, and how many objects RPC shows.
func lineString(l *Line) string {
	var b strings.Builder
	for i := range l.Objs {
		o := &l.Objs[i]
		fmt.Fprintf(&b, "%v m%v i%v p%v r%v e%v n%v a%v", o.Span, o.Method, o.ID, o.Params, o.Result, o.Error, o.Name, o.Arguments)
		if o.Recheck {
			b.WriteString(" recheck")
		}
		for _, m := range l.Arguments(o) {
			fmt.Fprintf(&b, " %v:%v", m.Key, m.Value)
		}
		b.WriteString("; ")
	}
	fmt.Fprintf(&b, "rpc %d", len(l.RPC()))
	return b.String()
}

var benchCall = []byte(`{"jsonrpc":"2.0","id":123,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world","_bir_call_id":"c-123"}}}`)

// lineGolden pins the Line and LexValid's verdict of lines that try the lexer's fast
// paths (plainKey, plainParamsKey, the "2.0" value), as the lexer reads them now:
// FuzzLexAgainstDecode holds it to encoding/json on the valid ones, not on the rest.
var lineGolden = []struct {
	in    string
	valid bool
	line  string
}{
	{string(benchCall), true, `{0 132} m{35 47} i{22 25} p{57 131} r{0 0} e{0 0} n{65 71} a{84 130} {85 91}:{92 106} {107 121}:{122 129}; rpc 1`},
	{string(benchAnswer), true, `{0 118} m{0 0} i{22 25} p{0 0} r{35 117} e{0 0} n{0 0} a{0 0}; rpc 1`},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"_bir_call_id":"c"},"arguments":{}}}`, true, `{0 116} m{33 45} i{22 23} p{55 115} r{0 0} e{0 0} n{63 66} a{112 114} recheck; rpc 1`},
	{`{"jsonrpc":"2.0x","id" :1,"i\u0064":2,"result":{},"error":{"code":1}}`, true, `{0 69} m{0 0} i{36 37} p{0 0} r{47 49} e{58 68} n{0 0} a{0 0} recheck; rpc 1`},
	{`{"jsonrpc":"2.0","method":"m","params":{"name":"a","name":"b","arguments":{"a":1,"b":[1,2]}}}`, true, `{0 93} m{26 29} i{0 0} p{39 92} r{0 0} e{0 0} n{58 61} a{74 91} recheck; rpc 1`},
	{`[{"id":1,"result":{}},{"id":2,"error":{}}]`, true, `{1 21} m{0 0} i{7 8} p{0 0} r{18 20} e{0 0} n{0 0} a{0 0}; {22 41} m{0 0} i{28 29} p{0 0} r{0 0} e{38 40} n{0 0} a{0 0}; rpc 2`},
	{`{"params":{"arguments":{"a" 1}}}`, false, `{0 32} m{0 0} i{0 0} p{10 31} r{0 0} e{0 0} n{0 0} a{23 30} recheck; rpc 1`},
	{`{"id`, false, `rpc 0`},
	{`{"jsonrpc"`, false, `rpc 0`},
	{`{"jsonrpc":"2.0","id":1,"params":{"argument":{},"argumentsx":{},"nam":1}}`, true, `{0 73} m{0 0} i{22 23} p{33 72} r{0 0} e{0 0} n{0 0} a{0 0}; rpc 1`},
	{` {"id":1} `, true, `{1 9} m{0 0} i{7 8} p{0 0} r{0 0} e{0 0} n{0 0} a{0 0}; rpc 1`},
	{`{"method":"x\n"}`, true, `{0 16} m{10 15} i{0 0} p{0 0} r{0 0} e{0 0} n{0 0} a{0 0}; rpc 1`},
}

func TestLineGolden(t *testing.T) {
	var reused Line
	for _, g := range lineGolden {
		var l, v Line
		l.Lex([]byte(g.in))
		if got := lineString(&l); got != g.line {
			t.Errorf("Lex(%s):\n got %s\nwant %s", g.in, got, g.line)
		}
		if got := v.LexValid([]byte(g.in)); got != g.valid {
			t.Errorf("LexValid(%s) = %v, want %v", g.in, got, g.valid)
		}
		// And on a Line that lexed the line before.
		if reused.Lex([]byte(g.in)); lineString(&reused) != g.line {
			t.Errorf("Lex(%s) on a reused Line: %s", g.in, lineString(&reused))
		}
	}
}
