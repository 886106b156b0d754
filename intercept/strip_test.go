package intercept

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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

// The strip checked against encoding/json: decodeLine reads a line with
// encoding/json's tokenizer alone and says where each message's members lie;
// expectedStrip makes of that what the host path must learn of the line (hostScan)
// and which bytes the strip removes; stripAgainstDecode holds strip to both.

// decodedMember is one member of an object: from its key's opening quote to the end
// of its value, the value's own start, and the value decoded when it is a string.
type decodedMember struct {
	key                  string
	start, valStart, end int
	str                  *string
}

// decodedObject is an object: just past its '{', at its '}', and its members.
type decodedObject struct {
	open, close int
	members     []decodedMember
}

// decodedMessage is an object a peer acts on: a value on the line, or an object
// element of a batch.
type decodedMessage struct {
	method    *decodedMember // the last "method" member
	anyCall   bool           // some "method" member is the string tools/call
	hasID     bool
	arguments []*decodedObject // the object-valued params.arguments, in order
}

// Roles of a container on a line, for what the strip reads of it.
const (
	roleOther = iota
	roleMessage
	roleBatch
	roleParams
	roleArguments
)

type decodeFrame struct {
	obj       bool
	role      int
	msg       *decodedMessage
	o         *decodedObject
	expectKey bool
	key       string
	keyStart  int
	valStart  int
}

// skipSeparators returns the index of the first byte at or after i that is not
// whitespace, ',' or ':': where the token encoding/json returns next begins.
func skipSeparators(b []byte, i int) int {
	for i < len(b) && strings.IndexByte(" \t\r\n,:", b[i]) >= 0 {
		i++
	}
	return i
}

// decodeLine reads the values on line with encoding/json (a stream, as a server's
// streaming decoder reads it); ok is false when encoding/json rejects any of them.
func decodeLine(line []byte) (msgs []*decodedMessage, ok bool) {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var stack []*decodeFrame
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
		var top *decodeFrame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expectKey {
			if tok == json.Delim('}') {
				top.o.close = end - 1
				stack = stack[:len(stack)-1]
				memberDone(stack, top.valStart, end, nil, top)
				continue
			}
			top.key, top.keyStart, top.expectKey = tok.(string), skipSeparators(line, before), false
			continue
		}
		start := skipSeparators(line, before)
		switch tok {
		case json.Delim('{'), json.Delim('['):
			f := &decodeFrame{obj: tok == json.Delim('{'), valStart: start}
			switch {
			case f.obj && (top == nil || top.role == roleBatch):
				f.role, f.msg = roleMessage, &decodedMessage{}
				msgs = append(msgs, f.msg)
			case top == nil:
				f.role = roleBatch
			case f.obj && top.role == roleMessage && top.key == "params":
				f.role, f.msg = roleParams, top.msg
			case f.obj && top.role == roleParams && top.key == "arguments":
				f.role, f.msg = roleArguments, top.msg
			}
			if f.obj {
				f.o, f.expectKey = &decodedObject{open: end}, true
			}
			stack = append(stack, f)
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			memberDone(stack, top.valStart, end, nil, top)
		default:
			var str *string
			if s, isStr := tok.(string); isStr {
				str = &s
			}
			memberDone(stack, start, end, str, nil)
		}
	}
}

// memberDone notes a value [start, end) that ended in the container on top of stack
// (nothing at the top of the line); child is the value's own frame, for a container.
func memberDone(stack []*decodeFrame, start, end int, str *string, child *decodeFrame) {
	if len(stack) == 0 || !stack[len(stack)-1].obj {
		return
	}
	p := stack[len(stack)-1]
	m := decodedMember{key: p.key, start: p.keyStart, valStart: start, end: end, str: str}
	p.o.members = append(p.o.members, m)
	p.expectKey = true
	switch {
	case p.role == roleMessage && m.key == "method":
		p.msg.method = &m
		p.msg.anyCall = p.msg.anyCall || (str != nil && *str == "tools/call")
	case p.role == roleMessage && m.key == "id":
		p.msg.hasID = true
	case child != nil && child.role == roleArguments:
		p.msg.arguments = append(p.msg.arguments, child.o)
	}
}

// What may become of each byte of a line under the strip.
const (
	byteKept    = iota // stays, in place
	byteRemoved        // a removed member's
	byteGap            // whitespace or a comma next to a removed member: may go
)

// expectedStrip is, from the decoded line alone, the scan the strip must return and
// what it may do to each byte of line: every top-level member named key of an
// object-valued params.arguments of a message whose "method" members include
// tools/call goes, with such separators as keep the JSON valid, and nothing else.
func expectedStrip(line []byte, msgs []*decodedMessage, key string) (hostScan, []byte) {
	var sc hostScan
	class := make([]byte, len(line))
	for _, m := range msgs {
		call := false
		if m.method != nil && m.method.str != nil {
			switch *m.method.str {
			case "tools/call":
				call = true
				sc.want |= wantCall
				sc.awaiting++
				sc.ends = sc.ends || !m.hasID
			case "notifications/cancelled":
				sc.want |= wantCancel
				sc.ends = true
			case "initialize", "tools/list", "server/discover":
				sc.want |= wantHandshake
				if m.hasID {
					sc.awaiting++
				}
			case "tasks/get", "tasks/result", "tasks/cancel":
				if m.hasID {
					sc.want |= wantTask
					sc.awaiting++
				}
			}
		}
		if !m.anyCall {
			continue
		}
		var callID *string
		for _, o := range m.arguments {
			for i, a := range o.members {
				if a.key != key {
					continue
				}
				v := string(line[a.valStart:a.end])
				if a.str != nil {
					v = *a.str
				}
				callID = &v
				for j := a.start; j < a.end; j++ {
					class[j] = byteRemoved
				}
				gapStart, gapEnd := o.open, o.close
				if i > 0 {
					gapStart = o.members[i-1].end
				}
				if i+1 < len(o.members) {
					gapEnd = o.members[i+1].start
				}
				for j := gapStart; j < gapEnd; j++ {
					if class[j] == byteKept {
						class[j] = byteGap
					}
				}
			}
		}
		if call {
			sc.callIDs = append(sc.callIDs, callID)
		}
	}
	return sc, class
}

// matchStrip says where out is not line with the bytes class removes removed, and of
// the gap bytes at most some (out's whitespace and commas there are a subsequence of
// the gap's).
func matchStrip(line, out, class []byte) error {
	j := 0
	for i := 0; i < len(line); {
		switch class[i] {
		case byteKept:
			if j >= len(out) || out[j] != line[i] {
				return fmt.Errorf("byte %d (%q) of the input is not at %d of the output", i, line[i], j)
			}
			i++
			j++
		case byteRemoved:
			i++
		case byteGap:
			k := i
			for k < len(line) && class[k] == byteGap {
				k++
			}
			// A gap is followed by a key, a '}' or a removed member: never by
			// whitespace or a comma kept, so out's run of those here is the gap's.
			for j < len(out) && strings.IndexByte(" \t\r\n,", out[j]) >= 0 {
				for i < k && line[i] != out[j] {
					i++
				}
				if i == k {
					break
				}
				i++
				j++
			}
			i = k
		}
	}
	if j != len(out) {
		return fmt.Errorf("the output has %d bytes more", len(out)-j)
	}
	return nil
}

// stripAgainstDecode checks strip (the host's, on a Line lexed once) on in: a Line
// that, shifted by the strip, is the Line of the output; the same bytes out when the
// ids are not wanted; and, when encoding/json reads in, the scan and the bytes
// expectedStrip says, and an output encoding/json reads too.
func stripAgainstDecode(t *testing.T, in []byte) {
	t.Helper()
	var lx jsonlex.Line
	lx.Lex(in)
	out, sc := stripLexed(append([]byte(nil), in...), DefaultCorrelationKey, &lx, true)
	var fresh jsonlex.Line
	fresh.Lex(out)
	if fmt.Sprint(lineSpans(&lx)) != fmt.Sprint(lineSpans(&fresh)) {
		t.Fatalf("strip(%q): shifted lex %v, the output's %v", in, lineSpans(&lx), lineSpans(&fresh))
	}
	// A pure pipe (no ids wanted) edits the same bytes.
	lx.Lex(in)
	if out2, _ := stripLexed(append([]byte(nil), in...), DefaultCorrelationKey, &lx, false); string(out2) != string(out) {
		t.Fatalf("strip(%q) without ids: %q, with them %q", in, out2, out)
	}
	msgs, ok := decodeLine(in)
	if !ok {
		return
	}
	wantSc, class := expectedStrip(in, msgs, DefaultCorrelationKey)
	if scanString(sc) != scanString(wantSc) {
		t.Fatalf("strip(%q): scan %s, encoding/json reads %s", in, scanString(sc), scanString(wantSc))
	}
	if err := matchStrip(in, out, class); err != nil {
		t.Fatalf("strip(%q) = %q: %v", in, out, err)
	}
	if _, ok := decodeLine(out); !ok {
		t.Fatalf("strip(%q) = %q, which encoding/json rejects", in, out)
	}
}

// lineSpans is what Shift keeps of a Line: every span, and which objects EachRPC shows.
func lineSpans(l *jsonlex.Line) [][6]jsonlex.Span {
	var out [][6]jsonlex.Span
	for _, o := range l.Objs {
		out = append(out, [6]jsonlex.Span{o.Span, o.Method, o.ID, o.Params, o.Result, o.Error})
	}
	return append(out, [6]jsonlex.Span{{Start: len(l.RPC())}})
}

func scanString(sc hostScan) string {
	s := fmt.Sprintf("want=%d awaiting=%d ends=%v ids=[", sc.want, sc.awaiting, sc.ends)
	for _, id := range sc.callIDs {
		if id == nil {
			s += "nil "
		} else {
			s += fmt.Sprintf("%q ", *id)
		}
	}
	return s + "]"
}

// stripGolden pins what strip made of lines that duplicate the members it reads, or
// that encoding/json does not read (so stripAgainstDecode cannot say).
var stripGolden = []struct{ in, out, scan string }{
	{`{"method":"tools/call","method":"x","params":{"arguments":{"_bir_call_id":"a"}}}`, `{"method":"tools/call","method":"x","params":{"arguments":{}}}`, `want=0 awaiting=0 ends=false ids=[]`},
	{`{"method":"x","method":"tools/call","params":{"arguments":{"_bir_call_id":"a"}},"params":{"arguments":{"_bir_call_id":"b","k":1}}}`, `{"method":"x","method":"tools/call","params":{"arguments":{}},"params":{"arguments":{"k":1}}}`, `want=1 awaiting=1 ends=true ids=["b" ]`},
	{`{"method":"tools/call","params":{"arguments":{"_bir_call_id":"a"},"arguments":{"_bir_call_id":"b"}}}`, `{"method":"tools/call","params":{"arguments":{},"arguments":{}}}`, `want=1 awaiting=1 ends=true ids=["b" ]`},
	{`{"method":"tools/call","params":[1]}`, `{"method":"tools/call","params":[1]}`, `want=1 awaiting=1 ends=true ids=[nil ]`},
	{`{"method":"tools/call"}`, `{"method":"tools/call"}`, `want=1 awaiting=1 ends=true ids=[nil ]`},
	{`{"method":"initialize","id":1}`, `{"method":"initialize","id":1}`, `want=4 awaiting=1 ends=false ids=[]`},
	// A broken object does not hide the call after it; a broken batch is left whole.
	{`{"id" 1} {"method":"tools/call","params":{"arguments":{"_bir_call_id":"a"}}}`, `{"id" 1} {"method":"tools/call","params":{"arguments":{}}}`, `want=1 awaiting=1 ends=true ids=["a" ]`},
	{`[{"method":"tools/call","params":{"arguments":{"_bir_call_id":"a"}}} {"id":2}]`, `[{"method":"tools/call","params":{"arguments":{"_bir_call_id":"a"}}} {"id":2}]`, `want=0 awaiting=0 ends=false ids=[]`},
	{`[{"method":"tools/call","params":{"arguments":{"_bir_call_id":"a"}}},{"method":"tools/call","method":"x"}]`, `[{"method":"tools/call","params":{"arguments":{}}},{"method":"tools/call","method":"x"}]`, `want=1 awaiting=1 ends=true ids=["a" ]`},
}

func TestStripAgainstDecode(t *testing.T) {
	for _, g := range stripGolden {
		var lx jsonlex.Line
		lx.Lex([]byte(g.in))
		out, sc := stripLexed([]byte(g.in), DefaultCorrelationKey, &lx, true)
		if string(out) != g.out || scanString(sc) != g.scan {
			t.Errorf("strip(%s)\n = %s %s\nwant %s %s", g.in, out, scanString(sc), g.out, g.scan)
		}
		stripAgainstDecode(t, []byte(g.in))
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		line, _ := randomCall(r)
		stripAgainstDecode(t, []byte(line))
		// As a batch, beside other messages, and twice on a line.
		stripAgainstDecode(t, []byte(`[`+line+`,{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}},`+line+`]`))
		stripAgainstDecode(t, []byte(line+` `+line))
	}
}

// TestStripAgainstDecodeCatches: the oracle sees a strip that took a byte too many,
// left the key, or kept a dangling comma.
func TestStripAgainstDecodeCatches(t *testing.T) {
	in := []byte(`{"method":"tools/call","id":1,"params":{"arguments":{ "a":1 , "_bir_call_id":"c" , "b":2 }}}`)
	msgs, ok := decodeLine(in)
	if !ok {
		t.Fatal("not decoded")
	}
	sc, class := expectedStrip(in, msgs, DefaultCorrelationKey)
	if got := scanString(sc); got != `want=1 awaiting=1 ends=false ids=["c" ]` {
		t.Fatalf("scan %s", got)
	}
	for _, out := range []string{
		`{"method":"tools/call","id":1,"params":{"arguments":{ "a":1 , "b":2 }}}`,
		`{"method":"tools/call","id":1,"params":{"arguments":{ "a":1 ,  "b":2 }}}`,
	} {
		if err := matchStrip(in, []byte(out), class); err != nil {
			t.Errorf("%s: %v", out, err)
		}
	}
	for _, out := range []string{
		`{"method":"tools/call","id":1,"params":{"arguments":{ "a":1 , "_bir_call_id":"c" , "b":2 }}}`,
		`{"method":"tools/call","id":1,"params":{"arguments":{"a":1 , "b":2 }}}`,
		`{"method":"tools/call","id":1,"params":{"arguments":{ "a":1 , "b":2}}}`,
		`{"method":"tools/call","id":1,"params":{"arguments":{ "a":1 , "b":2 }}} `,
		`{"method":"tools/call","id":1,"params":{"arguments":{ "a":1 ,, "b":2 }}}`,
	} {
		if err := matchStrip(in, []byte(out), class); err == nil {
			if _, ok := decodeLine([]byte(out)); ok {
				t.Errorf("%s: passed the oracle", out)
			}
		}
	}
}

func FuzzStripAgainstDecode(f *testing.F) {
	// Nesting depth: arguments nested 100,000 levels (the strip must not recurse).
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"_bir_call_id":"a","x":` + strings.Repeat(`[`, 100000) + strings.Repeat(`]`, 100000) + `}}}`))
	r := rand.New(rand.NewPCG(7, 8))
	for range 20 {
		line, _ := randomCall(r)
		f.Add([]byte(line))
	}
	for _, g := range stripGolden {
		f.Add([]byte(g.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) { stripAgainstDecode(t, in) })
}
