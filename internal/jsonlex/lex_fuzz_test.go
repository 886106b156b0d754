package jsonlex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
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

// dobj is an object as encoding/json reads it: where it lies and its members, each
// with its key decoded, where the key's literal (quotes included) and the value lie,
// and the value's own members when it is an object.
type dobj struct {
	span    Span
	members []dmember
}

type dmember struct {
	name       string
	key, value Span
	obj        *dobj
}

// last is the last member named name (the duplicate-key rule), and how many there are.
func (o *dobj) last(name string) (m *dmember, n int) {
	for i := range o.members {
		if o.members[i].name == name {
			m, n = &o.members[i], n+1
		}
	}
	return m, n
}

// decodeObjs reads line with encoding/json's tokenizer, as a server's streaming
// decoder reads it, and returns the objects a peer acts on: each object on the line
// and each object element of a batch. ok is false when encoding/json rejects any of
// the values.
func decodeObjs(line []byte) (msgs []*dobj, ok bool) {
	type frame struct {
		o         *dobj // nil for an array
		batch     bool
		expectKey bool
		name      string
		key       Span
		start     int
	}
	skipSep := func(i int) int {
		for i < len(line) && strings.IndexByte(" \t\r\n,:", line[i]) >= 0 {
			i++
		}
		return i
	}
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var stack []*frame
	// done records the value [start, end) that ended in the container atop stack.
	done := func(start, end int, child *dobj) {
		if len(stack) == 0 || stack[len(stack)-1].o == nil {
			return
		}
		p := stack[len(stack)-1]
		p.o.members = append(p.o.members, dmember{p.name, p.key, Span{start, end}, child})
		p.expectKey = true
	}
	for {
		before := int(d.InputOffset())
		tok, err := d.Token()
		if err == io.EOF && len(stack) == 0 {
			return msgs, true
		}
		if err != nil {
			return nil, false
		}
		end := int(d.InputOffset())
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.o != nil && top.expectKey {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				top.o.span = Span{top.start, end}
				done(top.start, end, top.o)
				continue
			}
			top.name, top.key, top.expectKey = tok.(string), Span{skipSep(before), end}, false
			continue
		}
		start := skipSep(before)
		switch tok {
		case json.Delim('{'):
			f := &frame{o: &dobj{}, expectKey: true, start: start}
			if top == nil || top.batch {
				msgs = append(msgs, f.o)
			}
			stack = append(stack, f)
		case json.Delim('['):
			stack = append(stack, &frame{batch: top == nil, start: start})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			done(top.start, end, nil)
		default:
			done(start, end, nil)
		}
	}
}

// lineAgainstDecode holds the Line of in to encoding/json's reading of it, when it
// reads in: the same objects; in each, the last value of each JSON-RPC member (what
// a host's JSON.parse keeps); Recheck exactly when "method", "id" or "params" is
// repeated, or params has several "name" or "arguments"; and otherwise params'
// "name" and "arguments" and the members of the arguments.
func lineAgainstDecode(t *testing.T, in []byte, l *Line) {
	t.Helper()
	msgs, ok := decodeObjs(in)
	if !ok {
		return
	}
	if len(l.Objs) != len(msgs) || len(l.RPC()) != len(msgs) {
		t.Fatalf("%q: %d objects (RPC %d), encoding/json reads %d", in, len(l.Objs), len(l.RPC()), len(msgs))
	}
	for i, m := range msgs {
		o := &l.Objs[i]
		if o.Span != m.span {
			t.Fatalf("%q: object %d at %v, encoding/json reads %v", in, i, o.Span, m.span)
		}
		check := func(where string, d *dobj, name string, got Span) {
			want := Span{}
			if dm, _ := d.last(name); dm != nil {
				want = dm.value
			}
			if got != want {
				t.Fatalf("%q: object %d: %s%s at %v (%q), encoding/json reads %v (%q)", in, i, where, name, got, spanOf(in, got), want, spanOf(in, want))
			}
		}
		check("", m, "result", o.Result)
		check("", m, "error", o.Error)
		params, np := m.last("params")
		_, nm := m.last("method")
		_, ni := m.last("id")
		recheck := nm > 1 || ni > 1 || np > 1
		if np == 1 && params.obj != nil {
			_, nn := params.obj.last("name")
			_, na := params.obj.last("arguments")
			recheck = recheck || nn > 1 || na > 1
		}
		if o.Recheck != recheck {
			t.Fatalf("%q: object %d: Recheck %v, encoding/json reads method×%d id×%d params×%d (and in params)", in, i, o.Recheck, nm, ni, np)
		}
		if o.Recheck {
			if l.Arguments(o) != nil {
				t.Fatalf("%q: object %d: arguments kept for a Recheck", in, i)
			}
			continue
		}
		check("", m, "method", o.Method)
		check("", m, "id", o.ID)
		check("", m, "params", o.Params)
		var want []Member
		if params != nil && params.obj != nil {
			check("params.", params.obj, "name", o.Name)
			check("params.", params.obj, "arguments", o.Arguments)
			if a, _ := params.obj.last("arguments"); a != nil && a.obj != nil {
				for _, am := range a.obj.members {
					want = append(want, Member{Key: am.key, Value: am.value})
				}
			}
		} else if o.Name != (Span{}) || o.Arguments != (Span{}) {
			t.Fatalf("%q: object %d: params.name %v, arguments %v, of no params object", in, i, o.Name, o.Arguments)
		}
		if got := l.Arguments(o); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q: object %d: arguments %v, encoding/json reads %v", in, i, got, want)
		}
	}
}

// FuzzLexAgainstDecode holds Lex to encoding/json's reading of a line (each object,
// each member's last value, keys decoded: what a host's JSON.parse sees), on a fresh
// Line and on one reused from the last input; and LexValid lexes what Lex does.
func FuzzLexAgainstDecode(f *testing.F) {
	for _, s := range lexAttackSeeds {
		f.Add([]byte(s))
	}
	for _, g := range lineGolden {
		f.Add([]byte(g.in))
	}
	var reused Line
	f.Fuzz(func(t *testing.T, in []byte) {
		var l Line
		l.Lex(in)
		lineAgainstDecode(t, in, &l)
		if reused.Lex(in); lineString(&reused) != lineString(&l) {
			t.Fatalf("%q: a reused Line lexes %s, a fresh one %s", in, lineString(&reused), lineString(&l))
		}
		if reused.LexValid(in) && lineString(&reused) != lineString(&l) {
			t.Fatalf("%q: LexValid lexes %s, Lex %s", in, lineString(&reused), lineString(&l))
		}
	})
}
