package jsonlex

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendStringIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune{'a', '"', '\\', '\n', '\r', '\t', '\b', '\f', 0, 0x1f, 0x7f, '<', '&', 'é', '\u2028', '\u2029', 0xFFFD, '😀'}
	cases := []string{"", "plain", "\xff", "a\xc3", "\xed\xa0\x80"}
	for range 5000 {
		var sb []byte
		for range r.IntN(12) {
			if r.IntN(10) == 0 {
				sb = append(sb, byte(0x80+r.IntN(0x80))) // invalid UTF-8
				continue
			}
			sb = utf8.AppendRune(sb, alphabet[r.IntN(len(alphabet))])
		}
		cases = append(cases, string(sb))
	}
	for _, s := range cases {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Fatalf("AppendString(%q) = %s, encoding/json writes %s", s, got, want.Bytes())
		}
	}
}

// The host parses with JSON.parse, where the last of duplicate keys wins; every reader
// in the proxy must agree, or it acts on a member the peer ignores.
func TestDuplicateKeysLastWins(t *testing.T) {
	msg := []byte(`{"id":"bir:p:1","jsonrpc":"2.0","\u0069d":7,"result":{}}`)
	f, ok := TopFields(msg)
	if !ok {
		t.Fatal("TopFields failed on a valid message")
	}
	if string(f.ID) != "7" {
		t.Fatalf("id = %s, want 7 (the last duplicate, as JSON.parse reads it)", f.ID)
	}
	if got := Get(msg, "id"); string(got) != "7" {
		t.Fatalf("Get id = %s, want 7", got)
	}
	if !f.IsResponse() || f.IsRequest() {
		t.Fatal("a message with an id and no method is a response")
	}
}

func TestTopFieldsBroken(t *testing.T) {
	for _, m := range []string{``, `[]`, `{"id":1`, `{"id" 1}`, `{"a":"\"}`, `{"a":1,}`} {
		if _, ok := TopFields([]byte(m)); ok {
			t.Errorf("TopFields(%q) ok, want broken", m)
		}
	}
}

func TestIDKey(t *testing.T) {
	same := [][2]string{{`1`, `1.0`}, {`1000`, `1e3`}, {`"a"`, `"\u0061"`}, {`-5`, `-5.00`}}
	for _, p := range same {
		if IDKey([]byte(p[0])) != IDKey([]byte(p[1])) {
			t.Errorf("%s and %s are the same id", p[0], p[1])
		}
	}
	differ := [][2]string{{`1`, `"1"`}, {`9007199254740993`, `9007199254740992`}, {`null`, `"null"`}, {`0`, `-0.5`}}
	for _, p := range differ {
		if IDKey([]byte(p[0])) == IDKey([]byte(p[1])) {
			t.Errorf("%s and %s are different ids", p[0], p[1])
		}
	}
}

func TestEachMessage(t *testing.T) {
	var got []string
	EachMessage([]byte(` {"a":1} [{"b":2},3,{"c":[]}] "x" {"d":4}`), func(obj []byte) { got = append(got, string(obj)) })
	want := []string{`{"a":1}`, `{"b":2}`, `{"c":[]}`, `{"d":4}`}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

func FuzzTopFields(f *testing.F) {
	// Nesting depth: a peer's message nested 100,000 levels (the lexer must not recurse).
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat(`[{"a":`, 100000) + `1` + strings.Repeat(`}]`, 100000) + `}`))

	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`))
	f.Add([]byte(`{"id":"x","id":2,"result":{"a":[1,"]}"]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, ok := TopFields(b)
		if !ok {
			return
		}
		// Whatever the lexer accepts and json accepts must agree on the id.
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) != nil {
			return
		}
		want, has := m["id"]
		if has != (fl.ID != nil) {
			t.Fatalf("id presence: lexer %v, encoding/json %v", fl.ID != nil, has)
		}
		if has && !bytes.Equal(want, fl.ID) {
			t.Fatalf("id %s is not the JSON value %s", fl.ID, want)
		}
	})
}

func TestEachRPCAgreesWithTopFields(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1}} [{"id":"s","result":{}},{"error":{"code":1},"id":null}] 7 {"\u0069d":9,"id":10}`)
	var got []Fields
	EachRPC(line, func(obj []byte, f Fields) {
		want, ok := TopFields(obj)
		if !ok {
			t.Fatalf("EachRPC passed %s, which TopFields cannot read", obj)
		}
		if string(want.ID) != string(f.ID) || string(want.Method) != string(f.Method) || string(want.Params) != string(f.Params) ||
			string(want.Result) != string(f.Result) || string(want.Error) != string(f.Error) {
			t.Fatalf("EachRPC and TopFields disagree on %s", obj)
		}
		got = append(got, f)
	})
	if len(got) != 4 {
		t.Fatalf("EachRPC saw %d objects, want 4", len(got))
	}
	if string(got[0].Method) != `"a"` || string(got[1].ID) != `"s"` || string(got[2].ID) != `null` || string(got[3].ID) != `10` {
		t.Fatalf("wrong fields: %q", got)
	}
}

// AppendEscaped is AppendString's escaping without the quotes and with the line
// separators left alone, and neither allocates beyond what it appends.
func TestAppendEscapedIsAppendStringWithRawLineSeparators(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c\n\b\f\x01\x7f", "\xff\xfe", "x\u2028y\u2029z", "é😀\xc3"} {
		want := AppendString(nil, s)
		want = bytes.ReplaceAll(bytes.ReplaceAll(want[1:len(want)-1], []byte(`\u2028`), []byte("\u2028")), []byte(`\u2029`), []byte("\u2029"))
		if got := AppendEscaped(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Errorf("AppendEscaped(%q) = %q, want %q", s, got, want)
		}
	}
	buf := make([]byte, 0, 256)
	s := "caf\u00e9 \u2028 \xff \"q\" " + strings.Repeat("é", 20)
	bs := []byte(s)
	if n := testing.AllocsPerRun(100, func() {
		AppendString(buf[:0], s)
		AppendEscaped(buf[:0], bs)
	}); n != 0 {
		t.Errorf("quoting allocated %v times", n)
	}
}

func TestHex4(t *testing.T) {
	for _, c := range []struct {
		in   string
		want rune
		ok   bool
	}{{"00e9", 0xe9, true}, {"D83D", 0xd83d, true}, {"ffFF", 0xffff, true}, {"12g4", 0, false}, {"123", 0, false}, {"-123", 0, false}, {" 123", 0, false}} {
		if r, ok := Hex4([]byte("\\u"+c.in), 2); r != c.want || ok != c.ok {
			t.Errorf("Hex4(%q) = %#x, %v; want %#x, %v", c.in, r, ok, c.want, c.ok)
		}
	}
}

// TestEndsScalar: the table marks exactly the bytes a number or literal ends at.
func TestEndsScalar(t *testing.T) {
	if len(endsScalar) != 256 {
		t.Fatalf("the table has %d entries", len(endsScalar))
	}
	for c := 0; c < 256; c++ {
		want := strings.IndexByte(",}] \t\n\r\"{[:", byte(c)) >= 0
		if got := endsScalar[c] == 1; got != want {
			t.Errorf("endsScalar[%q] = %v, want %v", byte(c), got, want)
		}
	}
}
