package jsonlex

import (
	"reflect"
	"strings"
	"testing"
)

// The lexer as it was before its fast paths (refLex*), kept as the reference of
// FuzzLexFast: the fast paths must leave every Line exactly as this one does.

func (l *Line) refLex(line []byte) {
	if cap(l.Objs) > maxKeptObjs {
		l.Objs = nil
	}
	if cap(l.args) > maxKeptArgs {
		l.args = nil
	}
	l.Objs, l.args = l.Objs[:0], l.args[:0]
	l.rpc = -1
	for i := SkipSpace(line, 0); i < len(line); {
		var end int
		switch line[i] {
		case '{':
			var o Obj
			e, ok := l.refLexObj(line, i, &o)
			if ok {
				l.Objs = append(l.Objs, o)
				end = e
			} else {
				l.stopRPC()
				end = SkipValue(line, i)
			}
		case '[':
			e, ok := l.refLexBatch(line, i)
			if ok {
				end = e
			} else {
				l.stopRPC()
				end = SkipValue(line, i)
			}
		default:
			end = SkipValue(line, i)
		}
		if end < 0 {
			break
		}
		i = SkipSpace(line, end)
	}
	if l.rpc < 0 {
		l.rpc = len(l.Objs)
	}
}

func (l *Line) refLexValid(line []byte) bool {
	i := SkipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		// A batch (rare from a server) or no message at all: lexed and checked apart.
		l.refLex(line)
		return i < len(line) && line[i] == '[' && Valid(line)
	}
	l.strict, l.unchecked = true, false
	l.refLex(line)
	unchecked := l.unchecked
	l.strict, l.unchecked = false, false
	if unchecked {
		return Valid(line)
	}
	return len(l.Objs) == 1 && l.Objs[0].Start == i && SkipSpace(line, l.Objs[0].End) == len(line)
}

func (l *Line) refLexBatch(b []byte, i int) (end int, ok bool) {
	n := len(l.Objs)
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var v int
		if i < len(b) && b[i] == '{' {
			var o Obj
			e, ok := l.refLexObj(b, i, &o)
			if ok {
				l.Objs = append(l.Objs, o)
				v = e
			} else {
				v = SkipValue(b, i) // an element EachRPC steps over
			}
		} else {
			v = SkipValue(b, i)
		}
		if v < 0 {
			l.Objs = l.Objs[:n]
			return 0, false
		}
		i = SkipSpace(b, v)
		if i >= len(b) {
			l.Objs = l.Objs[:n]
			return 0, false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case ']':
			return i + 1, true
		default:
			l.Objs = l.Objs[:n]
			return 0, false
		}
	}
}

func (l *Line) refLexObj(b []byte, i int, o *Obj) (end int, ok bool) {
	start, nargs := i, len(l.args)
	defer func() {
		if !ok {
			l.args = l.args[:nargs] // of an object that is not one
		}
	}()
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		o.Span = Span{start, i + 1}
		return i + 1, true
	}
	seen := 0
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		var k int
		if l.strict {
			if k = validString(b, i); k < 0 {
				return 0, false
			}
		} else if k = skipShort(b, i); k < 0 {
			if k = SkipString(b, i); k < 0 {
				return 0, false
			}
		}
		key := b[i:k]
		i = SkipSpace(b, k)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = SkipSpace(b, i+1)
		which := rpcMember(key)
		var v int
		switch {
		case which == memberParams && i < len(b) && b[i] == '{':
			v = l.refLexParams(b, i, o)
			if l.strict {
				l.unchecked = true // lexParams skips: the line is checked whole
			}
		case l.strict:
			v = validEnd(b, i)
		case i < len(b) && b[i] == '"':
			if v = skipShort(b, i); v < 0 {
				v = SkipString(b, i)
			}
		default:
			v = SkipValue(b, i)
		}
		if v < 0 {
			return 0, false
		}
		val := Span{i, v}
		switch which {
		case memberMethod:
			o.Method = val
			o.Recheck = o.Recheck || seen&seenMethod != 0
			seen |= seenMethod
		case memberID:
			o.ID = val
			o.Recheck = o.Recheck || seen&seenID != 0
			seen |= seenID
		case memberParams:
			o.Params = val
			o.Recheck = o.Recheck || seen&seenParams != 0
			seen |= seenParams
		case memberResult:
			o.Result = val
		case memberError:
			o.Error = val
		}
		i = SkipSpace(b, v)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			o.Span = Span{start, i + 1}
			return i + 1, true
		default:
			return 0, false
		}
	}
}

func (l *Line) refLexParams(b []byte, i int, o *Obj) (end int) {
	if o.hasArgs {
		o.Recheck = true // a second params: its reader reads the object itself
		o.hasArgs = false
	}
	start := i
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	found := false
	for {
		if i >= len(b) || b[i] != '"' {
			break
		}
		k := skipShort(b, i)
		if k < 0 {
			if k = SkipString(b, i); k < 0 {
				break
			}
		}
		key := b[i:k]
		i = SkipSpace(b, k)
		if i >= len(b) || b[i] != ':' {
			break
		}
		i = SkipSpace(b, i+1)
		var v int
		isName, isArgs := paramsKey(key)
		if isArgs {
			if found {
				o.Recheck = true
			}
			found = true
			if i < len(b) && b[i] == '{' && !o.Recheck {
				n := len(l.args)
				e, ok := EachMember(b, i, func(m Member) bool {
					l.args = append(l.args, m)
					return true
				})
				if ok {
					o.args, o.hasArgs, v = [2]int32{int32(n), int32(len(l.args))}, true, e
				} else {
					l.args = l.args[:n]
					o.Recheck = true
					v = SkipValue(b, i)
				}
			} else {
				v = SkipValue(b, i)
			}
		} else {
			v = SkipValue(b, i)
		}
		if v < 0 {
			break
		}
		if isName {
			// The last wins; a second one is read by a reader that must see each
			// (the tool policy: a server may act on the first).
			o.Recheck = o.Recheck || o.Name.End != 0
			o.Name = Span{i, v}
		} else if isArgs {
			o.Arguments = Span{i, v}
		}
		i = SkipSpace(b, v)
		if i >= len(b) {
			break
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
			continue
		case '}':
			return i + 1
		}
		break
	}
	// Members this walk cannot follow: the value may still be one SkipValue can
	// (it checks brackets, not separators), and the reader that cares looks itself.
	o.Recheck, o.hasArgs = true, false
	return SkipValue(b, start)
}

var benchCall = []byte(`{"jsonrpc":"2.0","id":123,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world","_bir_call_id":"c-123"}}}`)

// BenchmarkLexFast: the lexer against its reference, in the same run, on the bench's
// call and answer (go test -bench LexFast -count 5: the machine's noise falls on both).
func BenchmarkLexFast(b *testing.B) {
	for _, c := range []struct {
		name string
		f    func(*Line, []byte)
	}{
		{"call/ref", func(l *Line, m []byte) { l.refLex(m) }},
		{"call/new", func(l *Line, m []byte) { l.Lex(m) }},
		{"answer-valid/ref", func(l *Line, m []byte) { l.refLexValid(m) }},
		{"answer-valid/new", func(l *Line, m []byte) { l.LexValid(m) }},
	} {
		msg := benchCall
		if strings.HasPrefix(c.name, "answer") {
			msg = benchAnswer
		}
		b.Run(c.name, func(b *testing.B) {
			var lx Line
			for b.Loop() {
				c.f(&lx, msg)
			}
		})
	}
}

// FuzzLexFast: Lex and LexValid with their fast paths (plainKey, plainParamsKey, the
// "2.0" value) leave a Line exactly as the lexer before them did, and LexValid judges
// every line as it did, on any input and on a Line reused from the last.
func FuzzLexFast(f *testing.F) {
	for _, s := range []string{
		string(benchCall), string(benchAnswer),
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"_bir_call_id":"c"},"arguments":{}}}`,
		`{"jsonrpc":"2.0x","id" :1,"i\u0064":2,"result":{},"error":{"code":1}}`,
		`{"jsonrpc":"2.0","method":"m","params":{"name":"a","name":"b","arguments":{"a":1,"b":[1,2]}}}`,
		`[{"id":1,"result":{}},{"id":2,"error":{}}]`, `{"params":{"arguments":{"a" 1}}}`, `{"id`, `{"jsonrpc"`,
		`{"jsonrpc":"2.0","id":1,"params":{"argument":{},"argumentsx":{},"nam":1}}`, ` {"id":1} `, `{"method":"x\n"}`,
	} {
		f.Add([]byte(s))
	}
	var got, want Line
	f.Fuzz(func(t *testing.T, b []byte) {
		got.Lex(b)
		want.refLex(b)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Lex(%q) = %+v, the reference %+v", b, got, want)
		}
		gv, wv := got.LexValid(b), want.refLexValid(b)
		if gv != wv {
			t.Fatalf("LexValid(%q) = %v, the reference %v", b, gv, wv)
		}
		if gv && !reflect.DeepEqual(got, want) {
			t.Fatalf("LexValid(%q) lexed %+v, the reference %+v", b, got, want)
		}
	})
}
