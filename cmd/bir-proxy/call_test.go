package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

type callWorld struct {
	t       *testing.T
	bp, raw string
	dir     string
	state   string
}

func newCallWorld(t *testing.T) *callWorld {
	_, state := isolate(t)
	return &callWorld{t: t, bp: testutil.Build(t, "./cmd/bir-proxy"), raw: testutil.Build(t, "./testdata/rawserver"), dir: t.TempDir(), state: state}
}

// run runs bir-proxy with args and returns its exit code, stdout and stderr.
func (w *callWorld) run(args ...string) (int, string, string) {
	w.t.Helper()
	p := testutil.Start(w.t, exec.Command(w.bp, args...))
	p.Stdin.Close()
	out := p.ReadRest()
	return p.ExitCode(), string(out), p.Stderr.String()
}

// journal is the reports the journal of server holds.
func (w *callWorld) journal(server string) []map[string]any {
	w.t.Helper()
	b, _ := os.ReadFile(filepath.Join(w.state, "bir-proxy", "journal", server+".jsonl"))
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			w.t.Fatalf("journal line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestCallCmdTextResultAndJournal(t *testing.T) {
	w := newCallWorld(t)
	code, out, errs := w.run("call", "--server", "raw", "echo", "text=hello", "n=5", "flag=true", "zip=007", "obj={\"k\":[1]}", "eq=a=b", "--", w.raw, "--reply")
	// rawserver's echo answers the raw arguments as text.
	if want := `{"text":"hello","n":5,"flag":true,"zip":"007","obj":{"k":[1]},"eq":"a=b"}` + "\n"; code != 0 || out != want {
		t.Fatalf("exit %d, stdout %q, want %q; stderr %s", code, out, want, errs)
	}
	j := w.journal("raw")
	if len(j) != 1 || j[0]["tool"] != "echo" || j[0]["outcome"] != "ok" || j[0]["dispatchId"] != nil {
		t.Fatalf("journal %v", j)
	}
	if a, _ := json.Marshal(j[0]["args"]); !strings.Contains(string(a), `"text":"hello"`) {
		t.Errorf("journal args %s", a)
	}
}

func TestCallCmdJSONArgsAndFlagsAfterTool(t *testing.T) {
	w := newCallWorld(t)
	code, out, errs := w.run("call", "--json", "add", "--args", `{"a":2,"b":40}`, "b=1", "--", w.raw, "--reply")
	if want := `{"content":[{"type":"text","text":"{\"a\":2,\"b\":1}"}],"isError":false}` + "\n"; code != 0 || out != want {
		t.Fatalf("exit %d, stdout %q, want %q; stderr %s", code, out, want, errs)
	}
	// A server's control characters reach the terminal escaped, in text as in JSON.
	// (rawserver's text is the raw arguments: a raw U+202E in a string, valid JSON.)
	code, out, _ = w.run("call", "echo", "t=\u202e", "--", w.raw, "--reply")
	if code != 0 || strings.Contains(out, "\u202e") || !strings.Contains(out, `\u202e`) {
		t.Errorf("text: exit %d %q", code, out)
	}
	code, out, _ = w.run("call", "--json", "echo", "t=\u202e", "--", w.raw, "--reply")
	if code != 0 || strings.Contains(out, "\u202e") || !json.Valid([]byte(out)) {
		t.Errorf("json: exit %d %q", code, out)
	}
}

func TestCallCmdListMakesNoCall(t *testing.T) {
	w := newCallWorld(t)
	rec := filepath.Join(w.dir, "server.log")
	tools := filepath.Join(w.dir, "tools")
	os.WriteFile(tools, []byte("echo\nadd\n"), 0o600)
	code, out, errs := w.run("call", "--list", "--", w.raw, "--reply", "--tools-file", tools, "--record", rec)
	if code != 0 || out != "echo\nadd\n" {
		t.Fatalf("exit %d, stdout %q; stderr %s", code, out, errs)
	}
	if b, _ := os.ReadFile(rec); strings.Contains(string(b), "tools/call") {
		t.Errorf("--list made a call:\n%s", b)
	}
	if j := w.journal(filepath.Base(w.raw)); len(j) != 0 {
		t.Errorf("--list recorded %v", j)
	}
}

func TestCallCmdScriptRunsEveryStep(t *testing.T) {
	w := newCallWorld(t)
	script := filepath.Join(w.dir, "steps.json")
	os.WriteFile(script, []byte(`[{"tool":"fail"},{"list_tools":true},{"tool":"echo","arguments":{"x":1}}]`), 0o600)
	code, out, errs := w.run("call", "--server", "raw", "--script", script, "--", w.raw, "--reply")
	if code != 1 || !strings.Contains(out, "fail tool failed as asked\n") || !strings.HasSuffix(out, "echo\n{\"x\":1}\n") ||
		!strings.Contains(errs, "step 1: fail: the tool failed") {
		t.Fatalf("exit %d, stdout %q; stderr %s", code, out, errs)
	}
	if j := w.journal("raw"); len(j) != 2 || j[0]["outcome"] != "tool_error" || j[1]["outcome"] != "ok" {
		t.Errorf("journal %v", j)
	}
	// All steps well: 0.
	os.WriteFile(script, []byte(`[{"tool":"echo","arguments":{"a":1}},{"list_tools":true},{"tool":"echo"}]`), 0o600)
	if code, out, errs := w.run("call", "--script", script, "--", w.raw, "--reply"); code != 0 || out != "{\"a\":1}\necho\n\n" {
		t.Errorf("exit %d, stdout %q; stderr %s", code, out, errs)
	}
	// A step with a misspelt member runs nothing: usage.
	os.WriteFile(script, []byte(`[{"tool":"echo","argumnets":{}}]`), 0o600)
	if code, _, errs := w.run("call", "--script", script, "--", w.raw, "--reply"); code != 2 || !strings.Contains(errs, "argumnets") {
		t.Errorf("misspelt: exit %d %s", code, errs)
	}
}

// received is the arguments of each tools/call rawserver recorded in rec, as received.
func received(t *testing.T, rec string) []string {
	t.Helper()
	b, _ := os.ReadFile(rec)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		var m struct {
			Method string
			Params struct{ Arguments json.RawMessage }
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Method == "tools/call" {
			out = append(out, string(m.Params.Arguments))
		}
	}
	return out
}

// yamlSteps and jsonSteps are one script in YAML and in JSON: two steps, nested
// arguments, YAML's own spellings (0x1F, a date, a bare string) and a number past
// 2^53 whose digits are kept.
const (
	yamlSteps = `# two calls
- tool: echo
  arguments:
    text: "h\u00e9llo"
    big: 12345678901234567890123
    hex: 0x1F
    f: 1.5
    ok: true
    none: ~
    zip: "007"
    nested: {list: [1, two, {three: 3}], empty: {}}
- tool: echo
  arguments:
    when: 2026-01-02
    deep: {a: {b: [-.5, 1_000]}}
`
	jsonSteps = `[{"tool":"echo","arguments":{"text":"héllo","big":12345678901234567890123,"hex":31,"f":1.5,"ok":true,"none":null,"zip":"007","nested":{"list":[1,"two",{"three":3}],"empty":{}}}},
{"tool":"echo","arguments":{"when":"2026-01-02","deep":{"a":{"b":[-0.5,1000]}}}}]`
)

// A YAML script (named .yaml or .yml, or neither and not starting with "[" or "{")
// reaches the server as the JSON script it means: the same arguments received.
func TestCallCmdScriptYAML(t *testing.T) {
	w := newCallWorld(t)
	run := func(name, text string) (string, []string) {
		t.Helper()
		script := filepath.Join(w.dir, name)
		rec := filepath.Join(w.dir, name+".rec")
		os.WriteFile(script, []byte(text), 0o600)
		code, out, errs := w.run("call", "--script", script, "--", w.raw, "--reply", "--record", rec)
		if code != 0 {
			t.Fatalf("%s: exit %d, stdout %q; stderr %s", name, code, out, errs)
		}
		return out, received(t, rec)
	}
	jsonOut, jsonArgs := run("steps.json", jsonSteps)
	if len(jsonArgs) != 2 {
		t.Fatalf("JSON script: the server received %q", jsonArgs)
	}
	for _, name := range []string{"steps.yaml", "steps.yml", "steps"} {
		out, args := run(name, yamlSteps)
		// The JSON script's arguments are compact: the bytes are the same.
		if strings.Join(args, "\n") != strings.Join(jsonArgs, "\n") || out != jsonOut {
			t.Errorf("%s: the server received\n%s\nfrom the JSON script\n%s", name, strings.Join(args, "\n"), strings.Join(jsonArgs, "\n"))
		}
	}
	if !strings.Contains(jsonArgs[0], `"big":12345678901234567890123`) {
		t.Errorf("big number: %s", jsonArgs[0])
	}
}

// A YAML key that is not a string (JSON has none) refuses the script before anything
// runs, naming the step and line; so does a YAML file past its bound (1 MiB).
func TestCallCmdScriptYAMLRefused(t *testing.T) {
	w := newCallWorld(t)
	rec := filepath.Join(w.dir, "rec")
	for _, c := range []struct{ text, want string }{
		{"- tool: echo\n  arguments: {a: 1}\n- tool: echo\n  arguments:\n    1: one\n", `step 2 (line 5): the key "1" is not a string`},
		{"- tool: echo\n  arguments: {b: !!binary aGk=}\n", "step 1 (line 2): !!binary is not read"},
		{"- tool: echo\n  argumnets: {a: 1}\n", `step 1: json: unknown field "argumnets"`},
		// The script's text in a message is escaped: an ESC in a member's name.
		{"- tool: echo\n  \"\\e]52;c;eA==\\a\": 1\n", `unknown field "\x1b]52;c;eA==\a"`},
		{"- tool: echo\n  arguments: {pad: '" + strings.Repeat("x", 1<<20) + "'}\n", "a YAML script larger than 1 MiB"},
	} {
		script := filepath.Join(w.dir, "steps.yaml")
		os.WriteFile(script, []byte(c.text), 0o600)
		code, out, errs := w.run("call", "--script", script, "--", w.raw, "--reply", "--record", rec)
		if code != 2 || !strings.Contains(errs, c.want) || out != "" || strings.Contains(errs, "\x1b") {
			t.Errorf("%.60q: exit %d, stdout %q; stderr %q, want %q", c.text, code, out, errs, c.want)
		}
	}
	if b, err := os.ReadFile(rec); err == nil {
		t.Errorf("a refused script started the server: %s", b)
	}
}

func TestCallCmdExitCodes(t *testing.T) {
	w := newCallWorld(t)
	cases := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"ok", []string{"echo", "--", w.raw, "--reply"}, 0, ""},
		{"isError", []string{"fail", "--", w.raw, "--reply"}, 1, "isError"},
		{"rpc error", []string{"rpc_error", "--", w.raw, "--reply"}, 1, "-32000"},
		{"timeout", []string{"--timeout", "300ms", "hang", "--", w.raw, "--reply"}, 1, "no answer within"},
		{"no tool", []string{"--", w.raw, "--reply"}, 2, "no tool"},
		{"no server", []string{"echo"}, 2, "no server"},
		{"bad pair", []string{"echo", "novalue", "--", w.raw, "--reply"}, 2, "key=value"},
		{"bad args", []string{"echo", "--args", "[1]", "--", w.raw, "--reply"}, 2, "JSON object"},
		{"list and tool", []string{"--list", "echo", "--", w.raw, "--reply"}, 2, "one of"},
		{"unknown flag", []string{"--nope", "echo", "--", w.raw}, 2, "nope"},
		{"not started", []string{"echo", "--", filepath.Join(w.dir, "missing")}, 3, "cannot start"},
		{"exits before answering", []string{"echo", "--", w.raw, "--reply", "--exit-after", "2"}, 3, "exited"},
		{"dies at handshake", []string{"echo", "--", w.raw, "--exit-now", "--exit-code", "7"}, 3, "handshake"},
	}
	for _, c := range cases {
		code, _, errs := w.run(append([]string{"call"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.err) {
			t.Errorf("%s: exit %d, want %d; stderr %q, want %q", c.name, code, c.code, errs, c.err)
		}
	}
}

func TestCallCmdCassetteVerifies(t *testing.T) {
	w := newCallWorld(t)
	pages := filepath.Join(w.dir, "pages.json")
	os.WriteFile(pages, []byte(`[{"tools":[{"name":"echo","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}]`), 0o600)
	c := filepath.Join(w.dir, "c.jsonl")
	code, out, errs := w.run("call", "--cassette", c, "echo", "text=x", "--", w.raw, "--reply", "--tools-pages", pages)
	if code != 0 || out != "{\"text\":\"x\"}\n" {
		t.Fatalf("exit %d, stdout %q; stderr %s", code, out, errs)
	}
	f, err := os.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := cassette.NewReader(f, c)
	if err != nil {
		t.Fatal(err)
	}
	call, err := r.Next()
	if err != nil || call.Tool != "echo" || string(call.Arguments) != `{"text":"x"}` || r.Header().Era != cassette.EraSession {
		t.Fatalf("cassette call %+v %v", call, err)
	}
	code, out, errs = w.run("verify", c, "--json", "--", w.raw, "--reply", "--tools-pages", pages)
	if st, _ := statuses(t, out); code != 0 || st["echo"] != "same" {
		t.Errorf("verify: exit %d %v\n%s", code, st, errs)
	}
}

func TestCallCmdEntryFromConfig(t *testing.T) {
	w := newCallWorld(t)
	cfg := filepath.Join(w.dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"wrapped": map[string]any{"command": w.bp, "args": []string{"--server", "rawname", "--", w.raw, "--reply"}},
		"plain":   map[string]any{"command": w.raw, "args": []string{"--reply"}},
	}})
	os.WriteFile(cfg, b, 0o600)
	code, out, errs := w.run("call", "--config", cfg, "--entry", "wrapped", "echo", "a=1")
	if code != 0 || out != "{\"a\":1}\n" {
		t.Fatalf("exit %d, stdout %q; stderr %s", code, out, errs)
	}
	// The call went to the server itself, not through the wrapped entry's proxy: one
	// report, under the entry's --server name.
	if j := w.journal("rawname"); len(j) != 1 {
		t.Errorf("journal %v", j)
	}
	if code, out, _ := w.run("call", "--config", cfg, "--entry", "plain", "--list"); code != 0 || out != "echo\n" {
		t.Errorf("plain entry: exit %d %q", code, out)
	}
	if code, _, errs := w.run("call", "--config", cfg, "--entry", "nobody", "--list"); code != 2 || !strings.Contains(errs, `"nobody"`) {
		t.Errorf("no such entry: exit %d %s", code, errs)
	}
}

// A server of the stateless era alone (2026-07-28) refuses initialize: the call is made
// in its era, every request carrying params._meta, and the cassette says so.
func TestCallCmdStatelessServer(t *testing.T) {
	w := newCallWorld(t)
	rec := filepath.Join(w.dir, "server.log")
	c := filepath.Join(w.dir, "st.jsonl")
	code, out, errs := w.run("call", "--cassette", c, "echo", "a=1", "--", w.raw, "--reply", "--discover", "--no-initialize", "--record", rec)
	if code != 0 || out != "{\"a\":1}\n" {
		t.Fatalf("exit %d %q %s", code, out, errs)
	}
	b, _ := os.ReadFile(rec)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(l, `"tools/call"`) && !strings.Contains(l, `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`) {
			t.Errorf("a call without the stateless era's _meta: %s", l)
		}
	}
	h, _ := readCassette(t, c)
	if h.Era != cassette.EraStateless || h.DiscoverResult == nil {
		t.Fatalf("header %+v", h)
	}
	code, o, errs := w.run("verify", c, "--json", "--allow-writes", "--", w.raw, "--reply", "--discover", "--no-initialize")
	if st, _ := statuses(t, o); code != 0 || st["echo"] != "same" {
		t.Errorf("verify: exit %d %v\n%s", code, st, errs)
	}
	// Neither era: the server is not reached.
	if code, _, errs := w.run("call", "echo", "--", w.raw, "--reply", "--no-initialize"); code != 3 || !strings.Contains(errs, "refused initialize") {
		t.Errorf("no era: exit %d %s", code, errs)
	}
}

// --url: the remote is reached as the proxy reaches it, with its headers; the wrong
// credentials are an unreachable server (3), and the header's value is never printed.
func TestCallCmdRemoteWithHeader(t *testing.T) {
	w := newCallWorld(t)
	raw := testutil.Build(t, "./testdata/rawhttp")
	url := httpServer(t, raw, "--auth", "Bearer s3cret-token")
	t.Setenv("CALL_TOKEN", "s3cret-token")
	code, out, errs := w.run("call", "--url", url, "--header", "Authorization: Bearer ${CALL_TOKEN}", "echo", "a=1")
	if code != 0 || out != "{\"a\":1}\n" {
		t.Fatalf("exit %d %q %s", code, out, errs)
	}
	code, out, errs = w.run("call", "--url", url, "--header", "Authorization: Bearer wrong-token", "echo", "a=1")
	if code != 3 || strings.Contains(out+errs, "wrong-token") {
		t.Errorf("wrong token: exit %d %q %s", code, out, errs)
	}
	if code, _, _ := w.run("call", "--url", url, "echo", "--", w.raw); code != 2 {
		t.Errorf("--url and a command: exit %d", code)
	}
}

// A script that is not UTF-8: a JSON one's arguments reached the server with the
// bytes as written (0xff and all, not JSON), and the tool's name with U+FFFD in
// place of them. It is refused before anything runs, naming the line.
func TestCallCmdScriptNotUTF8(t *testing.T) {
	w := newCallWorld(t)
	rec := filepath.Join(w.dir, "rec")
	for name, text := range map[string]string{
		"steps.json": "[{\"tool\":\"echo\",\n\"arguments\":{\"x\":\"\xc3\x28\xff\"}}]",
		"steps.yaml": "- tool: echo\n  arguments: {x: \"\xc3\x28\xff\"}\n",
	} {
		script := filepath.Join(w.dir, name)
		os.WriteFile(script, []byte(text), 0o600)
		code, out, errs := w.run("call", "--script", script, "--", w.raw, "--reply", "--record", rec)
		if code != 2 || out != "" || !strings.Contains(errs, "not UTF-8 text (line 2)") {
			t.Errorf("%s: exit %d, stdout %q; stderr %q", name, code, out, errs)
		}
	}
	if b, err := os.ReadFile(rec); err == nil {
		t.Errorf("a script not UTF-8 started the server: %q", b)
	}
}

// A FIFO given as the script blocked open(2) for ever, waiting for a writer, and
// SIGTERM did not end it (10 minutes, then SIGKILL). A script is a regular file:
// anything else is refused at once.
func TestCallCmdScriptFIFO(t *testing.T) {
	w := newCallWorld(t)
	fifo := filepath.Join(w.dir, "steps.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal("mkfifo:", err) // a temporary folder on a Unix takes a FIFO: a skip here would assert nothing
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.bp, "call", "--script", fifo, "--", w.raw, "--reply")
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("call --script FIFO did not end within 20s; output %q", out)
	}
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "not a regular file") {
		t.Errorf("exit %d; output %q", code, out)
	}
}
