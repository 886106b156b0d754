package jsonlex

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeString: the lexer's string decoder agrees with encoding/json wherever the
// two are meant to (valid UTF-8: encoding/json replaces invalid bytes, the lexer keeps
// them), and a capped decode is a prefix of the whole.
func FuzzDecodeString(f *testing.F) {
	for _, s := range []string{`""`, `"a"`, `"\u00e9\n\"\\\/"`, `"\ud83d\ude00"`, `"\ud800x"`, `"\udc00\ud800"`,
		`"\u12"`, `"\x"`, "\"a\x01\"", `"a"b"`, `"abc\`, `"\u0041\u0042"`} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, lit []byte, max uint8) {
		got, ok := DecodeString(lit)
		var want string
		// A literal is its quotes and what is between them: encoding/json also takes
		// the space around a value, DecodeString (given spans of a message) does not.
		jsonOK := json.Unmarshal(lit, &want) == nil && len(lit) > 0 && lit[0] == '"' && lit[len(lit)-1] == '"'
		if utf8.Valid(lit) && bytes.IndexByte(lit, '\\') >= 0 {
			if ok != jsonOK || (ok && got != want) {
				t.Fatalf("DecodeString(%q) = %q, %v; encoding/json: %q, %v", lit, got, ok, want, jsonOK)
			}
		}
		if !ok || len(lit) < 2 {
			return
		}
		body := lit[1 : len(lit)-1]
		part, used, pok := AppendUnescaped(nil, body, int(max))
		if !pok {
			// Only a literal without escapes is taken unchecked; it is not JSON.
			if jsonOK || bytes.IndexByte(lit, '\\') >= 0 {
				t.Fatalf("AppendUnescaped(%q) failed where DecodeString did not", body)
			}
			return
		}
		if !bytes.HasPrefix([]byte(got), part) || used > len(body) {
			t.Fatalf("AppendUnescaped(%q, %d) = %q, %d, %v: not a prefix of %q", body, max, part, used, pok, got)
		}
		if len(part) < int(max) && used != len(body) {
			t.Fatalf("AppendUnescaped(%q, %d) stopped at %d with only %d bytes", body, max, used, len(part))
		}
	})
}

// FuzzNumberEnd: a number NumberEnd accepts whole is a JSON number, and the reverse.
func FuzzNumberEnd(f *testing.F) {
	for _, s := range []string{"0", "-0", "1.5e+10", "01", "1.", ".5", "-", "1e", "1E-0", "123abc"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, ok := NumberEnd(b, 0)
		whole := ok && end == len(b)
		isNum := json.Valid(b) && len(b) > 0 && len(bytes.TrimSpace(b)) == len(b) && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9'))
		if whole != isNum {
			t.Fatalf("NumberEnd(%q) = %d, %v; json.Valid says a number: %v", b, end, ok, isNum)
		}
	})
}

// FuzzMembers: on valid JSON objects the lexer finds the members encoding/json's
// tokenizer finds, in order, with the same decoded keys and the same value text.
func FuzzMembers(f *testing.F) {
	// Nesting depth: a peer's message nested 100,000 levels (the lexer must not recurse).
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat(`[{"a":`, 100000) + `1` + strings.Repeat(`}]`, 100000) + `}`))

	for _, s := range []string{`{}`, `{"a":1,"a":[2,{"b":"}"}]}`, ` { "\u0061" : "x" , "b" : null } `, `{"a":"\\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) || !utf8.Valid(b) {
			return
		}
		i := SkipSpace(b, 0)
		if b[i] != '{' {
			return
		}
		ms, _, ok := Members(b, i)
		if !ok {
			t.Fatalf("Members(%q) failed on valid JSON", b)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.Token() // {
		for n := 0; dec.More(); n++ {
			tok, _ := dec.Token()
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if n >= len(ms) {
				t.Fatalf("Members(%q) found %d members, encoding/json more", b, len(ms))
			}
			k, _ := DecodeString(b[ms[n].Key.Start:ms[n].Key.End])
			val := b[ms[n].Value.Start:ms[n].Value.End]
			if k != tok.(string) || !bytes.Equal(bytes.TrimSpace(v), val) {
				t.Fatalf("member %d of %q: lexer %q=%s, encoding/json %q=%s", n, b, k, val, tok, v)
			}
		}
	})
}
