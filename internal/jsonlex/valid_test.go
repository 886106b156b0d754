package jsonlex

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestValid(t *testing.T) {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	deepObj := strings.Repeat(`{"a":`, 700) + "1" + strings.Repeat("}", 700)
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{}`, true}, {`[]`, true}, {` { } `, true}, {"\t[\r\n]\n", true},
		{`{"a":1,"b":[true,false,null,"x",-0.5e+3,{}]}`, true},
		{`"\u00e9\n\"\\\/\b\f\r\t"`, true}, {`0`, true}, {`-1`, true},
		{string(benchAnswer), true}, {deep, true}, {deepObj, true},
		{``, false}, {` `, false}, {`{`, false}, {`}`, false}, {`[1,]`, false}, {`{"a":1,}`, false},
		{`{"a"}`, false}, {`{"a" 1}`, false}, {`{a:1}`, false}, {`{1:1}`, false}, {`[1 2]`, false},
		{`{} {}`, false}, {`{}]`, false}, {`[}`, false}, {`{]`, false}, {`[{]}`, false},
		{`{not json}`, false}, {`Server listening`, false}, {`[INFO] ready]`, false},
		{`01`, false}, {`1.`, false}, {`.5`, false}, {`-`, false}, {`1e`, false}, {`+1`, false},
		{`tru`, false}, {`truex`, false}, {`nul`, false}, {`[nulL]`, false},
		{"\"a\x01\"", false}, {`"\x"`, false}, {`"\u12"`, false}, {`"\u12g4"`, false}, {`"abc`, false}, {`"abc\`, false},
		{"\v{}", false}, {"{}\f", false}, {"\u00a0{}", false},
		{deep[:len(deep)-1], false}, {deep + "]", false},
	} {
		if got := Valid([]byte(tc.in)); got != tc.want {
			t.Errorf("Valid(%.60q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzValid: Valid agrees with encoding/json.Valid (which stops at 10,000 levels of
// nesting, where Valid goes on) and with gjson.ValidBytes, the check it replaced.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{}`, `[1,{"a":"b\u0041"}]`, `{"a":1,}`, `[INFO] x]`, `"\x"`, `-0.1e-5`, `[[[]]]`, `{"a" :[ true ,null]} `, "\"\x7f\xff\"", `{} {}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := Valid(b)
		if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) < 10000 {
			if want := json.Valid(b); got != want {
				t.Fatalf("Valid(%q) = %v, encoding/json.Valid %v", b, got, want)
			}
		}
		// gjson also takes what encoding/json does not: it is the one being replaced,
		// so only where it says no must Valid say no too (no line it refused gets through).
		if got && !gjson.ValidBytes(b) {
			t.Fatalf("Valid(%q) = true, gjson.ValidBytes false", b)
		}
	})
}

func BenchmarkValidAnswer(b *testing.B) {
	for b.Loop() {
		Valid(benchAnswer)
	}
}

func BenchmarkGjsonValidAnswer(b *testing.B) {
	for b.Loop() {
		gjson.ValidBytes(benchAnswer)
	}
}

func TestPlainInString(t *testing.T) {
	if len(plainInString) != 256 {
		t.Fatalf("the table has %d entries", len(plainInString))
	}
	for c := range 256 {
		want := c >= 0x20 && c != '"' && c != '\\'
		if got := plainInString[c] == 1; got != want {
			t.Errorf("plainInString[%#x] = %v, want %v", c, got, want)
		}
	}
}

// isMessageJSON is what LexValid says of a line: Valid, and an object or an array.
func isMessageJSON(b []byte) bool {
	t := bytes.Trim(b, " \t\r\n")
	return Valid(b) && len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

func TestLexValid(t *testing.T) {
	for _, s := range []string{
		string(benchAnswer), `{}`, ` {"a":1} `, `[{"id":1,"result":{}},{"id":2,"error":{}}]`, `[]`,
		`{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"arguments":{"a":[1,2]},"x":"\u0041"}}`,
		`{"id":1,"result":"a\u00e9\n"}`, `{"id":1,"id":2,"result":{}}`,
		`{"id":01,"result":{}}`, `{"id":1,"result":{"a":tru}}`, "{\"id\":1,\"result\":\"a\x01\"}", `{"id":1,"result":{}} {}`,
		`{"id":1,"result":{}}x`, `{"id":1,"result":{},}`, `{"id":1,"method":"m","params":{"a":1,}}`, `[{"id":1},]`,
		`42`, `"x"`, `Server listening`, `[INFO] ready]`, `{not json}`, ``, `  `, `{"a":[1 2]}`, `{"a":{"b":1,}}`,
	} {
		b := []byte(s)
		var got, want Line
		ok := got.LexValid(b)
		if ok != isMessageJSON(b) {
			t.Errorf("LexValid(%q) = %v, want %v", s, ok, !ok)
		}
		if want.Lex(b); ok && !reflect.DeepEqual(got, want) {
			t.Errorf("LexValid(%q) lexed %+v, Lex %+v", s, got, want)
		}
	}
}

// FuzzLexValid: LexValid says what Valid says of a message, and lexes what Lex does.
func FuzzLexValid(f *testing.F) {
	for _, s := range []string{string(benchAnswer), `{"id":1,"method":"m","params":{"arguments":{"k":"v"}}}`, `[{"id":1,"result":{}}]`, `{"a":1,}`, `{"a":"\x"}`, `{} {}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, want Line
		ok := got.LexValid(b)
		if ok != isMessageJSON(b) {
			t.Fatalf("LexValid(%q) = %v, Valid of a message %v", b, ok, !ok)
		}
		if want.Lex(b); ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("LexValid(%q) lexed %+v, Lex %+v", b, got, want)
		}
		// A Line used by LexValid lexes the next line as a fresh one does.
		var fresh Line
		if got.Lex(b); !reflect.DeepEqual(got.RPC(), fresh.lexed(b).RPC()) {
			t.Fatalf("a Line reused after LexValid(%q) lexes differently", b)
		}
	})
}

func (l *Line) lexed(b []byte) *Line { l.Lex(b); return l }

func BenchmarkLexValidAnswer(b *testing.B) {
	var lx Line
	for b.Loop() {
		lx.LexValid(benchAnswer)
	}
}

func BenchmarkLexThenGjsonAnswer(b *testing.B) {
	var lx Line
	for b.Loop() {
		gjson.ValidBytes(benchAnswer)
		lx.Lex(benchAnswer)
	}
}

// FuzzStringScan: the word-at-a-time string scans (skipShort, validString) agree with
// the byte-at-a-time loops they replaced, wherever the string starts and ends in b.
func FuzzStringScan(f *testing.F) {
	for _, s := range []string{`"jsonrpc":"2.0"`, `"0123456789abcdef\"x"`, "\"abcdefg\x01hij\"", `"abc\\"`, `"{\"text\":\"hello, world\"}"`, `"\u00e9\uD83D\uDE00 long enough to need words"`, `"x`} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, at uint8) {
		i := int(at)
		if i >= len(b) {
			return
		}
		b = append(append([]byte(nil), b[:i]...), append([]byte{'"'}, b[i:]...)...)
		if got, want := skipShort(b, i), skipShortRef(b, i); got != want {
			t.Fatalf("skipShort(%q, %d) = %d, want %d", b, i, got, want)
		}
		if got, want := validString(b, i), validStringRef(b, i); got != want {
			t.Fatalf("validString(%q, %d) = %d, want %d", b, i, got, want)
		}
	})
}

func skipShortRef(b []byte, i int) int {
	for j, lim := i+1, min(len(b), i+24); j < lim; j++ {
		switch b[j] {
		case '"':
			return j + 1
		case '\\':
			return -1
		}
	}
	return -1
}

func validStringRef(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return -1
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// BenchmarkLexValidText is a server's answer with 4 KiB of plain text: most of a
// real result's bytes are inside strings.
func BenchmarkLexValidText(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 91) + `"}]}}`)
	var lx Line
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if !lx.LexValid(msg) {
			b.Fatal("not valid")
		}
	}
}
