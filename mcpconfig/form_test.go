package mcpconfig

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestWrittenForm pins SPEC §1's form: no "--" unless the command starts
// with "-".
func TestWrittenForm(t *testing.T) {
	for _, tc := range []struct{ name, in, args string }{
		{"plain", `{"command": "npx", "args": ["-y", "pkg"]}`, `["--server", "s", "npx", "-y", "pkg"]`},
		{"server args with --", `{"command": "docker", "args": ["run", "img", "--", "--ro"]}`, `["--server", "s", "docker", "run", "img", "--", "--ro"]`},
		{"command like a flag", `{"command": "-odd", "args": ["x"]}`, `["--server", "s", "--", "-odd", "x"]`},
		{"command like a flag, no args", `{"command": "-odd"}`, `["--server=s", "--", "-odd"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := `{"mcpServers": {"s": ` + tc.in + `}}`
			c, err := mustParse(t, Location{File: "f.json"}, []byte(in)).Wrap(nil, testProxy)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(c.New), `"args": `+tc.args) {
				t.Errorf("wrote %s, want args %s", c.New, tc.args)
			}
			u, err := mustParse(t, Location{File: "f.json"}, c.New).Unwrap(nil)
			if err != nil || string(u.New) != in {
				t.Errorf("unwrap gave %s (%v), want %s", u.New, err, in)
			}
		})
	}
}

// TestReadBothForms reads entries in either form, as written by hand, by an
// older wrap, or after `gemini mcp add` dropped the "--".
func TestReadBothForms(t *testing.T) {
	for _, tc := range []struct {
		name, args string
		server     []string
		proxyName  string
		unwrapped  string
	}{
		{"with --", `["--server", "gh", "--", "npx", "-y", "p"]`, []string{"npx", "-y", "p"}, "gh", `["-y", "p"]`},
		{"without --", `["--server", "gh", "npx", "-y", "p"]`, []string{"npx", "-y", "p"}, "gh", `["-y", "p"]`},
		{"gemini dropped -- after value flags", `["--server", "gh", "--recorder", "http://127.0.0.1:1", "--stop-grace", "5s", "npx", "-y", "p"]`, []string{"npx", "-y", "p"}, "gh", `["-y", "p"]`},
		{"bool and = flags", `["--allow-remote-recorder", "--journal=/j", "-server=x", "uvx", "mcp-server-git"]`, []string{"uvx", "mcp-server-git"}, "x", `["mcp-server-git"]`},
		{"no flags at all", `["npx", "p"]`, []string{"npx", "p"}, "", `["p"]`},
		{"a value that looks like --", `["--server", "--", "srv"]`, []string{"srv"}, "--", `[]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := `{"mcpServers": {"s": {"command": "bir-proxy", "args": ` + tc.args + `}}}`
			d := mustParse(t, Location{File: "f.json"}, []byte(in))
			s := d.Servers()[0]
			if s.Kind != KindWrapped || !slices.Equal(s.Command, tc.server) || s.ProxyName != tc.proxyName {
				t.Fatalf("read %+v, want wrapped %q named %q", s, tc.server, tc.proxyName)
			}
			u, err := d.Unwrap(nil)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"mcpServers": {"s": {"command": "` + tc.server[0] + `", "args": ` + tc.unwrapped + `}}}`
			if string(u.New) != want {
				t.Errorf("unwrapped to %s, want %s", u.New, want)
			}
		})
	}
	in := `{"mcpServers": {"s": {"command": "bir-proxy", "args": ["--server", "x", "--log-level"]}}}`
	if s := mustParse(t, Location{File: "f.json"}, []byte(in)).Servers()[0]; s.Kind != KindUnknown {
		t.Errorf("an entry with no command read as %+v", s)
	}
}

// FuzzWrapForm wraps an entry with any command line and reads it back: the
// entry is wrapped, the server's command is the original, the proxy would
// see the same command after its flags (with or without the "--" that some
// tools drop), and unwrap restores every byte.
func FuzzWrapForm(f *testing.F) {
	f.Add("gh", "npx", "-y\x00@modelcontextprotocol/server-github", true)
	f.Add("s", "-odd", "--\x00x", true)
	f.Add("n", "uvx", "", false)
	f.Add("a.b", "C:\\node.exe", "--server\x00-", true)
	f.Add(":x", "x", "", false) // sjson reads a leading colon as syntax
	f.Fuzz(func(t *testing.T, name, command, args string, hasArgs bool) {
		if command == "" || name == "" || name == RecorderName || IsProxyCommand(command) ||
			!utf8.ValidString(name) || !utf8.ValidString(command) || !utf8.ValidString(args) {
			return // not wrapped, or not text a host writes
		}
		argv := []string{}
		if args != "" {
			argv = strings.Split(args, "\x00")
		}
		entry := map[string]any{"command": command}
		if hasArgs {
			entry["args"] = argv
		} else {
			argv = nil
		}
		raw, err := json.Marshal(map[string]any{"mcpServers": map[string]any{name: entry}})
		if err != nil {
			t.Fatal(err)
		}
		d, err := Parse(Location{File: "f.json"}, raw)
		if err != nil {
			t.Fatal(err)
		}
		c, err := d.Wrap(nil, testProxy)
		if err != nil {
			t.Fatal(err)
		}
		w := mustParse(t, Location{File: "f.json"}, c.New)
		s := w.Servers()[0]
		want := append([]string{command}, argv...)
		if s.Kind != KindWrapped || !slices.Equal(s.Command, want) || s.ProxyName != name {
			t.Fatalf("wrapped entry reads as %+v, want %q", s, want)
		}
		// What the proxy's flag parsing would leave: written args, and the same
		// with every "--" before the command dropped (gemini mcp add).
		var cfg struct {
			MCPServers map[string]struct{ Args []string } `json:"mcpServers"`
		}
		if err := json.Unmarshal(c.New, &cfg); err != nil {
			t.Fatal(err)
		}
		written := cfg.MCPServers[name].Args
		if got := afterProxyFlags(written); !slices.Equal(got, want) {
			t.Fatalf("the proxy would run %q, want %q (args %q)", got, want, written)
		}
		if !strings.HasPrefix(command, "-") && slices.Contains(written[:len(written)-len(want)], "--") {
			t.Fatalf("wrote a -- the command does not need: %q", written)
		}
		u, err := w.Unwrap(nil)
		if err != nil || string(u.New) != string(raw) {
			t.Fatalf("unwrap gave %s (%v), want %s", u.New, err, raw)
		}
	})
}

// afterProxyFlags is what Go's flag package leaves of the proxy's args when
// the proxy's flags are --server and others known to TakesValue.
func afterProxyFlags(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args[i+1:]
		case a == "-" || !strings.HasPrefix(a, "-"):
			return args[i:]
		case !strings.Contains(a, "=") && TakesValue(strings.TrimLeft(a, "-")):
			i++
		}
	}
	return nil
}

// TestBrokenProxyArgs: an entry whose bir-proxy arguments the proxy would refuse
// ("--sever" for "--server") is broken, not wrapped: Unwrap would have written
// "command": "typo". Wrap and Unwrap leave it alone with a warning.
func TestBrokenProxyArgs(t *testing.T) {
	const typo = `{"command": "bir-proxy", "args": ["--sever", "typo", "npx", "-y", "p"]}`
	in := `{"mcpServers": {"typo": ` + typo + `, "ok": {"command": "bir-proxy", "args": ["--server", "ok", "uvx", "q"]}}}`
	var seen [][]string
	check := func(args []string) error {
		seen = append(seen, args)
		if args[0] == "--sever" {
			return errors.New("unknown flag --sever; did you mean --server?")
		}
		return nil
	}
	d := mustParse(t, Location{File: "f.json"}, []byte(in))
	d.CheckProxyArgs(check)
	ss := d.Servers()
	if ss[0].Broken != "unknown flag --sever; did you mean --server?" || ss[1].Broken != "" {
		t.Errorf("broken: %q %q", ss[0].Broken, ss[1].Broken)
	}
	if !slices.Equal(ss[0].Args, []string{"--sever", "typo", "npx", "-y", "p"}) {
		t.Errorf("args %q", ss[0].Args)
	}
	if len(seen) == 0 || !slices.Equal(seen[0], ss[0].Args) {
		t.Errorf("the check saw %q", seen)
	}
	u, err := d.Unwrap(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(u.New), `"typo": `+typo) || !strings.Contains(string(u.New), `"ok": {"command": "uvx", "args": ["q"]}`) {
		t.Errorf("unwrap wrote %s", u.New)
	}
	if o := u.Outcomes[0]; o.Changed || !o.Warn || !strings.Contains(o.Note, "BROKEN") || !strings.Contains(o.Note, "did you mean --server?") {
		t.Errorf("unwrap outcome %+v", o)
	}
	w, err := d.Wrap(nil, testProxy)
	if err != nil {
		t.Fatal(err)
	}
	if o := w.Outcomes[0]; o.Changed || !o.Warn || !strings.Contains(o.Note, "BROKEN") {
		t.Errorf("wrap outcome %+v", o)
	}
	// Without a check, the entry reads as before: wrapped.
	if s := mustParse(t, Location{File: "f.json"}, []byte(in)).Servers()[0]; s.Broken != "" || s.Kind != KindWrapped {
		t.Errorf("unchecked: %+v", s)
	}
}
