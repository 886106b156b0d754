package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// The configuration file (docs/config.md) through the built proxy: a host session in
// front of the raw fixture, in journal mode, with XDG_CONFIG_HOME pointing at a
// folder holding bir-proxy/config.json.

// writeUserConfig writes body as the configuration file of a new XDG_CONFIG_HOME.
func writeUserConfig(t *testing.T, body string) (xdg string) {
	t.Helper()
	xdg = t.TempDir()
	if err := os.MkdirAll(filepath.Join(xdg, "bir-proxy"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(xdg, "bir-proxy", "config.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return xdg
}

// configSession runs one session (initialize, tools/list, one tools/call) with the
// configuration file in xdg and the state folder state; it returns the proxy's stderr.
func configSession(t *testing.T, xdg, state string, env []string, args ...string) string {
	t.Helper()
	raw := testutil.Build(t, "./testdata/rawserver")
	env = append([]string{"BIR_OFF=0", "XDG_STATE_HOME=" + state, "XDG_CONFIG_HOME=" + xdg, "BIR_RECORDER_URL=",
		"BIR_PIN_TOOLS=", "BIR_LOG_LEVEL=", "BIR_CORRELATION_KEY=", "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_SDK_DISABLED=true"}, env...)
	args = append(append([]string{"--server", "conf"}, args...), "--", raw, "--reply")
	s := startProxyIn(t, t.TempDir(), env, args...)
	s.Send(hostInit)
	s.expect("0")
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	s.expect("1")
	if a := s.call(2, "echo", `{"x":1}`); isError(a) {
		t.Fatalf("the call failed: %s", a)
	}
	s.end()
	return s.Stderr.String()
}

// TestUserConfigPinsAndCassette: a file with pin-tools off and a cassette folder is
// honoured: no pins folder, and the server's cassette in the folder, with the call.
func TestUserConfigPinsAndCassette(t *testing.T) {
	t.Parallel()
	cassettes := filepath.Join(t.TempDir(), "cassettes")
	xdg := writeUserConfig(t, `{"pin-tools": "off", "cassette-dir": "`+cassettes+`"}`)
	state := t.TempDir()
	stderr := configSession(t, xdg, state, nil)
	if _, err := os.Stat(filepath.Join(state, "bir-proxy", "pins")); !os.IsNotExist(err) {
		t.Errorf("pin-tools off in the file, yet the pins folder was made: %v\n%s", err, stderr)
	}
	if n := cassetteCalls(t, filepath.Join(cassettes, "conf.jsonl")); n != 1 {
		t.Errorf("the cassette folder's conf.jsonl holds %d calls, want 1\n%s", n, stderr)
	}
	if strings.Contains(stderr, "config.json") {
		t.Errorf("a good file was warned about:\n%s", stderr)
	}
}

// TestUserConfigFlagAndEnvWin: --pin-tools on the command line, and BIR_PIN_TOOLS,
// win over the file's pin-tools off; --cassette over its cassette-dir.
func TestUserConfigFlagAndEnvWin(t *testing.T) {
	t.Parallel()
	cassettes := filepath.Join(t.TempDir(), "cassettes")
	xdg := writeUserConfig(t, `{"pin-tools": "off", "cassette-dir": "`+cassettes+`"}`)
	own := filepath.Join(t.TempDir(), "own.jsonl")
	for name, run := range map[string]func(state string){
		"flag": func(state string) { configSession(t, xdg, state, nil, "--pin-tools", "warn", "--cassette", own) },
		"env":  func(state string) { configSession(t, xdg, state, []string{"BIR_PIN_TOOLS=warn"}) },
	} {
		state := t.TempDir()
		run(state)
		if _, err := os.Stat(filepath.Join(state, "bir-proxy", "pins")); err != nil {
			t.Errorf("%s: pin-tools warn did not win over the file's off: %v", name, err)
		}
	}
	if n := cassetteCalls(t, own); n != 1 {
		t.Errorf("--cassette's file holds %d calls, want 1", n)
	}
	if n := cassetteCalls(t, filepath.Join(cassettes, "conf.jsonl")); n != 1 {
		t.Errorf("the folder's cassette holds %d calls, want the env run's 1 (the flag run records to --cassette)", n)
	}
}

// TestUserConfigBadFileStarts: a file that is not JSON, or holds an unknown key or a
// value the proxy cannot use, is said once on stderr and the proxy still serves.
func TestUserConfigBadFileStarts(t *testing.T) {
	t.Parallel()
	stderr := configSession(t, writeUserConfig(t, `{"pin-tools": "off",`), t.TempDir(), nil)
	if strings.Count(stderr, "config.json is ignored") != 1 {
		t.Errorf("a file that is not JSON: want one warning, stderr:\n%s", stderr)
	}
	stderr = configSession(t, writeUserConfig(t, `{"pin_tools": "off", "log-level": "loud", "read-only": "yes", "max-result-tokens": 5000}`), t.TempDir(), nil)
	for _, want := range []string{`unknown key "pin_tools", ignored; did you mean "pin-tools"?`, `"log-level" "loud" is ignored`, `"read-only" wants true or false`} {
		if strings.Count(stderr, want) != 1 {
			t.Errorf("want %q once, stderr:\n%s", want, stderr)
		}
	}
	// max-result-tokens goes to a flag of that name when this bir-proxy has one.
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	defineProxyFlags(fs)
	if has, said := fs.Lookup("max-result-tokens") != nil, strings.Contains(stderr, "has no --max-result-tokens"); has == said {
		t.Errorf("max-result-tokens: flag defined %v, said ignored %v:\n%s", has, said, stderr)
	}
}

// TestLogFile: --log-file receives the proxy's log lines (0600, its folder made 0700),
// from the command line and from the file's log-file and log-level. The line logged is
// a cassette that cannot be made (under /dev/null), at WARN.
func TestLogFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "logs")
	path := filepath.Join(dir, "proxy.log")
	const unmade = "/dev/null/c.jsonl"
	stderr := configSession(t, writeUserConfig(t, `{}`), t.TempDir(), nil, "--log-file", path, "--log-level", "debug", "--cassette", unmade)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(string(b), `level=WARN msg="no cassette is recorded"`) || !strings.Contains(string(b), "server=conf") {
		t.Errorf("the log file lacks the debug lines:\n%s\nstderr:\n%s", b, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.Contains(stderr, line) {
			t.Errorf("a line of the file is not on stderr: %q", line)
		}
	}
	if fi, _ := os.Stat(path); fi == nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the log file's mode: %v", fi)
	}
	if fi, _ := os.Stat(dir); fi == nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the log folder's mode: %v", fi)
	}

	other := filepath.Join(t.TempDir(), "from-file.log")
	xdg := writeUserConfig(t, `{"log-file": "`+other+`", "log-level": "warn"}`)
	configSession(t, xdg, t.TempDir(), nil, "--cassette", unmade)
	if b, err := os.ReadFile(other); err != nil || !strings.Contains(string(b), "level=WARN") {
		t.Errorf("the file's log-file: %v\n%s", err, b)
	}
	os.Remove(other)
	configSession(t, xdg, t.TempDir(), nil, "--cassette", unmade, "--log-level", "error")
	if b, err := os.ReadFile(other); err != nil || strings.Contains(string(b), "level=WARN") {
		t.Errorf("--log-level error did not win over the file's warn: %v\n%s", err, b)
	}
}

// TestLogFileSymlinkRefused: a symbolic link at --log-file's path is not followed;
// the proxy says so on stderr and serves.
func TestLogFileSymlinkRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep\n"), 0o644)
	link := filepath.Join(dir, "proxy.log")
	if err := os.Symlink(victim, link); err != nil {
		t.Skip(err)
	}
	stderr := configSession(t, writeUserConfig(t, `{}`), t.TempDir(), nil, "--log-file", link, "--log-level", "debug")
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("the link was followed: %q", b)
	}
	if !strings.Contains(stderr, "symbolic link") {
		t.Errorf("not said:\n%s", stderr)
	}
}

// TestLogFileRotates: past its bound, the file becomes FILE.1 (one kept), and a
// proxy whose file another rotated writes to the new one.
func TestLogFileRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	a, err := openLogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := openLogFile(path)
	defer b.Close()
	a.max, b.max = 100, 100
	line := []byte(strings.Repeat("x", 39) + "\n")
	for range 5 { // 200 bytes: two rotations
		a.Write(line)
	}
	b.Write([]byte("b\n"))
	got, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	if string(got) != string(line)+"b\n" || len(old) != 80 {
		t.Errorf("FILE %q, FILE.1 %d bytes; want the last line and b's, and 80 bytes", got, len(old))
	}
	if _, err := os.Stat(path + ".2"); err == nil {
		t.Errorf("more than one rotated file kept")
	}
}

// TestStatusShowsUserConfig: status names the file and the defaults it sets.
func TestStatusShowsUserConfig(t *testing.T) {
	xdg := writeUserConfig(t, `{"pin-tools": "block", "otlp-endpoint": "http://u:secret@127.0.0.1:4318", "pin_tool": 1}`)
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Chdir(t.TempDir())
	_, out, _ := runCmd(t, "status")
	for _, want := range []string{"defaults file: " + filepath.Join(xdg, "bir-proxy", "config.json"), "  pin-tools: block", "  otlp-endpoint: http://", `unknown key "pin_tool"`} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret") {
		t.Errorf("status shows the endpoint's password:\n%s", out)
	}
}
