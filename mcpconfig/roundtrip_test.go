package mcpconfig

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

const testProxy = "/usr/local/bin/bir-proxy"

// corpusCase is one mcpServers object of a corpus file.
type corpusCase struct {
	name string
	loc  Location
	data []byte
}

// corpus is every file in testdata/corpus, plus each project of the
// Claude Code user file (local scope).
func corpus(t *testing.T) []corpusCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.json"))
	if err != nil || len(files) < 8 {
		t.Fatalf("corpus: %v (%d files)", err, len(files))
	}
	var cs []corpusCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, corpusCase{filepath.Base(f), Location{File: f, Host: corpusHost(filepath.Base(f))}, data})
		if filepath.Base(f) == "claude-json.json" {
			for _, p := range []string{"/home/dev/work/my.app", "/home/dev/other"} {
				cs = append(cs, corpusCase{filepath.Base(f) + " " + p, Location{File: f, Project: p}, data})
			}
		}
	}
	return cs
}

// corpusHost is the host of a corpus file, by its name's prefix: the JSONC
// formats need theirs to be read.
func corpusHost(name string) Host {
	for _, h := range Hosts {
		if strings.HasPrefix(name, string(h)+"-") {
			return h
		}
	}
	return HostClaudeCode
}

func mustParse(t *testing.T, loc Location, data []byte) *Document {
	t.Helper()
	d, err := Parse(loc, data)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return d
}

func TestRoundTripCorpus(t *testing.T) {
	for _, c := range corpus(t) {
		t.Run(c.name, func(t *testing.T) {
			orig := mustParse(t, c.loc, c.data)
			w, err := orig.Wrap(nil, testProxy)
			if err != nil {
				t.Fatal(err)
			}
			if !w.Changed() {
				t.Fatal("wrap changed nothing; every corpus file has a stdio entry")
			}
			wrapped := mustParse(t, c.loc, w.New)

			twice, err := wrapped.Wrap(nil, testProxy)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(twice.New, w.New) {
				t.Errorf("wrapping twice differs from wrapping once:\n%s", unifiedDiff("once→twice", w.New, twice.New))
			}
			for _, o := range twice.Outcomes {
				if o.Changed {
					t.Errorf("second wrap changed %q", o.Name)
				}
			}

			u, err := wrapped.Unwrap(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(u.New, c.data) {
				t.Errorf("unwrap(wrap(x)) != x:\n%s", unifiedDiff(c.name, c.data, u.New))
			}
			again, err := mustParse(t, c.loc, u.New).Unwrap(nil)
			if err != nil {
				t.Fatal(err)
			}
			if again.Changed() {
				t.Errorf("unwrapping an unwrapped file changed it:\n%s", again.Diff())
			}

			checkWrapped(t, orig, wrapped)
		})
	}
}

// checkWrapped says what wrap must have done, independently of how: every
// stdio entry but the recorder's now runs `bir-proxy --server NAME
// <the original command line>` ("--" before it only for a command that
// starts with "-") with its other members (env first of all)
// untouched and in order, every other entry is as it was, and nothing
// outside mcpServers moved.
func checkWrapped(t *testing.T, orig, wrapped *Document) {
	t.Helper()
	before, after := orig.entries(), wrapped.entries()
	if len(before) != len(after) {
		t.Fatalf("%d entries before, %d after", len(before), len(after))
	}
	for i, b := range before {
		a := after[i]
		if a.name != b.name {
			t.Fatalf("entry %d: name %q became %q", i, b.name, a.name)
		}
		if b.kind == KindRemote && b.problem == "" {
			checkWrappedRemote(t, b, a)
			continue
		}
		if b.kind != KindStdio || b.name == RecorderName {
			if a.raw != b.raw {
				t.Errorf("%q (%s) was edited: %s", b.name, b.kind, a.raw)
			}
			continue
		}
		if a.kind != KindWrapped || a.members[a.command].value.Str != testProxy {
			t.Errorf("%q is not wrapped: %s", b.name, a.raw)
			continue
		}
		var argv []string
		for _, el := range a.argv {
			argv = append(argv, el.value.Str)
		}
		flags := []string{"--server", b.name}
		if b.args < 0 {
			flags = []string{"--server=" + b.name}
		}
		if strings.HasPrefix(b.upstream()[0], "-") {
			flags = append(flags, "--")
		}
		want := append(flags, b.upstream()...)
		if !slices.Equal(argv, want) {
			t.Errorf("%q args = %q, want %q", b.name, argv, want)
		}
		if got, want := otherMembers(a), otherMembers(b); !slices.Equal(got, want) {
			t.Errorf("%q other members = %q, want %q", b.name, got, want)
		}
	}
	if got, want := outsideServers(wrapped), outsideServers(orig); got != want {
		t.Errorf("text outside mcpServers changed:\n%s", unifiedDiff("outside", []byte(want), []byte(got)))
	}
}

// checkWrappedRemote: a remote entry now runs `bir-proxy --server NAME --url URL
// --transport T --header ...` with ${VAR} as written, "type" (if any) says stdio, and
// every member but url is still there.
func checkWrappedRemote(t *testing.T, b, a entry) {
	t.Helper()
	if a.kind != KindWrappedRemote || a.members[a.command].value.Str != testProxy {
		t.Errorf("%q is not wrapped: %s", b.name, a.raw)
		return
	}
	var argv []string
	for _, el := range a.argv {
		argv = append(argv, el.value.Str)
	}
	want := []string{"--server", b.name, "--url", b.url, "--transport", b.remoteTransport()}
	if b.headersIdx >= 0 {
		gjson.Parse(b.members[b.headersIdx].value.Mask).ForEach(func(k, v gjson.Result) bool {
			want = append(want, "--header", k.Str+": "+v.Str)
			return true
		})
	}
	if !slices.Equal(argv, want) {
		t.Errorf("%q args = %q, want %q", b.name, argv, want)
	}
	if a.url != b.url || a.transport != b.remoteTransport() {
		t.Errorf("%q reads back as %q %q", b.name, a.url, a.transport)
	}
	// "headers" goes when unwrap can write it back exactly, and stays as it was
	// otherwise.
	var kept []string
	for _, m := range b.members {
		switch m.key {
		case "url":
		case "type":
			kept = append(kept, `type="stdio"`)
		case "headers":
			if a.headersIdx >= 0 {
				kept = append(kept, m.key+"="+m.value.Raw)
			}
		default:
			kept = append(kept, m.key+"="+m.value.Raw)
		}
	}
	if got := otherMembers(a); !slices.Equal(got, kept) {
		t.Errorf("%q other members = %q, want %q", b.name, got, kept)
	}
	if back, err := a.unwrap(); err != nil || back != b.raw {
		t.Errorf("%q unwraps to %q (%v), want %q", b.name, back, err, b.raw)
	}
}

func otherMembers(e entry) []string {
	var out []string
	for _, m := range e.members {
		if m.key != "command" && m.key != "args" {
			out = append(out, m.key+"="+m.value.Raw)
		}
	}
	return out
}

func outsideServers(d *Document) string {
	s := gjson.GetBytes(d.mask, pathOf(d.servers...))
	return string(d.bom) + string(d.body[:s.Index]) + string(d.body[s.Index+len(s.Raw):])
}

// TestWrapStyle pins the text wrap writes: new elements and keys follow
// the style already there.
func TestWrapStyle(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{
			"one element per line",
			"{\"mcpServers\": {\n  \"gh\": {\n    \"command\": \"npx\",\n    \"args\": [\n      \"-y\",\n      \"pkg\"\n    ]\n  }\n}}\n",
			"{\"mcpServers\": {\n  \"gh\": {\n    \"command\": \"/usr/local/bin/bir-proxy\",\n    \"args\": [\n      \"--server\",\n      \"gh\",\n      \"npx\",\n      \"-y\",\n      \"pkg\"\n    ]\n  }\n}}\n",
		},
		{
			"inline",
			`{"mcpServers": {"gh": {"command": "npx", "args": ["-y", "pkg"], "env": {"T": "${T}"}}}}`,
			`{"mcpServers": {"gh": {"command": "/usr/local/bin/bir-proxy", "args": ["--server", "gh", "npx", "-y", "pkg"], "env": {"T": "${T}"}}}}`,
		},
		{
			"compact",
			`{"mcpServers":{"gh":{"command":"npx","args":["-y","pkg"]}}}`,
			`{"mcpServers":{"gh":{"command":"/usr/local/bin/bir-proxy","args":["--server","gh","npx","-y","pkg"]}}}`,
		},
		{
			"no args, more members",
			"{\"mcpServers\": {\n  \"bin\": {\n    \"command\": \"/opt/srv\",\n    \"env\": {}\n  }\n}}",
			"{\"mcpServers\": {\n  \"bin\": {\n    \"command\": \"/usr/local/bin/bir-proxy\",\n    \"args\": [\"--server=bin\", \"/opt/srv\"],\n    \"env\": {}\n  }\n}}",
		},
		{
			"no args, command alone",
			"{\"mcpServers\": {\n  \"bin\": {\n    \"command\": \"/opt/srv\"\n  }\n}}",
			"{\"mcpServers\": {\n  \"bin\": {\n    \"command\": \"/usr/local/bin/bir-proxy\",\n    \"args\": [\"--server=bin\", \"/opt/srv\"]\n  }\n}}",
		},
		{
			"empty args",
			`{"mcpServers": {"e": {"command": "srv", "args": []}}}`,
			`{"mcpServers": {"e": {"command": "/usr/local/bin/bir-proxy", "args": ["--server", "e", "srv"]}}}`,
		},
		{
			"escapes in the command stay as written",
			`{"mcpServers": {"w": {"command": "C:\\Program Files\\node\u002eexe", "args": ["x"]}}}`,
			`{"mcpServers": {"w": {"command": "/usr/local/bin/bir-proxy", "args": ["--server", "w", "C:\\Program Files\\node\u002eexe", "x"]}}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := mustParse(t, Location{File: "x.json"}, []byte(tc.in)).Wrap(nil, testProxy)
			if err != nil {
				t.Fatal(err)
			}
			if string(c.New) != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", c.New, tc.want)
			}
		})
	}
}

// An entry written by hand in the SPEC's shape unwraps, other proxy flags
// before "--" are dropped, and a remote entry wrapped by hand gets the "type"
// hosts need and its --header flags as "headers".
func TestUnwrapHandWrapped(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "hand-wrapped.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := mustParse(t, Location{File: "hand-wrapped.json"}, data).Unwrap(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"mcpServers": {
  "github": {"command": "npx",
             "args": ["-y", "@modelcontextprotocol/server-github"],
             "env": {"GITHUB_TOKEN": "..."}},
  "linear": {"type": "http",
             "url": "https://mcp.linear.app/mcp",
             "headers": {"Authorization": "Bearer ${LINEAR_TOKEN}"}},
  "plain": {"command": "npx", "args": ["-y", "pkg"]}
}}
`
	if string(c.New) != want {
		t.Errorf("got:\n%s\nwant:\n%s", c.New, want)
	}
	got := map[string]Outcome{}
	for _, o := range c.Outcomes {
		got[o.Name] = o
	}
	if !got["github"].Changed || !got["linear"].Changed || got["plain"].Changed || got["plain"].Note != "not wrapped" {
		t.Errorf("outcomes: %+v", c.Outcomes)
	}
}

func TestMixedWrapped(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "mixed-wrapped.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := mustParse(t, Location{File: "mixed.json"}, data)
	w, err := d.Wrap(nil, testProxy)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range w.Outcomes {
		if o.Changed != (o.Name == "todo") {
			t.Errorf("wrap: %+v", o)
		}
	}
	u, err := d.Unwrap([]string{"win-done"})
	if err != nil {
		t.Fatal(err)
	}
	want := `"win-done": {
      "command": "cmd",
      "args": ["/c", "npx", "b"]
    }`
	if !bytes.Contains(u.New, []byte(want)) {
		t.Errorf("unwrap of the Windows entry, --recorder dropped; got:\n%s", u.New)
	}
	if !bytes.Contains(u.New, []byte(`"args": ["--server", "done", "--", "npx", "-y", "a"]`)) {
		t.Error("an entry not named was unwrapped")
	}
}

func TestNamesAndRecorder(t *testing.T) {
	data := []byte(`{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}, "bir": {"command": "bir", "args": ["mcp"]}}}`)
	d := mustParse(t, Location{File: "n.json"}, data)

	c, err := d.Wrap([]string{"b", "bir"}, testProxy)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"mcpServers": {"a": {"command": "x"}, "b": {"command": "/usr/local/bin/bir-proxy", "args": ["--server=b", "y"]}, "bir": {"command": "bir", "args": ["mcp"]}}}`
	if string(c.New) != want {
		t.Errorf("got  %s\nwant %s", c.New, want)
	}
	if len(c.Outcomes) != 2 || c.Outcomes[1].Name != "bir" || c.Outcomes[1].Changed || c.Outcomes[1].Note == "" {
		t.Errorf("outcomes: %+v", c.Outcomes)
	}

	if _, err := d.Wrap([]string{"a", "nope"}, testProxy); err == nil {
		t.Error("an unknown name was accepted")
	}
	if _, err := d.Wrap(nil, "/usr/local/bin/proxy"); err == nil {
		t.Error("a proxy path that would not be recognised as wrapped was accepted")
	}
	for _, p := range []string{`C:\bin\bir-proxy.exe`, "bir-proxy", "/x/bir-proxy"} {
		if _, err := d.Wrap(nil, p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestLocalScope(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "corpus", "claude-json.json"))
	if err != nil {
		t.Fatal(err)
	}
	// A trailing slash still finds the project, and only its servers move.
	d := mustParse(t, Location{File: "claude.json", Project: "/home/dev/work/my.app/"}, data)
	c, err := d.Wrap(nil, testProxy)
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, o := range c.Outcomes {
		if o.Changed {
			changed = append(changed, o.Name)
		}
	}
	if !slices.Equal(changed, []string{"playwright", "db"}) {
		t.Errorf("changed %q", changed)
	}
	for _, p := range []string{"mcpServers.context7.command", `projects.\/home\/dev\/other.mcpServers.other.command`} {
		if gjson.GetBytes(c.New, p).Str == testProxy {
			t.Errorf("%s was wrapped", p)
		}
	}
	if got := gjson.GetBytes(c.New, `projects.\/home\/dev\/work\/my\.app.mcpServers.db.args.1`).Str; got != "db" {
		t.Errorf("db not wrapped: %q", got)
	}

	if _, err := Parse(Location{File: "claude.json", Project: "/elsewhere"}, data); err == nil {
		t.Error("a project with no entry was accepted")
	}
	// From a subdirectory, the project that encloses it.
	sub := mustParse(t, Location{File: "claude.json", Project: "/home/dev/work/my.app/src/lib"}, data)
	if sub.loc.Project != "/home/dev/work/my.app" {
		t.Errorf("a subdirectory found the project %q", sub.loc.Project)
	}
}

func TestLocate(t *testing.T) {
	cj := ClaudeJSON("", "/home/u")
	if cj != filepath.Join("/home/u", ".claude.json") {
		t.Errorf("ClaudeJSON = %s", cj)
	}
	if got := ClaudeJSON("/cfg", "/home/u"); got != filepath.Join("/cfg", ".claude.json") {
		t.Errorf("ClaudeJSON with CLAUDE_CONFIG_DIR = %s", got)
	}
	for scope, want := range map[Scope]Location{
		ScopeLocal: {File: cj, Project: "/p"},
		ScopeUser:  {File: cj},
	} {
		if got, ok := Locate(scope, "/p", cj); got != want || !ok {
			t.Errorf("%s: %+v, want %+v", scope, got, want)
		}
	}
	if _, err := ParseScope("global"); err == nil {
		t.Error("unknown scope accepted")
	}
}

// TestWrapRemote pins the text of wrapped remote entries and their way back.
func TestWrapRemote(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{
			"http with headers, one member a line",
			"{\"mcpServers\": {\n  \"linear\": {\n    \"type\": \"http\",\n    \"url\": \"https://mcp.linear.app/mcp\",\n    \"headers\": {\n      \"Authorization\": \"Bearer ${LINEAR_TOKEN}\",\n      \"X-Team\": \"core\"\n    }\n  }\n}}\n",
			"{\"mcpServers\": {\n  \"linear\": {\n    \"type\": \"stdio\",\n    \"command\": \"/usr/local/bin/bir-proxy\",\n    \"args\": [\"--server\", \"linear\", \"--url\", \"https://mcp.linear.app/mcp\", \"--transport\", \"http\", \"--header\", \"Authorization: Bearer ${LINEAR_TOKEN}\", \"--header\", \"X-Team: core\"]\n  }\n}}\n",
		},
		{
			"http with headers, tab indented, more members after",
			"{\n\t\"mcpServers\": {\n\t\t\"l\": {\n\t\t\t\"type\": \"http\",\n\t\t\t\"url\": \"https://h/mcp\",\n\t\t\t\"headers\": {\n\t\t\t\t\"X-Key\": \"${K}\"\n\t\t\t},\n\t\t\t\"timeout\": 5\n\t\t}\n\t}\n}\n",
			"{\n\t\"mcpServers\": {\n\t\t\"l\": {\n\t\t\t\"type\": \"stdio\",\n\t\t\t\"command\": \"/usr/local/bin/bir-proxy\",\n\t\t\t\"args\": [\"--server\", \"l\", \"--url\", \"https://h/mcp\", \"--transport\", \"http\", \"--header\", \"X-Key: ${K}\"],\n\t\t\t\"timeout\": 5\n\t\t}\n\t}\n}\n",
		},
		{
			"http with headers, inline",
			`{"mcpServers": {"l": {"type": "http", "url": "https://h/mcp", "headers": {"A": "1", "B": "${B}"}}}}`,
			`{"mcpServers": {"l": {"type": "stdio", "command": "/usr/local/bin/bir-proxy", "args": ["--server", "l", "--url", "https://h/mcp", "--transport", "http", "--header", "A: 1", "--header", "B: ${B}"]}}}`,
		},
		{
			"headers before the url stay",
			`{"mcpServers": {"l": {"type": "sse", "headers": {"A": "1"}, "url": "https://h/sse"}}}`,
			`{"mcpServers": {"l": {"type": "stdio", "headers": {"A": "1"}, "command": "/usr/local/bin/bir-proxy", "args": ["--server", "l", "--url", "https://h/sse", "--transport", "sse", "--header", "A: 1"]}}}`,
		},
		{
			"headers spelled with escapes stay",
			`{"mcpServers": {"l": {"type": "http", "url": "https://h/mcp", "headers": {"A": "\u0031"}}}}`,
			`{"mcpServers": {"l": {"type": "stdio", "command": "/usr/local/bin/bir-proxy", "args": ["--server", "l", "--url", "https://h/mcp", "--transport", "http", "--header", "A: 1"], "headers": {"A": "\u0031"}}}}`,
		},
		{
			"headers of an entry without a type stay",
			`{"mcpServers": {"l": {"url": "https://h/mcp", "headers": {"A": "1"}}}}`,
			`{"mcpServers": {"l": {"command": "/usr/local/bin/bir-proxy", "args": ["--server", "l", "--url", "https://h/mcp", "--transport", "auto", "--header", "A: 1"], "headers": {"A": "1"}}}}`,
		},
		{
			"sse, compact",
			`{"mcpServers":{"s":{"type":"sse","url":"https://h/sse?x=1\u0026y=2"}}}`,
			`{"mcpServers":{"s":{"type":"stdio","command":"/usr/local/bin/bir-proxy","args":["--server","s","--url","https://h/sse?x=1\u0026y=2","--transport","sse"]}}}`,
		},
		{
			"url alone",
			`{"mcpServers": {"r": {"url": "https://example.com/mcp"}}}`,
			`{"mcpServers": {"r": {"command": "/usr/local/bin/bir-proxy", "args": ["--server", "r", "--url", "https://example.com/mcp", "--transport", "auto"]}}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustParse(t, Location{File: "x.json"}, []byte(tc.in))
			c, err := d.Wrap(nil, testProxy)
			if err != nil {
				t.Fatal(err)
			}
			if string(c.New) != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", c.New, tc.want)
			}
			servers := mustParse(t, Location{File: "x.json"}, c.New).Servers()
			if servers[0].Kind != KindWrappedRemote || servers[0].URL == "" {
				t.Errorf("status sees %+v", servers[0])
			}
			u, err := mustParse(t, Location{File: "x.json"}, c.New).Unwrap(nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(u.New) != tc.in {
				t.Fatalf("unwrap gives:\n%s\nwant:\n%s", u.New, tc.in)
			}
		})
	}
	// The --header arguments are what counts while the entry is wrapped: an edit to
	// them is what unwrap writes back.
	wrapped := `{"mcpServers": {"l": {"type": "stdio", "command": "/usr/local/bin/bir-proxy", "args": ["--server", "l", "--url", "https://h/mcp", "--transport", "http", "--header", "A: 2", "--header", "C: ${C}"]}}}`
	u, err := mustParse(t, Location{File: "x.json"}, []byte(wrapped)).Unwrap(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"mcpServers": {"l": {"type": "http", "url": "https://h/mcp", "headers": {"A": "2", "C": "${C}"}}}}`; string(u.New) != want {
		t.Errorf("unwrap after editing the headers:\n%s\nwant:\n%s", u.New, want)
	}
	// What cannot be undone exactly is left alone, with a warning.
	d := mustParse(t, Location{File: "x.json"}, []byte(`{"mcpServers": {"n": {"type": "http", "url": "https://h/mcp", "headers": {"X-N": 1}}}}`))
	c, err := d.Wrap(nil, testProxy)
	if err != nil {
		t.Fatal(err)
	}
	if c.Changed() || !c.Outcomes[0].Warn {
		t.Errorf("a header that is not a string: %+v", c.Outcomes)
	}
}
