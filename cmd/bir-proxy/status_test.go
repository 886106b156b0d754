package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/wrapcmd"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/telemetry"
)

// statusProject is a private home and state directory for the built binary, with a
// config file of entries that run it.
func statusProject(t *testing.T, servers string) (p *hostProject, path string) {
	t.Helper()
	p = &hostProject{bin: testutil.Build(t, "./cmd/bir-proxy"), dir: t.TempDir(), home: t.TempDir(), state: t.TempDir()}
	path = filepath.Join(p.dir, "servers.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {`+servers+"\n}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, path
}

// TestStatusBrokenFlag: a hand-written entry with a mistyped bir-proxy flag
// ("--sever") read as wrapped with the command "typo": status said wrapped and
// exited 0, wrap said "already wrapped", and unwrap wrote "command": "typo". Now
// status says BROKEN with the proxy's own words and exits 1, unwrap leaves the entry's
// bytes alone with a warning, and wrap says it is broken.
func TestStatusBrokenFlag(t *testing.T) {
	bin := testutil.Build(t, "./cmd/bir-proxy")
	typo := fmt.Sprintf(`"typo": {"command": %q, "args": ["--sever", "typo", "npx", "-y", "srv"]}`, bin)
	p, path := statusProject(t, "\n  "+typo+fmt.Sprintf(`,
  "good": {"command": %q, "args": ["--server", "good", "uvx", "other"]}`, bin))

	code, out, errOut := p.run(t, "status", "--config", path)
	if code != 1 {
		t.Errorf("status exit %d with a broken entry, want 1\n%s%s", code, out, errOut)
	}
	line := statusLine(out, "typo")
	if !strings.Contains(line, " BROKEN ") || !strings.Contains(line, "(unknown flag --sever; did you mean --server?)") {
		t.Errorf("status line %q\n%s", line, out)
	}
	if l := statusLine(out, "good"); !strings.Contains(l, " wrapped ") {
		t.Errorf("good entry: %q", l)
	}

	code, out, errOut = p.run(t, "status", "--config", path, "--json")
	var report wrapcmd.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 1 || len(report.Entries) != 2 {
		t.Fatalf("status --json: %d %v\n%s%s", code, err, out, errOut)
	}
	if e := report.Entries[0]; !e.Broken || !e.Wrapped || e.Problem != "unknown flag --sever; did you mean --server?" || e.Command != nil {
		t.Errorf("json entry %+v", e)
	}
	if e := report.Entries[1]; e.Broken || e.Name != "good" || e.Server != "good" || strings.Join(e.Command, " ") != "uvx other" {
		t.Errorf("json entry %+v", e)
	}

	code, out, errOut = p.run(t, "wrap", "--config", path, "--proxy-path", bin)
	if code != 0 || strings.Contains(out, "typo: already wrapped") ||
		!strings.Contains(errOut, "typo: BROKEN: bir-proxy would refuse its arguments (unknown flag --sever; did you mean --server?)") {
		t.Errorf("wrap: %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = p.run(t, "unwrap", "--config", path)
	if code != 0 || !strings.Contains(out, "unwrapped good") ||
		!strings.Contains(errOut, "typo: BROKEN: bir-proxy would refuse its arguments (unknown flag --sever; did you mean --server?); left alone") {
		t.Errorf("unwrap: %d\n%s%s", code, out, errOut)
	}
	got := string(readFile(t, path))
	if !strings.Contains(got, typo) || !strings.Contains(got, `"good": {"command": "uvx", "args": ["other"]}`) {
		t.Errorf("after unwrap:\n%s", got)
	}
}

// statusLine is the line of the entry name in status's output ("" if none).
func statusLine(out, name string) string {
	for l := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return l
		}
	}
	return ""
}

// TestStatusCheck: status --check starts each wrapped entry as the host would and
// names what the host would get: a server command that is missing, one that exits at
// once with a message on stderr, one that never answers, a mistyped bir-proxy flag;
// and a good entry is OK with its tool count.
func TestStatusCheck(t *testing.T) {
	bin := testutil.Build(t, "./cmd/bir-proxy")
	raw := testutil.Build(t, "./testdata/rawserver")
	missing := filepath.Join(t.TempDir(), "no-such-server")
	p, path := statusProject(t, fmt.Sprintf(`
  "good": {"command": %[1]q, "args": ["--server", "good", %[2]q, "--reply"], "env": {"RAW_UNUSED": "${HOME}"}},
  "missing": {"command": %[1]q, "args": ["--server", "missing", %[3]q]},
  "dies": {"command": %[1]q, "args": ["--server", "dies", "--no-revive", %[2]q, "--exit-now", "--stderr", "Error: Cannot find module 'srv'\n", "--exit-code", "3"]},
  "silent": {"command": %[1]q, "args": ["--server", "silent", %[2]q]},
  "typo": {"command": %[1]q, "args": ["--sever", "typo", %[2]q, "--reply"]},
  "plain": {"command": %[2]q, "args": ["--reply"]}`, bin, raw, missing))

	code, out, errOut := p.run(t, "status", "--config", path, "--check", "--timeout", "3s")
	if code != 1 {
		t.Errorf("exit %d with failing entries, want 1", code)
	}
	checked := out[strings.Index(out, "started as the host would"):]
	for name, want := range map[string][]string{
		"good":    {"OK (1 tool)"},
		"missing": {"FAILED: ", "cannot start the MCP server", missing, "no such file or directory"},
		"dies":    {"FAILED: ", "status 3", "Error: Cannot find module 'srv'"},
		"silent":  {"FAILED: no answer to initialize within 3s"},
		"typo":    {"FAILED: ", "unknown flag --sever; did you mean --server?"},
	} {
		line := statusLine(checked, name)
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: %q lacks %q", name, line, w)
			}
		}
	}
	if l := statusLine(checked, "plain"); l != "" {
		t.Errorf("an entry that is not wrapped was checked: %q", l)
	}
	if t.Failed() {
		t.Logf("status --check:\n%s%s", out, errOut)
	}

	code, out, errOut = p.run(t, "status", "--config", path, "--check", "--timeout", "3s", "--json")
	var report wrapcmd.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 1 {
		t.Fatalf("status --check --json: %d %v\n%s%s", code, err, out, errOut)
	}
	for _, e := range report.Entries {
		switch {
		case e.Name == "plain":
			if e.Check != nil || e.Wrapped {
				t.Errorf("plain: %+v", e)
			}
		case e.Check == nil:
			t.Errorf("%s: no check", e.Name)
		case e.Name == "good":
			if !e.Check.OK || e.Check.Tools != 1 || e.Check.Error != "" {
				t.Errorf("good: %+v", *e.Check)
			}
		default:
			if e.Check.OK || e.Check.Error == "" {
				t.Errorf("%s: %+v", e.Name, *e.Check)
			}
		}
	}
}

// TestStatusTelemetryOfThisProject: two projects share a home and a state directory,
// and the exporters of servers of both (and of one in no file) left their counts.
// status in the first project listed every server's telemetry on the machine; now it
// shows the servers of the files it looked at (by --server name, the default the
// proxy would take, or the entry's name), says in one line how many others there are,
// and --all shows them all.
func TestStatusTelemetryOfThisProject(t *testing.T) {
	bin := testutil.Build(t, "./cmd/bir-proxy")
	a := &hostProject{bin: bin, dir: t.TempDir(), home: t.TempDir(), state: t.TempDir()}
	b := &hostProject{bin: bin, dir: t.TempDir(), home: a.home, state: a.state}
	for dir, servers := range map[string]string{
		// alpha: --server; renamed: reports as "old-name"; gh: no --server, so
		// the default of its command; plain: not wrapped, by its name.
		a.dir: fmt.Sprintf(`"alpha": {"command": %[1]q, "args": ["--server", "alpha", "uvx", "a"]},
  "renamed": {"command": %[1]q, "args": ["--server", "old-name", "uvx", "r"]},
  "gh": {"command": %[1]q, "args": ["npx", "-y", "@modelcontextprotocol/server-github"]},
  "plain": {"command": "uvx", "args": ["p"]}`, bin),
		b.dir: fmt.Sprintf(`"beta": {"command": %q, "args": ["--server", "beta", "uvx", "b"]}`, bin),
	} {
		if err := os.WriteFile(filepath.Join(dir, ".mcp.json"), []byte("{\"mcpServers\": {\n  "+servers+"\n}}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(a.state, "bir-proxy")
	now := time.Now()
	for _, server := range []string{"alpha", "old-name", "server-github", "plain", "beta", "elsewhere"} {
		st := telemetry.State{Server: server, PID: 1, Written: now, Exported: 7}
		if err := telemetry.WriteState(telemetry.StatePath(state, server), st); err != nil {
			t.Fatal(err)
		}
	}
	otelLines := func(out string) (names []string, rest string) {
		for l := range strings.SplitSeq(out, "\n") {
			if name, ok := strings.CutPrefix(l, "OpenTelemetry: "); ok {
				if name, _, ok := strings.Cut(name, ": 7 spans exported"); ok {
					names = append(names, name)
				} else {
					rest += l + "\n"
				}
			}
		}
		return names, rest
	}

	_, out, errOut := a.run(t, "status")
	names, rest := otelLines(out)
	if got := strings.Join(names, " "); got != "alpha old-name plain server-github" {
		t.Errorf("status in the first project: telemetry of %q, want alpha old-name plain server-github\n%s%s", got, out, errOut)
	}
	if rest != "OpenTelemetry: 2 other servers have telemetry state on this machine (bir-proxy status --all shows them)\n" {
		t.Errorf("the line of the others: %q\n%s", rest, out)
	}

	_, out, _ = b.run(t, "status")
	if names, rest := otelLines(out); strings.Join(names, " ") != "beta" || !strings.Contains(rest, "5 other servers") {
		t.Errorf("status in the second project: %q %q\n%s", names, rest, out)
	}

	_, out, _ = a.run(t, "status", "--all")
	if names, rest := otelLines(out); strings.Join(names, " ") != "alpha beta elsewhere old-name plain server-github" || rest != "" {
		t.Errorf("status --all: %q %q\n%s", names, rest, out)
	}
}
