package userconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func near(w string, known []string) string {
	for _, k := range known {
		if strings.ReplaceAll(k, "-", "") == strings.ReplaceAll(w, "_", "") {
			return k
		}
	}
	return ""
}

func TestParseKeysAndTypes(t *testing.T) {
	home, _ := os.UserHomeDir()
	vals, warns := Parse("c.json", []byte(`{
		"cassette-dir": "~/cassettes",
		"otlp-endpoint": "http://127.0.0.1:4318",
		"otlp-capture": true,
		"pin-tools": "off",
		"read-only": false,
		"max-result-tokens": 20000,
		"log-file": "/var/tmp/bir.log",
		"correlation-key": "_k"
	}`), near)
	if len(warns) != 0 {
		t.Fatalf("warnings: %q", warns)
	}
	got := map[string]string{}
	for _, v := range vals {
		got[v.Key.Name] = v.Value
	}
	want := map[string]string{
		"cassette-dir": filepath.Join(home, "cassettes"), "otlp-endpoint": "http://127.0.0.1:4318", "otlp-capture": "true",
		"pin-tools": "off", "read-only": "false", "max-result-tokens": "20000", "log-file": "/var/tmp/bir.log", "correlation-key": "_k",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %v", got)
	}
}

func TestParseUnknownKey(t *testing.T) {
	vals, warns := Parse("c.json", []byte(`{"pin_tools":"off","zzz":1,"read-only":true}`), near)
	if len(vals) != 1 || vals[0].Key.Name != "read-only" {
		t.Errorf("values %v, want read-only alone", vals)
	}
	if len(warns) != 2 {
		t.Fatalf("warnings %q, want one per unknown key", warns)
	}
	if !strings.Contains(warns[0], `unknown key "pin_tools"`) || !strings.Contains(warns[0], `did you mean "pin-tools"?`) {
		t.Errorf("warning %q: want the key and a did you mean", warns[0])
	}
	if !strings.Contains(warns[1], `unknown key "zzz"`) || strings.Contains(warns[1], "did you mean") {
		t.Errorf("warning %q", warns[1])
	}
}

func TestParseBadJSON(t *testing.T) {
	for _, data := range []string{`{"pin-tools": "off"`, `not json`, `[1,2]`, `null`, `{} {}`, ``} {
		vals, warns := Parse("c.json", []byte(data), near)
		if len(vals) != 0 || len(warns) != 1 || !strings.Contains(warns[0], "c.json is ignored") {
			t.Errorf("%q: values %v, warnings %q; want none and one warning", data, vals, warns)
		}
	}
}

func TestParseWrongTypes(t *testing.T) {
	vals, warns := Parse("c.json", []byte(`{"read-only":"yes","pin-tools":1,"max-result-tokens":"many","log-file":"rel/log","cassette-dir":"","otlp-capture":false}`), near)
	if len(vals) != 1 || vals[0].Key.Name != "otlp-capture" || vals[0].Value != "false" {
		t.Errorf("values %v, want otlp-capture alone", vals)
	}
	if len(warns) != 5 {
		t.Fatalf("warnings %q, want 5", warns)
	}
	for _, k := range []string{"pin-tools", "read-only", "max-result-tokens", "log-file", "cassette-dir"} {
		found := false
		for _, w := range warns {
			found = found || strings.Contains(w, `"`+k+`"`)
		}
		if !found {
			t.Errorf("no warning names %s: %q", k, warns)
		}
	}
	vals, _ = Parse("c.json", []byte(`{"max-result-tokens":" 300 "}`), near)
	if len(vals) != 1 || vals[0].Value != "300" {
		t.Errorf("a number in a string: %v", vals)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	if c := Read(filepath.Join(dir, "none.json"), near); c.Found || len(c.Warnings) != 0 || len(c.Values) != 0 {
		t.Errorf("a missing file: %+v", c)
	}
	if c := Read(dir, near); c.Found || len(c.Warnings) != 1 {
		t.Errorf("a folder: %+v", c)
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, []byte(`{"x":"`+strings.Repeat("a", MaxSize)+`"}`), 0o600)
	if c := Read(big, near); c.Found || len(c.Warnings) != 1 {
		t.Errorf("a large file: %+v", c.Warnings)
	}
	ok := filepath.Join(dir, "ok.json")
	os.WriteFile(ok, []byte(`{"pin-tools":"block"}`), 0o600)
	if c := Read(ok, near); !c.Found || len(c.Values) != 1 {
		t.Errorf("a file: %+v", c)
	} else if v, _ := c.Get("pin-tools"); v != "block" {
		t.Errorf("pin-tools %q", v)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/x/conf")
	if p, _ := DefaultPath(); p != filepath.Join("/x/conf", "bir-proxy", "config.json") {
		t.Errorf("DefaultPath %q", p)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"pin-tools":"off","read-only":true,"max-result-tokens":"12"}`))
	f.Add([]byte(`{"x\u0001":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, warns := Parse("c.json", data, near)
		for _, w := range warns {
			if strings.ContainsAny(w, "\x00\n\r\x1b") {
				t.Fatalf("a control character in %q", w)
			}
		}
	})
}
