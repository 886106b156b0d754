package redact

import (
	"slices"
	"strings"
	"testing"
)

// -p VALUE is the password flag of mysql, mariadb, sshpass and others; it is also the
// port of psql, ssh and redis-cli and mkdir's "parents", so those shapes stay.
func TestTextShortPasswordFlag(t *testing.T) {
	checkText(t, []textCase{
		{name: "mysql", in: "mysql -u root -p hunter2 app", gone: []string{"hunter2"}, kept: []string{"mysql -u root -p ", " app"}},
		{name: "sshpass", in: "sshpass -p 'two words' ssh host", gone: []string{"two words"}, kept: []string{"ssh host"}},
		{name: "start", in: "-p s3cr3t", gone: []string{"s3cr3t"}},
		{name: "in a command string", in: `run("mysqldump -p Pa55 db")`, gone: []string{"Pa55"}, kept: []string{" db"}},
		{name: "port", in: "psql -h db -p 5432 -U app", intact: true},
		{name: "ssh port", in: "ssh -p 2222 host", intact: true},
		{name: "port mapping", in: "docker run -p 8080:80 -p 127.0.0.1:53:53/udp img", intact: true},
		{name: "mkdir", in: "mkdir -p build/out && cd build", intact: true},
		{name: "mkdir path", in: "mkdir -p /tmp/x", intact: true},
		{name: "path", in: "tool -p ./profile.json", intact: true},
		{name: "next flag", in: "mysql -p -h db", intact: true},
		{name: "variable", in: "mysql -p $DB_PASS", intact: true},
		{name: "not a flag", in: "top-p 0.9 and step -pause", intact: true},
	})
}

func TestReportSecretHeaderPairs(t *testing.T) {
	in := `{"headers":[["X-Api-Key","v1"],["Accept","application/json"],["Authorization","Basic dXNlcjpwdw=="],` +
		`["cookie","sid=v3"],["x-auth-token",{"v":"v4"}]],"words":["token","alpha","beta"],` +
		`"cmd":["mysql","-u","root","-p","v5","-h","db"],"port":["psql","-p","5432"]}`
	out, _ := report(t, []byte(in), DefaultBudget)
	for _, s := range []string{"v1", "dXNlcjpwdw", "v3", "v4", "v5"} {
		if strings.Contains(out, s) {
			t.Errorf("%s holds %q", out, s)
		}
	}
	for _, s := range []string{`["Accept","application/json"]`, `["X-Api-Key","[REDACTED]"]`, `["token","alpha","beta"]`,
		`"-h","db"`, `["psql","-p","5432"]`} {
		if !strings.Contains(out, s) {
			t.Errorf("%s lost %q", out, s)
		}
	}
}

func TestLabel(t *testing.T) {
	tok := fake("ghp_", 36)
	for _, c := range []struct{ in, want string }{
		{"create_issue", "create_issue"},
		{tok, Redacted},
		{"call-" + tok, "call-" + Redacted},
		{"password=hunter2", "password=" + Redacted},
		{strings.Repeat("é", 200), strings.Repeat("é", 126) + "…"},
	} {
		if got := Label(c.in, 256); got != c.want {
			t.Errorf("Label(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// A token across the cut is still seen whole.
	long := strings.Repeat("x", 240) + " " + tok
	if got := Label(long, 256); strings.Contains(got, tok[:10]) || len(got) > 256 {
		t.Errorf("Label cut a token in two and kept its start: %q", got)
	}
	if got := Label(strings.Repeat("a", 1<<20), 256); len(got) > 256 {
		t.Errorf("Label of 1 MiB: %d bytes", len(got))
	}
}

func TestCommandLine(t *testing.T) {
	ant := fake("sk-ant-api03-", 90)
	ghp := fake("ghp_", 36)
	for _, c := range []struct {
		name     string
		in, want []string
	}{
		{"anthropic key alone", []string{"server", ant}, []string{"server", Redacted}},
		{"postgres dsn", []string{"mcp-postgres", "postgresql://app:S3cret@db:5432/app"}, []string{"mcp-postgres", "postgresql://app:" + Redacted + "@db:5432/app"}},
		{"github token flag", []string{"gh-mcp", "--github-token", ghp}, []string{"gh-mcp", "--github-token", Redacted}},
		{"password pair", []string{"srv", "--password", "hunter2", "--port", "80"}, []string{"srv", "--password", Redacted, "--port", "80"}},
		{"single dash", []string{"srv", "-password", "hunter2"}, []string{"srv", "-password", Redacted}},
		{"-p", []string{"mysql", "-u", "root", "-p", "hunter2"}, []string{"mysql", "-u", "root", "-p", Redacted}},
		{"-p port", []string{"psql", "-p", "5432"}, []string{"psql", "-p", "5432"}},
		{"token=", []string{"srv", "--token=abc123"}, []string{"srv", "--token=" + Redacted}},
		{"env style", []string{"env", "API_KEY=k3y", "GITHUB_TOKEN=" + ghp, "HOME=/root", "node", "s.js"},
			[]string{"env", "API_KEY=" + Redacted, "GITHUB_TOKEN=" + Redacted, "HOME=/root", "node", "s.js"}},
		{"docker -e", []string{"docker", "run", "-e", "SLACK_BOT_TOKEN=xoxb-1", "img"}, []string{"docker", "run", "-e", "SLACK_BOT_TOKEN=" + Redacted, "img"}},
		{"sh -c", []string{"sh", "-c", "exec server --api-key k3y --v"}, []string{"sh", "-c", "exec server --api-key " + Redacted + " --v"}},
		{"secret flag then flag", []string{"srv", "--auth", "--verbose"}, []string{"srv", "--auth", "--verbose"}},
		{"variable", []string{"srv", "--token", "${TOKEN}"}, []string{"srv", "--token", "${TOKEN}"}},
		{"plain", []string{"npx", "-y", "@modelcontextprotocol/server-github"}, []string{"npx", "-y", "@modelcontextprotocol/server-github"}},
		{"empty", nil, nil},
	} {
		got := CommandLine(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: CommandLine(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
	in := []string{"srv", "--password", "x"}
	CommandLine(in)
	if in[2] != "x" {
		t.Error("CommandLine changed its argument")
	}
}

// TestLongQuotedKeyIsAKey: a quoted key longer than the 64 bytes looked back over
// still names a secret by its last words, so its value is redacted; Text stays
// idempotent (the value was redacted only on a second pass, once the first had
// shortened the key: FuzzReportProperties).
func TestLongQuotedKeyIsAKey(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("0", 64) + `"` + strings.Repeat("0", 31) + "token=" + strings.Repeat("0", 27) + `":00`,
		`{"` + strings.Repeat("x", 80) + `_api_token": "s3cr3t-value"}`,
	} {
		once := Text(in)
		if twice := Text(once); twice != once {
			t.Errorf("Text is not idempotent:\n in   %q\n once %q\n twice %q", in, once, twice)
		}
		if strings.HasSuffix(once, `":00`) || strings.Contains(once, "s3cr3t") {
			t.Errorf("the value under a long secret key was kept: %q", once)
		}
	}
}
