package recorder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeDiscovery(t *testing.T, dir, content string) string {
	t.Helper()
	p := filepath.Join(dir, ".bir", "recorder.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDiscoverOrder(t *testing.T) {
	root := t.TempDir()
	file := writeDiscovery(t, root, `{"url":"http://127.0.0.1:7001","token":"file-token","pid":42}`)
	deep := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{EnvRecorderURL: "http://127.0.0.1:7002", EnvRecorderToken: "env-token"})
	noEnv := envOf(nil)

	for _, tc := range []struct {
		name                     string
		opts                     DiscoverOptions
		url, token, source, file string
	}{
		{"flag wins, token from env", DiscoverOptions{Flag: "http://127.0.0.1:7003", Env: env, Dir: deep},
			"http://127.0.0.1:7003", "env-token", SourceFlag, ""},
		{"flag with the file's URL takes the file's token", DiscoverOptions{Flag: "http://127.0.0.1:7001/", Env: noEnv, Dir: deep},
			"http://127.0.0.1:7001", "file-token", SourceFlag, file},
		{"flag with another URL takes no token", DiscoverOptions{Flag: "http://127.0.0.1:7003", Env: noEnv, Dir: deep},
			"http://127.0.0.1:7003", "", SourceFlag, ""},
		{"env before the file", DiscoverOptions{Env: env, Dir: deep},
			"http://127.0.0.1:7002", "env-token", SourceEnv, ""},
		{"file in the nearest parent", DiscoverOptions{Env: noEnv, Dir: deep},
			"http://127.0.0.1:7001", "file-token", file, file},
		{"nil Env reads none", DiscoverOptions{Dir: root},
			"http://127.0.0.1:7001", "file-token", file, file},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, err := Discover(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if ep == nil || ep.URL != tc.url || ep.Token != tc.token || ep.Source != tc.source || ep.file != tc.file {
				t.Errorf("got %+v", ep)
			}
		})
	}

	// The nearest file wins over one further up.
	nearer := writeDiscovery(t, filepath.Join(root, "a"), `{"url":"http://localhost:7009","token":"near"}`)
	ep, err := Discover(DiscoverOptions{Env: noEnv, Dir: deep})
	if err != nil || ep.Source != nearer || ep.Token != "near" {
		t.Errorf("nearest file: %+v, %v", ep, err)
	}

	// Nothing configured: journal mode.
	ep, err = Discover(DiscoverOptions{Env: noEnv, Dir: t.TempDir()})
	if ep != nil || err != nil {
		t.Errorf("nothing configured gave %+v, %v", ep, err)
	}
}

func TestDiscoverLoopbackRule(t *testing.T) {
	for url, loopback := range map[string]bool{
		"http://127.0.0.1:7777":     true,
		"http://127.8.9.10:7777":    true,
		"http://[::1]:7777":         true,
		"http://localhost:7777":     true,
		"http://LOCALHOST:7777":     true,
		"http://[::ffff:127.0.0.1]": true,
		"https://127.0.0.1/base/":   true,
		"http://10.0.0.1:7777":      false,
		"http://192.168.1.5":        false,
		"http://example.com":        false,
		"http://localhost.evil.com": false,
		"http://[::2]:7777":         false,
		"http://0.0.0.0:7777":       false,
	} {
		env := envOf(map[string]string{EnvRecorderURL: url})
		ep, err := Discover(DiscoverOptions{Env: env})
		if loopback && (err != nil || ep == nil) {
			t.Errorf("%s refused: %v", url, err)
		}
		if !loopback && (err == nil || !strings.Contains(err.Error(), "--allow-remote-recorder")) {
			t.Errorf("%s: want an error naming --allow-remote-recorder, got %+v, %v", url, ep, err)
		}
		if ep, err := Discover(DiscoverOptions{Env: env, AllowRemote: true}); err != nil || ep == nil {
			t.Errorf("%s with AllowRemote: %v", url, err)
		}
	}
	if ep, _ := Discover(DiscoverOptions{Flag: "https://127.0.0.1/base/"}); ep.URL != "https://127.0.0.1/base" {
		t.Errorf("trailing slash kept: %q", ep.URL)
	}
	for _, bad := range []string{"ftp://127.0.0.1", "127.0.0.1:7777", "http://"} {
		if _, err := Discover(DiscoverOptions{Flag: bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// The file obeys the same rule.
	dir := t.TempDir()
	writeDiscovery(t, dir, `{"url":"http://10.1.1.1:80","token":"x"}`)
	if _, err := Discover(DiscoverOptions{Dir: dir}); err == nil {
		t.Error("remote URL from the discovery file accepted")
	}
	writeDiscovery(t, dir, `{not json`)
	if _, err := Discover(DiscoverOptions{Dir: dir}); err == nil || !strings.Contains(err.Error(), "recorder.json") {
		t.Errorf("broken discovery file: %v", err)
	}
}
