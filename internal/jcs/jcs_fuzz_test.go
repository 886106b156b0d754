package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// FuzzFingerprint holds Canonicalize and Fingerprint to checkAgainstDecode on
// any input.
func FuzzFingerprint(f *testing.F) {
	for _, v := range loadFingerprintVectors(f).Vectors {
		f.Add([]byte(v.Arguments))
	}
	for _, c := range esNumbers {
		f.Add([]byte(c[0]))
	}
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"\ud83d\ude00":1,"\ue000":2}`, `"\ud800"`, `{"a":"\ud800","a":0}`, `1e400`,
		"\"\xe2\x82A\"", `[[[[{}]]]]`, `{"a":[1,{"b":null}],"c":"\u0000"}`, `[1,]`, ` null `,
	} {
		f.Add([]byte(s))
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 50 {
		var b bytes.Buffer
		randomJSON(r, &b, 0)
		f.Add(b.Bytes())
	}
	// The flat index's seeds, and documents of the shapes it was tried on.
	for _, g := range flatGolden {
		f.Add([]byte(g.in))
	}
	r = rand.New(rand.NewPCG(9, 10))
	for range 50 {
		var b bytes.Buffer
		randomJSON(r, &b, 0)
		f.Add(b.Bytes())
	}
	f.Fuzz(checkAgainstDecode)
}

// checkAgainstDecode checks, for any input: no panic; success exactly when the
// input is JSON (bar the documented refusals), and otherwise an input error and
// nothing written; canonical output that is JSON, valid UTF-8, a fixed point,
// and the bytes Fingerprint hashes; and, where encoding/json reads the input
// the way JSON.parse does, the same result as referenceCanonical.
func checkAgainstDecode(t *testing.T, data []byte) {
	t.Helper()
	got, err := jcsOutput(data)
	fp, fpErr := Fingerprint(data)
	valid := json.Valid(data)

	if err != nil {
		var ie *jcsError
		if !errors.As(err, &ie) {
			t.Fatalf("Canonicalize(%q): error %v is not an input error", data, err)
		}
		if len(got) != 0 {
			t.Fatalf("Canonicalize(%q) failed (%v) but wrote %q", data, err, got)
		}
		refusal := ie.reason == "lone surrogate" || ie.reason == "number overflows a double"
		if valid != refusal {
			t.Fatalf("Canonicalize(%q): %v, but json.Valid says %v", data, err, valid)
		}
		if fpErr == nil && !argumentsAbsent(data) {
			t.Fatalf("Fingerprint(%q) succeeded where Canonicalize failed", data)
		}
		return
	}
	if !valid && nestingDepth(data) <= 10000 { // encoding/json stops at depth 10000
		t.Fatalf("Canonicalize(%q) = %q, but the input is not JSON", data, got)
	}
	if !json.Valid(got) || !utf8.Valid(got) {
		t.Fatalf("Canonicalize(%q) = %q: not JSON or not UTF-8", data, got)
	}
	again, err := jcsOutput(got)
	if err != nil || !bytes.Equal(again, got) {
		t.Fatalf("canonical form %q is not a fixed point: %q, %v", got, again, err)
	}
	if !argumentsAbsent(data) && (fpErr != nil || fp != sha256Of(got)) {
		t.Fatalf("Fingerprint(%q) = %s, %v; want the hash of %q", data, fp, fpErr, got)
	}
	if want, ok := referenceCanonical(data); ok && !bytes.Equal(got, want) {
		t.Fatalf("Canonicalize(%q)\n      got %q\nreference %q", data, got, want)
	}
}

// referenceCanonical is RFC 8785 on top of encoding/json, written for
// clarity over speed. It answers only where encoding/json and JSON.parse
// agree on the input: valid UTF-8 (encoding/json replaces invalid bytes
// one by one, the WHATWG decoder by maximal subpart) and no lone surrogate
// escapes (encoding/json turns them into U+FFFD). Duplicate keys need no
// exclusion: decoding into a map keeps the last, as JSON.parse does.
func referenceCanonical(data []byte) ([]byte, bool) {
	if !utf8.Valid(data) || !json.Valid(data) || hasLoneSurrogateEscape(data) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	var b bytes.Buffer
	if !referenceValue(&b, v) {
		return nil, false
	}
	return b.Bytes(), true
}

func referenceValue(b *bytes.Buffer, v any) bool {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil && math.IsInf(f, 0) {
			return false
		}
		b.WriteString(referenceNumber(f))
	case string:
		referenceString(b, v)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if !referenceValue(b, e) {
				return false
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		})
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			referenceString(b, k)
			b.WriteByte(':')
			if !referenceValue(b, v[k]) {
				return false
			}
		}
		b.WriteByte('}')
	}
	return true
}

// referenceNumber follows ECMA-262 Number::toString by cases: plain decimal
// notation exactly for 1e-6 <= |f| < 1e21, exponent notation with no
// exponent padding elsewhere.
func referenceNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. 1.5e-07, 1e+21
	mant, exp, _ := strings.Cut(s, "e")
	sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + digits
}

func referenceString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xF])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// hasLoneSurrogateEscape walks the escapes of JSON text (a backslash only
// occurs in strings, and always starts an escape) looking for a \uD800-\uDFFF
// escape that is not half of a well-formed pair.
func hasLoneSurrogateEscape(data []byte) bool {
	unit := func(i int) int {
		if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
			return -1
		}
		v, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
		if err != nil {
			return -1
		}
		return int(v)
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		u := unit(i)
		switch {
		case u >= 0xD800 && u <= 0xDBFF:
			if lo := unit(i + 6); lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		case u >= 0xDC00 && u <= 0xDFFF:
			return true
		default:
			i++ // skip the escaped character, which may be a backslash
		}
	}
	return false
}

// nestingDepth over-approximates nesting depth (brackets inside strings count
// too), which is enough to recognise the deep inputs encoding/json refuses.
func nestingDepth(data []byte) int {
	d, m := 0, 0
	for _, c := range data {
		switch c {
		case '[', '{':
			d++
			m = max(m, d)
		case ']', '}':
			d--
		}
	}
	return m
}

// flatGolden are inputs aimed at the flat index (objects owned by members and
// by arrays, duplicates whose dropped value holds objects, keys that share long
// prefixes or differ only in spelling, invalid input that holds more open
// objects than valid JSON of its length could), with what Canonicalize makes
// of them, errors included.
var flatGolden = []struct{ in, out, err string }{
	{`{"a":{"b":{"c":{}}},"a":{"x":1}}`, `{"a":{"x":1}}`, `<nil>`},
	{`[{"b":1,"a":[{"d":{},"c":{"f":1,"e":2}}]},{}]`, `[{"a":[{"c":{"e":2,"f":1},"d":{}}],"b":1},{}]`, `<nil>`},
	{`{"k":[{"b":0, "a":{"k":[{"b":0,"a":1}]}}]}`, `{"k":[{"a":{"k":[{"a":1,"b":0}]},"b":0}]}`, `<nil>`},
	{`{"a":1,"\u0061":{"z":0},"a":[{"q":{}}]}`, `{"a":[{"q":{}}]}`, `<nil>`},
	{`{"long_common_prefix_a":1,"long_common_prefix_\u00e9":2,"long_common_prefix_":3,"long_common_prefix_é":4}`, `{"long_common_prefix_":3,"long_common_prefix_a":1,"long_common_prefix_é":4}`, `<nil>`},
	{`{"abcdefgh\"":1,"abcdefgh":2,"abcdefgh\\":3,"abcdefg!":4,"abcdefgh ":5}`, `{"abcdefg!":4,"abcdefgh":2,"abcdefgh ":5,"abcdefgh\"":1,"abcdefgh\\":3}`, `<nil>`},
	{`{"":{"":{"":`, ``, `no canonical JSON form: unexpected end of input at byte 12`},
	{`[{"":[{"":[{"":[`, ``, `no canonical JSON form: unexpected end of input at byte 16`},
	{`{"a":{"b":1},`, ``, `no canonical JSON form: expected a string key at byte 13`},
	{`[{"a":1},{"a":2},{"a":3},{"a":4},{"a":5},{"a":6},{"a":7}]`, `[{"a":1},{"a":2},{"a":3},{"a":4},{"a":5},{"a":6},{"a":7}]`, `<nil>`},
	{`{ "b" : { } , "a" : { "y" : [ ] , "x" : { "q" : 1 } } }`, `{"a":{"x":{"q":1},"y":[]},"b":{}}`, `<nil>`},
	{`{"a":"\ud800","a":{"b":"\ud800"},"a":{}}`, `{"a":{}}`, `<nil>`},
	{`[{"x":1e400},{"x":{"y":"\udc00"}}]`, ``, `no canonical JSON form: number overflows a double at byte 6`},
}

// TestCanonicalAgainstDecode: the flat index's inputs give what they gave when
// it replaced the index before it, and random documents, whole and cut short
// anywhere, keyed from a pool that makes duplicates and long shared prefixes
// common, pass checkAgainstDecode.
func TestCanonicalAgainstDecode(t *testing.T) {
	for _, g := range flatGolden {
		var b bytes.Buffer
		err := Canonicalize(&b, []byte(g.in))
		if b.String() != g.out || fmt.Sprint(err) != g.err {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s, %s", g.in, b.Bytes(), err, g.out, g.err)
		}
		checkAgainstDecode(t, []byte(g.in))
	}
	r := rand.New(rand.NewPCG(11, 12))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		doc := sharedPrefixDoc(r)
		checkAgainstDecode(t, doc)
		for range 3 {
			checkAgainstDecode(t, doc[:r.IntN(len(doc)+1)])
		}
	}
	// Past the workspace: the arena and objects are sized from the input,
	// and input cut short may outgrow the bound for valid JSON.
	for _, size := range []int{300, 700, 5000} {
		for _, doc := range memShapes(size) {
			checkAgainstDecode(t, doc)
			for range 20 {
				if cut := doc[:r.IntN(len(doc)+1)]; !bytes.Equal(cut, doc) {
					checkAgainstDecode(t, cut)
				}
			}
		}
	}
	for range n / 10 {
		var b bytes.Buffer
		b.WriteByte('[')
		for i := range 50 {
			if i > 0 {
				b.WriteByte(',')
			}
			randomJSON(r, &b, 0)
		}
		b.WriteByte(']')
		doc := b.Bytes()
		checkAgainstDecode(t, doc)
		checkAgainstDecode(t, doc[:r.IntN(len(doc)+1)])
	}
}

// sharedPrefixDoc is a random document whose keys, half the time, share a prefix
// longer than the eight bytes the key comparison takes at once.
func sharedPrefixDoc(r *rand.Rand) []byte {
	var b bytes.Buffer
	randomJSON(r, &b, 0)
	doc := b.Bytes()
	if r.IntN(2) == 0 {
		doc = bytes.ReplaceAll(doc, []byte(`"a"`), []byte(`"shared_prefix_over_8_bytes_a"`))
		doc = bytes.ReplaceAll(doc, []byte(`"é"`), []byte(`"shared_prefix_over_8_bytes_é"`))
		doc = bytes.ReplaceAll(doc, []byte(`"\u0061"`), []byte(`"shared_prefix_over_8_bytes_\u0061"`))
	}
	return doc
}
