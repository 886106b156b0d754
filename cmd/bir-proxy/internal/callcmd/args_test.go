package callcmd

import (
	"encoding/json"
	"testing"
)

func TestArguments(t *testing.T) {
	cases := []struct {
		base  string
		pairs []string
		want  string
	}{
		{"", []string{"text=hello"}, `{"text":"hello"}`},
		{"", []string{"n=5", "f=-1.5e3", "b=false", "o={\"k\":1}"}, `{"n":5,"f":-1.5e3,"b":false,"o":{"k":1}}`},
		{"", []string{"s=007", "l=[1]", "z=null", "e=", "sp= 1", "eq=a=b"}, `{"s":"007","l":"[1]","z":"null","e":"","sp":" 1","eq":"a=b"}`},
		{`{"a":2, "b":40}`, nil, `{"a":2, "b":40}`},
		{`{"a":2,"b":40}`, []string{"b=1", "c=x", "b=2"}, `{"a":2,"c":"x","b":2}`},
	}
	for _, c := range cases {
		var base []byte
		if c.base != "" {
			base = []byte(c.base)
		}
		got, err := Arguments(base, c.pairs)
		if err != nil || string(got) != c.want {
			t.Errorf("Arguments(%s, %q) = %s, %v; want %s", c.base, c.pairs, got, err, c.want)
		}
	}
	for _, bad := range [][]string{{"noequals"}, {"=v"}} {
		if _, err := Arguments(nil, bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := Arguments([]byte(`[1]`), nil); err == nil {
		t.Error("--args [1]: no error")
	}
}

func FuzzArguments(f *testing.F) {
	f.Add(`{"a":1}`, "b=2")
	f.Add(``, "x={\"y\":[1,2]}")
	f.Fuzz(func(t *testing.T, base, pair string) {
		var b []byte
		if base != "" {
			b = []byte(base)
		}
		out, err := Arguments(b, []string{pair})
		if err == nil && !json.Valid(out) {
			t.Fatalf("Arguments(%q, %q) = %q: not JSON", base, pair, out)
		}
	})
}

func FuzzParseScript(f *testing.F) {
	f.Add(`[{"tool":"echo","arguments":{"a":1}},{"list_tools":true}]`)
	f.Add(`[{"tool":"x","arguments":null}]`)
	f.Fuzz(func(t *testing.T, s string) {
		steps, err := ParseScript([]byte(s))
		if err != nil {
			return
		}
		for _, st := range steps {
			if st.ListTools == (st.Tool != "") {
				t.Fatalf("step %+v", st)
			}
			if st.Arguments != nil && !json.Valid(st.Arguments) {
				t.Fatalf("arguments %q", st.Arguments)
			}
		}
	})
}

func TestSafeJSONStaysJSON(t *testing.T) {
	in := []byte("{\"a\":\"x\u202ey\x7f\",\n\t\"b\":[1,\r\n2]}")
	out := SafeJSON(nil, in)
	var a, b any
	if json.Unmarshal(in, &a) != nil || json.Unmarshal(out, &b) != nil {
		t.Fatalf("not JSON: %q", out)
	}
	if string(out) != `{"a":"x\u202ey\u007f",  "b":[1,  2]}` {
		t.Errorf("%q", out)
	}
}
