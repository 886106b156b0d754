package servername

import (
	"strings"
	"testing"
)

func TestDefaultServerName(t *testing.T) {
	for cmd, want := range map[string]string{
		"npx -y @modelcontextprotocol/server-github":                                          "server-github",
		"npx --yes @playwright/mcp@latest":                                                    "mcp",
		"npx -y -p @scope/tools tools-mcp":                                                    "tools-mcp",
		"npx -y -- mcp-remote https://mcp.example.com/sse":                                    "mcp-remote",
		"bunx @upstash/context7-mcp":                                                          "context7-mcp",
		"pnpm dlx @modelcontextprotocol/server-filesystem /tmp":                               "server-filesystem",
		"yarn dlx server-x":                                                                   "server-x",
		"npm exec -- @modelcontextprotocol/server-memory":                                     "server-memory",
		"uvx mcp-server-git":                                                                  "mcp-server-git",
		"uvx mcp-server-fetch==0.6.2 --ignore-robots-txt":                                     "mcp-server-fetch",
		"uvx --python 3.12 --from git+https://github.com/x/y.git y-server":                    "y-server",
		"uv tool run mcp-server-time":                                                         "mcp-server-time",
		"uv run --with mcp[cli] --directory /srv/weather weather.py":                          "weather",
		"uv run python -m mcp_server_time":                                                    "mcp_server_time",
		"pipx run mcp-server-sqlite --db x.db":                                                "mcp-server-sqlite",
		"python -m mcp_server_time --local-timezone UTC":                                      "mcp_server_time",
		"python3.12 -u /srv/tools/weather.py":                                                 "weather",
		"node /Users/me/weather/build/index.js":                                               "weather",
		"node --env-file .env dist/main.js":                                                   "main",
		"node script.js":                                                                      "script",
		"tsx src/server.ts":                                                                   "server",
		"deno run -A jsr:@scope/mcp-deno":                                                     "mcp-deno",
		"docker run -i --rm -e GITHUB_PERSONAL_ACCESS_TOKEN ghcr.io/github/github-mcp-server": "github-mcp-server",
		"docker run -i --rm -e DATABASE_URL mcp/postgres -- --read-only":                      "postgres",
		"docker --context remote run -i -v /a:/b --name=x mcp/fetch:1.2":                      "fetch",
		"podman run -it --rm quay.io/x/y@sha256:abcd":                                         "y",
		"cmd /c npx -y @modelcontextprotocol/server-everything":                               "server-everything",
		`C:\Program Files\nodejs\npx.cmd -y @x/win-server`:                                    "win-server",
		"env FOO=1 -u BAR uvx mcp-server-git":                                                 "mcp-server-git",
		"sh -c 'npx -y @x/in-shell'":                                                          "in-shell",
		"java -jar /opt/mcp/jira-mcp-1.0.jar":                                                 "jira-mcp-1.0",
		"go run github.com/x/y/cmd/mcp-thing@latest":                                          "mcp-thing",
		"/usr/local/bin/my-mcp-server --flag":                                                 "my-mcp-server",
		"bin.exe":                                                                             "bin",
		"npx":                                                                                 "npx",
		"docker ps":                                                                           "docker",
	} {
		argv := strings.Fields(strings.ReplaceAll(cmd, "'", ""))
		if strings.HasPrefix(cmd, `C:\`) {
			argv = []string{`C:\Program Files\nodejs\npx.cmd`, "-y", "@x/win-server"}
		}
		if strings.HasPrefix(cmd, "sh -c") {
			argv = []string{"sh", "-c", "npx -y @x/in-shell"}
		}
		if got := Default(argv); got != want {
			t.Errorf("%s: %q, want %q", cmd, got, want)
		}
	}
}

// FuzzServerName: any command line gets a name, never empty, never one that
// would make a path or carry a control character into a log.
func FuzzServerName(f *testing.F) {
	for _, s := range []string{"npx\x00-y\x00@a/b", "docker\x00run\x00-e", "node\x00/x/build/index.js", "cmd\x00/c", "env\x00env\x00env", "\x00", "uvx\x00--from"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmdline string) {
		name := Default(strings.Split(cmdline, "\x00"))
		if name == "" || strings.ContainsAny(name, `/\`) || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			t.Fatalf("%q named %q", cmdline, name)
		}
	})
}
