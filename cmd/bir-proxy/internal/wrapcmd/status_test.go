package wrapcmd

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/mcpconfig"
	"github.com/bir-dev/bir-proxy/telemetry"
)

// TestPrintServersColumns: a name wider than the others moves the state column for
// every row, and nothing a file's entry holds reaches the terminal as a control
// character: a name with an escape sequence or a tab (which would have split the
// row into two cells), a BROKEN reason with one, a proxy command with one. They are
// shown as termtext escapes them (\x1b), not as '?' (which hid which byte it was).
func TestPrintServersColumns(t *testing.T) {
	servers := []mcpconfig.Server{
		{Name: "a", Kind: mcpconfig.KindStdio, Command: []string{"uvx", "a"}},
		{Name: "a-much-wider-server-name", Kind: mcpconfig.KindWrapped, Command: []string{"npx", "-y", "srv"}, ProxyCommand: "bir-proxy"},
		{Name: "evil\x1b[2J\tname", Kind: mcpconfig.KindStdio, Command: []string{"x"}},
		{Name: "typo", Kind: mcpconfig.KindWrapped, Broken: "unknown flag --se\x1b]0;t\x07ver", Args: []string{"--se\x1b]0;t\x07ver", "typo"}},
		{Name: "gone", Kind: mcpconfig.KindWrapped, Command: []string{"y"}, ProxyCommand: "/bin/bir\x1b[31m"},
	}
	checks := map[string]proxyCheck{"/bin/bir\x1b[31m": {err: errors.New("missing")}, "bir-proxy": {version: "bir-proxy 1"}}
	var b strings.Builder
	printServers(&b, servers, checks)
	out := b.String()
	if strings.ContainsFunc(out, func(r rune) bool { return r < 0x20 && r != '\n' || r == 0x7f }) {
		t.Errorf("a control character printed:\n%q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(servers) {
		t.Fatalf("%d lines for %d servers:\n%s", len(lines), len(servers), out)
	}
	for i, want := range []string{
		"  a                         not wrapped  uvx a",
		"  a-much-wider-server-name  wrapped      npx -y srv",
		`  evil\x1b[2J\x09name       not wrapped  x`,
		`  typo                      BROKEN       (unknown flag --se\x1b]0;t\x07ver)  bir-proxy "--se\x1b]0;t\aver" typo`,
		`  gone                      BROKEN       y  (/bin/bir\x1b[31m does not run)`,
	} {
		if lines[i] != want {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], want)
		}
	}
}

// TestPrintChecksEscapes: a check's error is a peer's words (the server's stderr, its
// error message): its control characters are escaped, a newline too, so one entry is
// one line.
func TestPrintChecksEscapes(t *testing.T) {
	servers := []mcpconfig.Server{{Name: "ok"}, {Name: "bad\x1b"}}
	var b strings.Builder
	printChecks(&b, servers, map[int]EntryCheck{0: {OK: true, Tools: 1}, 1: {Error: "boom\x1b[2J\nsecond line"}})
	want := "  started as the host would (initialize, tools/list):\n" +
		"    ok       OK (1 tool)\n" +
		`    bad\x1b  FAILED: boom\x1b[2J\x0asecond line` + "\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := capText("x\x07" + strings.Repeat("é", 4<<10)); !strings.HasPrefix(got, `x\x07é`) || !strings.HasSuffix(got, "é…") || len(got) > 4<<10+8 {
		t.Errorf("capText: %d bytes, %q…", len(got), got[:10])
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		-time.Second:                    "0s",
		1500 * time.Millisecond:         "2s",
		90*time.Minute + 20*time.Second: "1h30m0s",
		50 * time.Hour:                  "2 days",
	} {
		if got := age(now, now.Add(-d)); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestReportNames: the names an entry's proxy may leave its telemetry state under:
// its --server name, or without one the name the proxy takes by default, and the
// entry's own name.
func TestReportNames(t *testing.T) {
	for _, c := range []struct {
		s    mcpconfig.Server
		want string
	}{
		{mcpconfig.Server{Name: "gh", Kind: mcpconfig.KindWrapped, ProxyName: "github", Command: []string{"npx", "-y", "@modelcontextprotocol/server-github"}}, "gh github"},
		{mcpconfig.Server{Name: "gh", Kind: mcpconfig.KindWrapped, Command: []string{"npx", "-y", "@modelcontextprotocol/server-github"}}, "gh server-github"},
		{mcpconfig.Server{Name: "sentry", Kind: mcpconfig.KindWrappedRemote, URL: "https://mcp.sentry.dev/mcp"}, "sentry mcp.sentry.dev"},
		{mcpconfig.Server{Name: "fetch", Kind: mcpconfig.KindStdio, Command: []string{"uvx", "mcp-server-fetch"}}, "fetch"},
	} {
		if got := strings.Join(reportNames(c.s), " "); got != c.want {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
}

// TestOTelStatusOfTheNamedServers: with names, the states of those servers are
// shown and the others counted in one line; with none (--all), every state.
func TestOTelStatusOfTheNamedServers(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	now := time.Now()
	for _, s := range []string{"mine", "theirs", "another"} {
		if err := telemetry.WriteState(telemetry.StatePath(filepath.Join(state, "bir-proxy"), s), telemetry.State{Server: s, Written: now, Dropped: 2}); err != nil {
			t.Fatal(err)
		}
	}
	line := func(s string) string {
		return "OpenTelemetry: " + s + ": 0 spans exported, 2 dropped, 0 rejected by the collector; said at its exit, 0s ago\n"
	}
	if got, want := otelStatus(now, map[string]bool{"mine": true, "gone": true}), line("mine")+
		"OpenTelemetry: 2 other servers have telemetry state on this machine (bir-proxy status --all shows them)\n"; got != want {
		t.Errorf("of mine:\n%s\nwant\n%s", got, want)
	}
	if got, want := otelStatus(now, map[string]bool{"mine": true, "theirs": true}), line("mine")+line("theirs")+
		"OpenTelemetry: 1 other server has telemetry state on this machine (bir-proxy status --all shows them)\n"; got != want {
		t.Errorf("of two:\n%s\nwant\n%s", got, want)
	}
	if got, want := otelStatus(now, nil), line("another")+line("mine")+line("theirs"); got != want {
		t.Errorf("all:\n%s\nwant\n%s", got, want)
	}
	if got := otelStatus(now, map[string]bool{}); got != "OpenTelemetry: 3 other servers have telemetry state on this machine (bir-proxy status --all shows them)\n" {
		t.Errorf("of no server: %q", got)
	}
}
