package toolpolicy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pat, name string
		want      bool
	}{
		{"echo", "echo", true},
		{"echo", "echoes", false},
		{"echo", "ECHO", true}, // mcp-remote matches without case
		{"*", "", true},
		{"*", "anything", true},
		{"", "", true},
		{"", "x", false},
		{"delete_*", "delete_file", true},
		{"delete_*", "delete_", true},
		{"delete_*", "undelete_file", false},
		{"*_file", "read_file", true},
		{"*_file", "read_files", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"a*b*c", "abc", true},
		{"**", "x", true},
		{"a.b", "aXb", false}, // only '*' is special
		{"a?b", "aXb", false},
		{"a?b", "a?b", true},
		{"[ab]", "a", false},
		{"ÉCHO", "écho", true},
		{"straße*", "STRASSE", false}, // simple folding, as JavaScript's /i
		{"*aab", "aaaab", true},
		{"*a*a*a*a*b", strings.Repeat("a", 200), false},
	} {
		if got := Match(c.pat, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pat, c.name, got, c.want)
		}
	}
}

func TestHidden(t *testing.T) {
	p := &Policy{Ignore: []string{"delete_*"}, Allow: []string{"read_*", "delete_all"}}
	for name, want := range map[string]bool{"read_file": false, "delete_all": true, "write_file": true, "delete_x": true} {
		if got := p.Hidden(name); got != want {
			t.Errorf("Hidden(%q) = %v, want %v", name, got, want)
		}
	}
	only := &Policy{Ignore: []string{"x"}}
	if only.Hidden("y") || !only.Hidden("X") {
		t.Error("ignore alone hides just what matches")
	}
	var none *Policy
	if none.Hidden("x") || none.Active() || (&Policy{}).Active() {
		t.Error("no policy hides nothing")
	}
	if !only.HiddenLit([]byte(`"\u0078"`)) || only.HiddenLit([]byte(`1`)) || only.HiddenLit(nil) {
		t.Error("HiddenLit decodes the literal, and a non-string is no tool")
	}
}

func TestCheck(t *testing.T) {
	for _, p := range []Policy{{Ignore: []string{""}}, {Allow: []string{strings.Repeat("a", 2000)}}, {CallTimeout: -1}, {ResetOnProgress: true}} {
		if p.Check() == nil {
			t.Errorf("%+v passed Check", p)
		}
	}
	if err := (&Policy{Ignore: []string{"a"}, CallTimeout: time.Second, ResetOnProgress: true}).Check(); err != nil {
		t.Error(err)
	}
}

func cutAll(p *Policy, msg string) string {
	b := []byte(msg)
	return string(Cut(b, p.ToolCuts(b, jsonlex.Span{Start: jsonlex.SkipSpace(b, 0), End: len(b)}, nil)))
}

func TestToolCuts(t *testing.T) {
	p := &Policy{Ignore: []string{"h*"}}
	for _, c := range []struct{ in, want string }{
		{`{"id":1,"result":{"tools":[{"name":"a"},{"name":"h1"},{"name":"b"}]}}`, `{"id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`},
		{`{"id":1,"result":{"tools":[{"name":"h1"},{"name":"a"}]}}`, `{"id":1,"result":{"tools":[{"name":"a"}]}}`},
		{`{"id":1,"result":{"tools":[{"name":"a"},{"name":"h1"}]}}`, `{"id":1,"result":{"tools":[{"name":"a"}]}}`},
		{`{"id":1,"result":{"tools":[{"name":"h1"}]}}`, `{"id":1,"result":{"tools":[]}}`},
		{`{"id":1,"result":{"tools":[ {"name":"h1"} , {"name":"h2"} ]}}`, `{"id":1,"result":{"tools":[  ]}}`},
		{`{"id":1,"result":{"tools":[ {"name":"a"} ,` + "\n" + ` {"name":"h2"} , {"name":"h3"}, {"name":"b"} ],"nextCursor":"c"}}`,
			`{"id":1,"result":{"tools":[ {"name":"a"} ,` + "\n" + ` {"name":"b"} ],"nextCursor":"c"}}`},
		{`{"id":1,"result":{"tools":[{"name":"a"},{"name":"h1"},{"name":"b"},{"name":"h2"}]}}`, `{"id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`},
		// The last member of a name is the one the host reads.
		{`{"id":1,"result":{"tools":[{"name":"h1"}],"tools":[{"name":"h2"},{"name":"a"}]}}`, `{"id":1,"result":{"tools":[{"name":"h1"}],"tools":[{"name":"a"}]}}`},
		{`{"id":1,"result":{"tools":[{"name":"h1","name":"a"},{"name":"a","name":"\u0068"}]}}`, `{"id":1,"result":{"tools":[{"name":"h1","name":"a"}]}}`},
		// Nothing it cannot follow is touched.
		{`{"id":1,"result":{"tools":[{"name":"h1"},]}}`, `{"id":1,"result":{"tools":[{"name":"h1"},]}}`},
		{`{"id":1,"result":{"tools":{"name":"h1"}}}`, `{"id":1,"result":{"tools":{"name":"h1"}}}`},
		{`{"id":1,"error":{"tools":[{"name":"h1"}]}}`, `{"id":1,"error":{"tools":[{"name":"h1"}]}}`},
		{`{"id":1,"result":{"tools":[1,"h1",{"name":1},{"title":"h1"}]}}`, `{"id":1,"result":{"tools":[1,"h1",{"name":1},{"title":"h1"}]}}`},
	} {
		if got := cutAll(p, c.in); got != c.want {
			t.Errorf("cut of %s\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	b := []byte(`{"id":1,"result":{"tools":[{"name":"a"}]}}`)
	if cuts := p.ToolCuts(b, jsonlex.Span{End: len(b)}, nil); cuts != nil || &Cut(b, nil)[0] != &b[0] {
		t.Error("nothing hidden: no cut, and the same bytes")
	}
}

func TestAnswers(t *testing.T) {
	var v struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if err := json.Unmarshal(UnknownTool([]byte(`9007199254740993`), []byte(`"de\u006cete"`)), &v); err != nil ||
		string(v.ID) != `9007199254740993` || v.Error.Code != -32602 || v.Error.Message != "Unknown tool: delete" {
		t.Errorf("UnknownTool: %+v %v", v, err)
	}
	long := UnknownTool([]byte(`1`), jsonlex.AppendString(nil, strings.Repeat("é", 300)))
	if !jsonlex.Valid(long) || len(long) > 400 {
		t.Errorf("a long name is clipped: %d bytes", len(long))
	}
	if err := json.Unmarshal(Timeout([]byte(`"x"`), 300*time.Millisecond), &v); err != nil || v.Error.Code != -32001 || !strings.Contains(v.Error.Message, "300ms") {
		t.Errorf("Timeout: %+v %v", v, err)
	}
	if err := json.Unmarshal(Cancel([]byte(`"x"`), time.Second), &v); err != nil || string(v.Params.RequestID) != `"x"` {
		t.Errorf("Cancel: %+v %v", v, err)
	}
}

// FuzzToolCuts: the cuts of a tools/list answer, put back where they were, give the
// answer again, byte for byte; each cut is whole elements of the tools array, every
// one hidden, plus separators; every hidden element is cut; and a valid answer stays
// valid.
func FuzzToolCuts(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"h1"},{"name":"b"}]}}`,
		`{"id":1,"result":{"tools":[ {"name":"h1"} , {"name":"h2"} ]}}`,
		`{"id":1,"result":{"tools":[ {"name":"a"} ,` + "\n" + ` {"name":"h2"} , {"name":"h3"}, {"name":"b"} ],"nextCursor":"c"}}`,
		`{"id":1,"result":{"tools":[{"name":"h1"}],"tools":[{"name":"h2"},{"name":"a"}]}}`,
		`{"id":1,"result":{"tools":[{"name":"h\"1","x":[{"name":"h"}]},{"name":"\u0068"}]}}`,
		`{"id":1,"result":{"tools":[{"name":"h1"},]}}`,
		`{"result":{"tools":[]}}`,
	} {
		f.Add([]byte(s), "h*", "")
	}
	f.Add([]byte(`{"result":{"tools":[{"name":"a"},{"name":"b"}]}}`), "", "a")
	f.Fuzz(func(t *testing.T, b []byte, ignore, allow string) {
		p := &Policy{}
		if ignore != "" {
			p.Ignore = []string{ignore}
		}
		if allow != "" {
			p.Allow = []string{allow}
		}
		start := jsonlex.SkipSpace(b, 0)
		if start >= len(b) || b[start] != '{' {
			return
		}
		cuts := p.ToolCuts(b, jsonlex.Span{Start: start, End: len(b)}, nil)
		at := 0
		for _, c := range cuts {
			if c.Start < at || c.End <= c.Start || c.End > len(b) {
				t.Fatalf("cuts not sorted, disjoint and within the message: %v", cuts)
			}
			at = c.End
		}
		out := Cut(b, cuts)
		// Put back: the pieces of out between cuts, and each cut's bytes, in order.
		var back []byte
		o, prev := 0, 0
		for _, c := range cuts {
			n := c.Start - prev
			back = append(back, out[o:o+n]...)
			back = append(back, b[c.Start:c.End]...)
			o += n
			prev = c.End
		}
		back = append(back, out[o:]...)
		if !bytes.Equal(back, b) {
			t.Fatalf("putting the cuts back changed the message:\n%q\n%q", b, back)
		}
		if len(cuts) == 0 {
			return
		}
		result, _ := lastMember(b, start, "result")
		tools, _ := lastMember(b, result.Start, "tools")
		elems, _ := jsonlex.Elements(b, tools.Start)
		for _, e := range elems {
			hidden := b[e.Start] == '{' && p.HiddenLit(jsonlex.Get(b[e.Start:e.End], "name"))
			inside := false
			for _, c := range cuts {
				if e.Start < c.End && c.Start < e.End {
					if e.Start < c.Start || e.End > c.End {
						t.Fatalf("cut %v splits element %v of %q", c, e, b)
					}
					inside = true
				}
			}
			if inside != hidden {
				t.Fatalf("element %q: hidden %v, cut %v", b[e.Start:e.End], hidden, inside)
			}
		}
		for _, c := range cuts {
			// Between elements a cut holds only separators.
			rest := b[c.Start:c.End]
			for _, e := range elems {
				if e.Start >= c.Start && e.End <= c.End {
					rest = bytes.Replace(rest, b[e.Start:e.End], nil, 1)
				}
			}
			if strings.Trim(string(rest), " \t\r\n,") != "" {
				t.Fatalf("cut %q holds more than elements and separators", b[c.Start:c.End])
			}
		}
		if jsonlex.Valid(b) && !jsonlex.Valid(out) {
			t.Fatalf("a valid answer became invalid:\n%s\n%s", b, out)
		}
	})
}
