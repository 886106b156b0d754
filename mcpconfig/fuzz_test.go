package mcpconfig

import (
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"
)

// FuzzEntry: whatever entry text a config holds, reading it does not panic; its
// members are the ones encoding/json sees; and a stdio entry wraps into a wrapped
// entry that runs the same command line and unwraps to the very same bytes.
func FuzzEntry(f *testing.F) {
	for _, s := range []string{
		`{"command":"npx","args":["-y","@modelcontextprotocol/server-github"],"env":{"T":"x"}}`,
		`{ "command" : "node" }`, "{\n  \"command\": \"a\\u0062\",\n  \"args\": [ ]\n}",
		`{"type":"stdio","command":"/bin/s\"h","args":["-c","echo <&>"]}`,
		`{"command":"bir-proxy","args":["--server","x","--","srv"]}`, `{"url":"https://x"}`, `{"command":"a","command":"b"}`,
		`{"type":"http","url":"https://h/mcp","headers":{"A":"${A}","B":"2"}}`,
		"{\n  \"type\": \"sse\",\n  \"url\": \"https://h/sse\",\n  \"headers\": {\n    \"A\": \"1\"\n  }\n}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) || !utf8.ValidString(raw) {
			return
		}
		e := parseEntry("srv", raw)
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(raw), &m) == nil && e.kind != KindUnknown {
			for _, mb := range e.members {
				if _, ok := m[mb.key]; !ok {
					t.Fatalf("member %q of %s is not one encoding/json sees", mb.key, raw)
				}
			}
		}
		if e.kind == KindRemote && e.problem == "" {
			checkRemoteWrap(t, e)
			return
		}
		if e.kind != KindStdio {
			return
		}
		text, err := e.wrap(testProxy)
		if err != nil {
			t.Fatalf("wrap(%s): %v", raw, err)
		}
		if !json.Valid([]byte(text)) {
			t.Fatalf("wrap(%s) = %s: not JSON", raw, text)
		}
		w := parseEntry("srv", text)
		if w.kind != KindWrapped || !slices.Equal(w.upstream(), e.upstream()) {
			t.Fatalf("wrap(%s) = %s: a %s entry running %q, want %q", raw, text, w.kind, w.upstream(), e.upstream())
		}
		if back, err := w.unwrap(); err != nil || back != raw {
			t.Fatalf("unwrap(wrap(%s)) = %s, %v", raw, back, err)
		}
	})
}

// checkRemoteWrap: a remote entry wraps into a wrapped remote entry with the same URL
// and the headers as --header arguments; when its "headers" member was removed,
// unwrap gives back the very same bytes.
func checkRemoteWrap(t *testing.T, e entry) {
	text, err := e.wrap(testProxy)
	if err != nil {
		t.Fatalf("wrap(%s): %v", e.raw, err)
	}
	if !json.Valid([]byte(text)) {
		t.Fatalf("wrap(%s) = %s: not JSON", e.raw, text)
	}
	w := parseEntry("srv", text)
	if w.kind != KindWrappedRemote || w.url != e.url {
		t.Fatalf("wrap(%s) = %s: a %s entry for %q", e.raw, text, w.kind, w.url)
	}
	if e.headersIdx >= 0 && w.headersIdx < 0 {
		if back, err := w.unwrap(); err != nil || back != e.raw {
			t.Fatalf("headers dropped but unwrap(wrap(%s)) = %s, %v", e.raw, back, err)
		}
	}
}
