package intercept

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// node is a JSON value parsed with encoding/json's tokenizer, keeping what a map would
// lose: member order and duplicate keys. Numbers keep their text.
type node struct {
	kind    byte // '{', '[', or 'v' for a scalar
	keys    []string
	vals    []*node
	scalar  string
	rawText string
}

func parseOrdered(t testing.TB, b []byte) *node {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	n, err := readNode(d)
	if err != nil {
		t.Fatalf("output is not valid JSON (%v): %s", err, b)
	}
	if _, err := d.Token(); err == nil {
		t.Fatalf("trailing data in %s", b)
	}
	return n
}

func readNode(d *json.Decoder) (*node, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		n := &node{kind: byte(tok)}
		for d.More() {
			if tok == '{' {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.(string))
			}
			v, err := readNode(d)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, v)
		}
		if _, err := d.Token(); err != nil {
			return nil, err
		}
		return n, nil
	default:
		return &node{kind: 'v', scalar: fmt.Sprintf("%T:%v", tok, tok)}, nil
	}
}

func (n *node) get(key string) *node {
	var found *node
	for i, k := range n.keys {
		if k == key {
			found = n.vals[i]
		}
	}
	return found
}

func (n *node) String() string {
	switch n.kind {
	case '{':
		var parts []string
		for i, k := range n.keys {
			parts = append(parts, fmt.Sprintf("%q:%s", k, n.vals[i]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case '[':
		var parts []string
		for _, v := range n.vals {
			parts = append(parts, v.String())
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return n.scalar
}

// without returns n's members minus those named key.
func (n *node) without(key string) string {
	m := &node{kind: '{'}
	for i, k := range n.keys {
		if k != key {
			m.keys = append(m.keys, k)
			m.vals = append(m.vals, n.vals[i])
		}
	}
	return m.String()
}

// keySpellings are ways to write the correlation key that all decode to it.
var keySpellings = []string{
	`"_bir_call_id"`, `"\u005fbir_call_id"`, `"_bir\u005fcall\u005fid"`, `"\u005F\u0062ir_call_id"`, `"_bir_call_i\u0064"`,
}

var separators = []string{",", ", ", " ,", ",\n  ", "\t,\t", " , "}

func randomValue(r *rand.Rand, depth int) string {
	switch r.IntN(9) {
	case 0:
		return `"plain"`
	case 1:
		return `"esc \" \\ \u00e9 \ud83d\ude00 é"`
	case 2:
		return []string{"9007199254740993", "-1", "1.0", "1e3", "0", "-0.5e-7"}[r.IntN(6)]
	case 3:
		return []string{"true", "false", "null"}[r.IntN(3)]
	case 4:
		if depth < 3 {
			// A nested correlation key belongs to the tool and must stay.
			return `{"_bir_call_id":"nested-stays","x":` + randomValue(r, depth+1) + `}`
		}
		return `{}`
	case 5:
		if depth < 3 {
			return `[` + randomValue(r, depth+1) + `, ` + randomValue(r, depth+1) + `]`
		}
		return `[]`
	case 6:
		return `"contains _bir_call_id and \"_bir_call_id\":\"x\" as text"`
	default:
		return fmt.Sprintf(`"v%d"`, r.IntN(1000))
	}
}

// randomCall builds a tools/call with the correlation key placed, duplicated and
// spelled at random; it returns the line and the callId the host meant (the last
// occurrence's value).
func randomCall(r *rand.Rand) (string, *string) {
	var members []string
	var callID *string
	n := r.IntN(6)
	for i := 0; i < n || (i < 8 && r.IntN(3) == 0); i++ {
		if r.IntN(3) == 0 {
			v := fmt.Sprintf("c-%d", r.IntN(1e6))
			lit := `"` + v + `"`
			if r.IntN(5) == 0 {
				lit = `42`
				v = "42"
			}
			members = append(members, keySpellings[r.IntN(len(keySpellings))]+[]string{":", " : ", ":\n"}[r.IntN(3)]+lit)
			callID = &v
			continue
		}
		members = append(members, fmt.Sprintf(`"k%d":%s`, r.IntN(5), randomValue(r, 0)))
	}
	var args strings.Builder
	args.WriteString([]string{"{", "{ ", "{\n  "}[r.IntN(3)])
	for i, m := range members {
		if i > 0 {
			args.WriteString(separators[r.IntN(len(separators))])
		}
		args.WriteString(m)
	}
	args.WriteString([]string{"}", " }", "\n}"}[r.IntN(3)])
	id := []string{`1`, `"abc"`, `9007199254740993`, `1.0`, `null`, `"bir:x"`}[r.IntN(6)]
	parts := []string{`"jsonrpc":"2.0"`, `"id":` + id, `"method":"tools/call"`, `"params":{"name":"t","arguments":` + args.String() + `,"_meta":{"progressToken":7}}`}
	r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return "{" + strings.Join(parts, ",") + "}", callID
}

// checkStripped verifies out against in: valid JSON; no top-level correlation key in
// params.arguments; every other member of the arguments kept, in order, with its exact
// bytes; everything outside the arguments object byte-identical.
func checkStripped(t testing.TB, in, out []byte, key string) {
	t.Helper()
	want := parseOrdered(t, in)
	got := parseOrdered(t, out)
	gotArgs := got.get("params").get("arguments")
	for _, k := range gotArgs.keys {
		if k == key {
			t.Fatalf("correlation key survived:\n in: %s\nout: %s", in, out)
		}
	}
	if g, w := gotArgs.String(), want.get("params").get("arguments").without(key); g != w {
		t.Fatalf("arguments changed beyond the key:\n in: %s\nout: %s", in, out)
	}
	// Bytes outside the arguments object are untouched.
	ai := bytes.Index(in, []byte(`"arguments":`))
	ao := bytes.Index(out, []byte(`"arguments":`))
	if ai < 0 || ao != ai || !bytes.Equal(in[:ai], out[:ao]) {
		t.Fatalf("bytes before the arguments changed:\n in: %s\nout: %s", in, out)
	}
	ie := bytes.LastIndex(in, []byte(`,"_meta":{"progressToken":7}}`))
	oe := bytes.LastIndex(out, []byte(`,"_meta":{"progressToken":7}}`))
	if !bytes.Equal(in[ie:], out[oe:]) {
		t.Fatalf("bytes after the arguments changed:\n in: %s\nout: %s", in, out)
	}
}

func TestStripProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		line, wantID := randomCall(r)
		in := []byte(line)
		out, sc := strip(append([]byte(nil), in...), DefaultCorrelationKey)
		checkStripped(t, in, out, DefaultCorrelationKey)
		if sc.want&wantCall == 0 || len(sc.callIDs) != 1 {
			t.Fatalf("not seen as one tools/call: %s", in)
		}
		if (wantID == nil) != (sc.callIDs[0] == nil) || (wantID != nil && *wantID != *sc.callIDs[0]) {
			t.Fatalf("callId = %v, want %v in %s", show(sc.callIDs[0]), show(wantID), in)
		}
	}
}

func show(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestStripCases(t *testing.T) {
	for _, tc := range []struct{ in, out, callID string }{
		{`{"method":"tools/call","params":{"arguments":{"_bir_call_id":"c-1","q":1}}}`, `{"method":"tools/call","params":{"arguments":{"q":1}}}`, "c-1"},
		{`{"method":"tools/call","params":{"arguments":{"q":1,"_bir_call_id":"c-1"}}}`, `{"method":"tools/call","params":{"arguments":{"q":1}}}`, "c-1"},
		{`{"method":"tools/call","params":{"arguments":{ "_bir_call_id" : "only" }}}`, `{"method":"tools/call","params":{"arguments":{  }}}`, "only"},
		{`{"method":"tools/call","params":{"arguments":{"a":1, "_bir_call_id":"x", "b":2}}}`, `{"method":"tools/call","params":{"arguments":{"a":1, "b":2}}}`, "x"},
		{`{"method":"tools/call","params":{"arguments":{"_bir_call_id":"x","\u005fbir_call_id":"y"}}}`, `{"method":"tools/call","params":{"arguments":{}}}`, "y"},
		{`{"method":"tools/call","params":{"arguments":{"_bir_call_id":{"n":1}}}}`, `{"method":"tools/call","params":{"arguments":{}}}`, `{"n":1}`},
		// Not a tools/call: untouched.
		{`{"method":"prompts/get","params":{"arguments":{"_bir_call_id":"x"}}}`, `{"method":"prompts/get","params":{"arguments":{"_bir_call_id":"x"}}}`, ""},
		// A method spelled with escapes is still tools/call.
		{`{"method":"tools\/call","params":{"arguments":{"_bir_call_id":"x"}}}`, `{"method":"tools\/call","params":{"arguments":{}}}`, "x"},
		// Batches.
		{`[{"method":"tools/call","params":{"arguments":{"_bir_call_id":"a","k":1}}},{"method":"ping"},{"method":"tools/call","params":{"arguments":{"k":2,"_bir_call_id":"b"}}}]`,
			`[{"method":"tools/call","params":{"arguments":{"k":1}}},{"method":"ping"},{"method":"tools/call","params":{"arguments":{"k":2}}}]`, "a"},
		// Malformed: forwarded as it came.
		{`{"method":"tools/call","params":{"arguments":{"_bir_call_id":"x",}}}`, `{"method":"tools/call","params":{"arguments":{"_bir_call_id":"x",}}}`, ""},
		{`{"method":"tools/call","params":{"arguments":"_bir_call_id"}}`, `{"method":"tools/call","params":{"arguments":"_bir_call_id"}}`, ""},
		{`not json`, `not json`, ""},
		// Two values on one line: a streaming decoder on the server would run both.
		{`{"method":"ping"} {"method":"tools/call","params":{"arguments":{"_bir_call_id":"x","k":1}}}`, `{"method":"ping"} {"method":"tools/call","params":{"arguments":{"k":1}}}`, "x"},
	} {
		out, sc := strip([]byte(tc.in), DefaultCorrelationKey)
		if string(out) != tc.out {
			t.Errorf("strip(%s)\n = %s\nwant %s", tc.in, out, tc.out)
		}
		got := ""
		if len(sc.callIDs) > 0 && sc.callIDs[0] != nil {
			got = *sc.callIDs[0]
		}
		if got != tc.callID {
			t.Errorf("strip(%s): callId %q, want %q", tc.in, got, tc.callID)
		}
	}
}

func TestStripOtherKey(t *testing.T) {
	out, sc := strip([]byte(`{"method":"tools/call","params":{"arguments":{"_bir_call_id":"stays","corr":"c"}}}`), "corr")
	if string(out) != `{"method":"tools/call","params":{"arguments":{"_bir_call_id":"stays"}}}` || *sc.callIDs[0] != "c" {
		t.Fatalf("got %s %v", out, sc.callIDs)
	}
}

func FuzzStrip(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20; i++ {
		line, _ := randomCall(r)
		f.Add([]byte(line))
	}
	f.Add([]byte(`[{"method":"tools/call","params":{"arguments":{"_bir_call_id":"a"}}}]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, _ := strip(append([]byte(nil), in...), DefaultCorrelationKey)
		if !json.Valid(in) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("valid input became invalid:\n in: %s\nout: %s", in, out)
		}
		// The key never survives at the top of a tools/call's arguments, whatever
		// the duplicates.
		jsonlex.EachMessage(out, func(m []byte) {
			n := parseOrdered(t, m)
			if n.kind != '{' {
				return
			}
			isCall := false
			for i, k := range n.keys {
				if k == "method" && n.vals[i].scalar == "string:tools/call" {
					isCall = true
				}
			}
			if !isCall {
				return
			}
			for i, k := range n.keys {
				if k != "params" || n.vals[i].kind != '{' {
					continue
				}
				p := n.vals[i]
				for j, pk := range p.keys {
					if pk == "arguments" && p.vals[j].kind == '{' {
						for _, ak := range p.vals[j].keys {
							if ak == DefaultCorrelationKey {
								t.Fatalf("key survived:\n in: %s\nout: %s", in, out)
							}
						}
					}
				}
			}
		})
	})
}

func BenchmarkStripSmall(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello","_bir_call_id":"c-1"}}}`)
	buf := make([]byte, len(line))
	for b.Loop() {
		copy(buf, line)
		strip(buf[:len(line)], DefaultCorrelationKey)
	}
}

func BenchmarkStripNotACall(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":42,"method":"resources/read","params":{"uri":"file:///x"}}`)
	for b.Loop() {
		strip(line, DefaultCorrelationKey)
	}
}

func BenchmarkStrip64MB(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"write","arguments":{"content":"` + strings.Repeat("x", 64<<20) + `","_bir_call_id":"c-1"}}}`)
	buf := make([]byte, len(line))
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		copy(buf, line)
		strip(buf[:len(line)], DefaultCorrelationKey)
	}
}

// TestStripDeepArguments: nesting depth must not let a call through unstripped.
func TestStripDeepArguments(t *testing.T) {
	deep := strings.Repeat("[", 200000) + strings.Repeat("]", 200000)
	in := `{"method":"tools/call","params":{"arguments":{"d":` + deep + `,"_bir_call_id":"c"}}}`
	out, sc := strip([]byte(in), DefaultCorrelationKey)
	if string(out) != `{"method":"tools/call","params":{"arguments":{"d":`+deep+`}}}` || sc.callIDs[0] == nil {
		t.Fatalf("deep call not stripped (%d bytes out)", len(out))
	}
}
