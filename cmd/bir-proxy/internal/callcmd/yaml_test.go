package callcmd

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestYAMLToJSONValues(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a: 1\nb: [x, 'y', \"z\"]\nc: {d: null, e: ~, f: true, g: False}", `{"a":1,"b":["x","y","z"],"c":{"d":null,"e":null,"f":true,"g":false}}`},
		// Numbers keep their digits: past 2^53, past int64 and uint64.
		{"- 9007199254740993\n- 123456789012345678901234567890\n- -18446744073709551617\n- 1.00000000000000000001", `[9007199254740993,123456789012345678901234567890,-18446744073709551617,1.00000000000000000001]`},
		// YAML's other spellings, in decimal.
		{"[0x1F, 0o17, 0b101, -0x10, 1_000, +5, .5, -.5e3, 1., +1.5E+2, 007.5, 0x_FFFF_FFFF_FFFF_FFFF]", `[31,15,5,-16,1000,5,0.5,-0.5e3,1,1.5E+2,7.5,18446744073709551615]`},
		{"!!int 0xFFFFFFFFFFFFFFFFFFFF", `1208925819614629174706175`},
		{"[!!str 12, '12', \"true\", !!float 3, 2026-01-02, 2026-01-02T03:04:05Z, <<]", `["12","12","true",3,"2026-01-02","2026-01-02T03:04:05Z","\u003c\u003c"]`},
		{"2026-01-02: date key\n'1': quoted", `{"2026-01-02":"date key","1":"quoted"}`},
		{"a: &x {k: [1, 2]}\nb: *x", `{"a":{"k":[1,2]},"b":{"k":[1,2]}}`},
		{"t: \"tab\\there \\u202e \\x01\"", `{"t":"tab\there \u202e \u0001"}`},
		{"- |\n  line\n  two\n", `["line\ntwo\n"]`},
		{"[]", `[]`},
		{"{}", `{}`},
	} {
		got, err := YAMLToJSON([]byte(c.in), 1<<20)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		// jsonlex.AppendString escapes < and >? Compare as JSON values then, digits kept.
		if string(got) != c.want && !sameJSON(got, []byte(c.want)) {
			t.Errorf("%q:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

// sameJSON compares two JSON texts as values, numbers by their text.
func sameJSON(a, b []byte) bool {
	var x, y any
	da := json.NewDecoder(strings.NewReader(string(a)))
	da.UseNumber()
	db := json.NewDecoder(strings.NewReader(string(b)))
	db.UseNumber()
	return da.Decode(&x) == nil && db.Decode(&y) == nil && reflect.DeepEqual(x, y)
}

func TestYAMLToJSONRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"- tool: a\n- tool: b\n  arguments:\n    1: x\n", "step 2 (line 4): the key \"1\" is not a string"},
		{"- tool: a\n  arguments: {true: x}\n", "step 1 (line 2): the key \"true\" is not a string"},
		{"- tool: a\n  arguments: {[1]: x}\n", "step 1 (line 2): a key that is a list"},
		{"- tool: a\n  arguments: {a: 1, a: 2}\n", "step 1 (line 2): the key \"a\" is given twice"},
		{"- tool: a\n  arguments: {<<: {a: 1}}\n", "merge keys"},
		{"- tool: a\n  arguments: {b: !!binary aGk=}\n", "step 1 (line 2): !!binary is not read"},
		{"- tool: a\n  arguments: {b: .inf}\n", "JSON has no such number"},
		{"- tool: a\n  arguments: {b: -.Inf}\n", "JSON has no such number"},
		{"- tool: a\n  arguments: {b: .NaN}\n", "JSON has no such number"},
		{"- tool: a\n  arguments: {b: 0777}\n", "leading zero"},
		{"- tool: a\n  arguments: {b: !foo x}\n", "the tag \"!foo\" is not read"},
		{"- tool: a\n  arguments: !!set {b}\n", "the tag \"!!set\" is not read"},
		{"- tool: a\n  arguments: {b: !!int x}\n", "is not an integer"},
		{"- tool: a\n  arguments: {b: !!bool yes}\n", "neither true nor false"},
		{"- &a [*a]\n", "step 1 (line 1): an alias inside its own anchor"},
		{"a: &a\n  b: *a\n", "an alias inside its own anchor"},
		{"a: 1\n---\nb: 2\n", "more than one YAML document"},
		{"", "empty"},
		{"- [", "yaml:"},
		{"\xff", "yaml:"},
	} {
		got, err := YAMLToJSON([]byte(c.in), 1<<20)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %s, %v; want an error with %q", c.in, got, err, c.want)
		}
	}
}

// billionLaughs is a list of one step whose arguments are ten aliases of ten of …
// of "lol": 10^levels strings when expanded.
func billionLaughs(levels int) string {
	var b strings.Builder
	b.WriteString("- tool: echo\n  arguments:\n    l0: &l0 lol\n")
	for i := 1; i <= levels; i++ {
		b.WriteString("    l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*l" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// Aliases expand into the JSON up to its bound, no further: a billion laughs is an
// error, and the JSON written before it stays within the bound.
func TestYAMLToJSONAliasesBounded(t *testing.T) {
	out, err := YAMLToJSON([]byte(billionLaughs(9)), 1<<20)
	if err == nil || !strings.Contains(err.Error(), "larger than 1 MiB as JSON") {
		t.Fatalf("%d bytes, %v", len(out), err)
	}
	// Three levels: 1000 "lol", well within.
	out, err = YAMLToJSON([]byte(billionLaughs(3)), 1<<20)
	if err != nil || strings.Count(string(out), `"lol"`) != 1+10+100+1000 {
		t.Fatalf("%v: %d lol", err, strings.Count(string(out), `"lol"`))
	}
	// Nesting made by aliases is bounded too: 110 anchors of 100 levels each, each
	// inside the one before (the file nests 101 deep; its JSON would 11000).
	var b strings.Builder
	b.WriteString("a0: &a0 x\n")
	for i := 1; i <= 110; i++ {
		b.WriteString("a" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " " + strings.Repeat("[", 100) + "*a" + strconv.Itoa(i-1) + strings.Repeat("]", 100) + "\n")
	}
	if _, err := YAMLToJSON([]byte(b.String()), 64<<20); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("deep aliases: %v", err)
	}
}

// The JSON of a YAML document is the value go.yaml.in/yaml/v3 decodes it to, but
// where this conversion decides otherwise (digits kept, dates as text, refusals).
func FuzzYAMLToJSON(f *testing.F) {
	f.Add(billionLaughs(2))
	f.Add("- tool: echo\n  arguments: {a: 1, b: [x, {c: 0x1f}], d: 1.5e3}\n- list_tools: true\n")
	f.Add("a: &a [1, 2]\nb: *a\nc: 2026-01-02\nd: !!binary aGk=\ne: 123456789012345678901234567890\n")
	f.Add("{1: a, true: b, ~: c, <<: {x: 1}}")
	f.Add("[+.5, 1., 007, 0o17, -0b1, 1_0, .inf, !!int '12', !!float 3]")
	f.Fuzz(func(t *testing.T, in string) {
		out, err := YAMLToJSON([]byte(in), 1<<20)
		if err != nil {
			return
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: not JSON %q: %v", in, out, err)
		}
		var want any
		if err := yaml.Unmarshal([]byte(in), &want); err != nil {
			return // (the library's alias ratio, and its checks of explicit tags)
		}
		w, ok := plain(want)
		if ok && !reflect.DeepEqual(got, w) {
			t.Fatalf("%q:\n got %s\nwant %#v", in, out, w)
		}
	})
}

// plain is a value yaml.v3 decoded as json.Unmarshal decodes its JSON: numbers as
// float64; ok is false when it holds what the conversion means otherwise (a date).
func plain(v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			p, ok := plain(e)
			if !ok {
				return nil, false
			}
			m[k] = p
		}
		return m, true
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			p, ok := plain(e)
			if !ok {
				return nil, false
			}
			s[i] = p
		}
		return s, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, !math.IsInf(x, 0) && !math.IsNaN(x)
	case time.Time:
		return nil, false
	case nil, bool, string:
		return x, true
	}
	return nil, false
}
