package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

const (
	// skipEnv set to 1 skips the suite (a machine without Node); anything else with
	// node_modules missing is a failure, so a CI that forgot `npm ci` cannot pass.
	skipEnv = "BIR_SKIP_E2E"
	// artifactsEnv names a directory that gets every run's transcript and calls file,
	// for reading a failure after the test's own temp dirs are gone.
	artifactsEnv = "BIR_E2E_ARTIFACTS"
	// hostSlots bounds the scripted hosts running at once: each is a Node host and a
	// Node server (and a proxy), and the machine has two cores.
	hostSlots = 3
)

// suite is what every run needs: where things are, and the slots that bound how many
// hosts run at once.
type suite struct {
	dir   string // the e2e directory, absolute
	node  string
	slots chan struct{}
}

func newSuite(t *testing.T) *suite {
	t.Helper()
	if os.Getenv(skipEnv) == "1" {
		t.Skipf("%s=1: end-to-end suite skipped", skipEnv)
	}
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatalf("e2e: finding the e2e directory: %v", err)
	}
	for _, pkg := range []string{"sdk", "client", "server", "server-everything", "server-filesystem", "server-memory"} {
		p := filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "package.json")
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("e2e: the Node packages are not installed (%v).\n"+
				"Run `npm ci` in e2e/ first (set %s=1 to skip the end-to-end suite instead).", err, skipEnv)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("e2e: no node on PATH (%v); install Node 20+ or set %s=1", err, skipEnv)
	}
	return &suite{dir: dir, node: node, slots: make(chan struct{}, hostSlots)}
}

// scenario is one scripted host against one server command.
type scenario struct {
	name     string // also the proxy's --server name
	host     string // host script under host/
	scenario string // the host's --scenario
	era      string // for messages: "session" or "stateless"
	// server is the server command; tmp is the run's directory (the host masks it).
	server func(s *suite, tmp string) []string
	// env is set for the server command, besides XDG_STATE_HOME.
	env func(tmp string) []string
}

func (s *suite) module(rel string) string {
	return filepath.Join(s.dir, "node_modules", filepath.FromSlash(rel))
}

func scenarios() []scenario {
	return []scenario{
		{
			name: "everything", host: "session-host.mjs", scenario: "everything", era: "session",
			server: func(s *suite, _ string) []string {
				return []string{s.node, s.module("@modelcontextprotocol/server-everything/dist/index.js"), "stdio"}
			},
		},
		{
			name: "filesystem", host: "session-host.mjs", scenario: "filesystem", era: "session",
			server: func(s *suite, tmp string) []string {
				return []string{s.node, s.module("@modelcontextprotocol/server-filesystem/dist/index.js"), filepath.Join(tmp, "fs")}
			},
		},
		{
			name: "memory", host: "session-host.mjs", scenario: "memory", era: "session",
			server: func(s *suite, _ string) []string {
				return []string{s.node, s.module("@modelcontextprotocol/server-memory/dist/index.js")}
			},
			env: func(tmp string) []string { return []string{"MEMORY_FILE_PATH=" + filepath.Join(tmp, "memory.jsonl")} },
		},
		{
			name: "probe-session", host: "session-host.mjs", scenario: "probe", era: "session",
			server: func(s *suite, _ string) []string {
				return []string{s.node, filepath.Join(s.dir, "servers", "probe-server.mjs")}
			},
		},
		{
			name: "probe-stateless", host: "stateless-host.mjs", scenario: "probe", era: "stateless",
			server: func(s *suite, _ string) []string {
				return []string{s.node, filepath.Join(s.dir, "servers", "probe-server.mjs")}
			},
		},
	}
}

// launch says how a run reaches the server: directly (no wrap) or through a program
// that takes the server command after its own arguments.
type launch struct {
	mode    string
	wrap    func(sc scenario) []string // the argv before the server command; nil: direct
	env     []string                   // for the wrapping program (or the server), besides the scenario's
	callIDs bool                       // add the correlation key, as the host hook does

	// A remote server: url makes the host talk HTTP to it itself (urlTransport
	// "http" or "sse"); remote is the whole command instead (bir-proxy --url ...).
	url, urlTransport string
	remote            []string
	skip              []string // scenario steps left out
}

// run is what one scripted host left behind.
type run struct {
	mode       string
	tmp        string
	state      string // XDG_STATE_HOME of the run
	transcript []byte
	calls      hostCalls
	stderr     string
	err        error // the host's exit status
}

// hostCalls is the host's calls file: the step reports a proxy must have sent.
type hostCalls struct {
	Calls   []expectedCall `json:"calls"`
	Secrets []string       `json:"secrets"`
	// Tasks: the tasks the host followed to their end (task-host.mjs only).
	Tasks []hostTask `json:"tasks"`
}

type expectedCall struct {
	Connection      int             `json:"connection"`
	RequestID       json.RawMessage `json:"requestId"`
	Tool            string          `json:"tool"`
	CallID          *string         `json:"callId"`
	ArgsFingerprint string          `json:"argsFingerprint"`
	Outcome         string          `json:"outcome"`
	// Rounds is set by joinRounds: the host's calls one multi round-trip call made.
	Rounds int `json:"-"`
}

// runHost runs the scenario's scripted host once and collects what it wrote. A host
// that failed still leaves its transcript up to the failing step.
func (s *suite) runHost(t *testing.T, sc scenario, l launch) *run {
	t.Helper()
	tmp := t.TempDir()
	r := &run{mode: l.mode, tmp: tmp, state: filepath.Join(tmp, "state")}
	if err := os.MkdirAll(r.state, 0o700); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	var command []string
	switch {
	case l.remote != nil:
		command = l.remote
	case l.url == "":
		command = sc.server(s, tmp)
		if l.wrap != nil {
			command = append(l.wrap(sc), command...)
		}
	}
	transcriptPath := filepath.Join(tmp, "transcript.txt")
	callsPath := filepath.Join(tmp, "calls.json")
	args := []string{
		filepath.Join(s.dir, "host", sc.host),
		"--scenario", sc.scenario,
		"--transcript", transcriptPath,
		"--calls", callsPath,
		"--tmp", tmp,
		"--env", "XDG_STATE_HOME=" + r.state,
	}
	if l.callIDs {
		args = append(args, "--call-ids")
	}
	if sc.env != nil {
		for _, kv := range sc.env(tmp) {
			args = append(args, "--env", kv)
		}
	}
	for _, kv := range l.env {
		args = append(args, "--env", kv)
	}
	for _, step := range l.skip {
		args = append(args, "--skip", step)
	}
	if l.url != "" {
		args = append(args, "--url", l.url, "--url-transport", l.urlTransport)
	} else {
		args = append(args, "--")
		args = append(args, command...)
	}

	// No deadline of its own: every holder of a slot gives it back within Guard.
	select {
	case s.slots <- struct{}{}:
	case <-t.Context().Done():
		t.Fatalf("e2e: waiting for a host slot: %v", t.Context().Err())
	}
	cmd := exec.CommandContext(testutil.Context(t), s.node, args...)
	// The working directory is the run's own: the proxy looks for .bir/recorder.json
	// from there upwards, and a stray one in the checkout must not be found.
	cmd.Dir = tmp
	cmd.Env = hostEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	r.err = cmd.Run()
	<-s.slots
	r.stderr = stderr.String()

	var err error
	if r.transcript, err = os.ReadFile(transcriptPath); err != nil && r.err == nil {
		r.err = fmt.Errorf("no transcript: %w", err)
	}
	if data, err := os.ReadFile(callsPath); err == nil {
		if err := json.Unmarshal(data, &r.calls); err != nil {
			t.Fatalf("e2e: %s: decoding the host's calls file: %v", l.mode, err)
		}
	}
	saveArtifacts(t, sc, l.mode, tmp)
	return r
}

// runDirect runs the scenario's host against the server with nothing between them,
// the run every other is compared with, and fails t if the host did not finish.
func (s *suite) runDirect(t *testing.T, sc scenario) *run {
	t.Helper()
	direct := s.runHost(t, sc, launch{mode: "direct"})
	if f := direct.hostFailure(); f != "" {
		t.Fatalf("%s, run directly (no proxy): %s", sc.name, f)
	}
	return direct
}

// hostEnv is the test's environment without the proxy's variables: a developer's
// shell pointing at their own recorder must not leak into the runs. The one kept is
// BIR_STREAM_THRESHOLD: scripts/test runs the suite again with every line streamed.
func hostEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BIR_") || strings.HasPrefix(kv, "BIR_STREAM_THRESHOLD=") {
			env = append(env, kv)
		}
	}
	return env
}

func saveArtifacts(t *testing.T, sc scenario, mode, tmp string) {
	dir := os.Getenv(artifactsEnv)
	if dir == "" {
		return
	}
	base := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Logf("e2e: saving artifacts: %v", err)
		return
	}
	for _, f := range []string{"transcript.txt", "calls.json"} {
		if data, err := os.ReadFile(filepath.Join(tmp, f)); err == nil {
			_ = os.WriteFile(filepath.Join(base, sc.name+"."+mode+"."+f), data, 0o644)
		}
	}
}

// hostFailure describes a host that did not finish its scenario, with the end of its
// stderr, where it names the failed step.
func (r *run) hostFailure() string {
	if r.err == nil {
		return ""
	}
	return fmt.Sprintf("the scripted host failed (%v); its stderr ends:\n%s", r.err, tail(r.stderr, 40))
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// compareTranscripts returns nil when the two transcripts are equal, and otherwise an
// error that names the scenario step where they first differ and shows both lines
// around the first differing byte.
func compareTranscripts(want, got []byte) error {
	if bytes.Equal(want, got) {
		return nil
	}
	wl := strings.Split(string(want), "\n")
	gl := strings.Split(string(got), "\n")
	step := "(before the first step)"
	for i := 0; ; i++ {
		switch {
		case i >= len(wl) && i >= len(gl):
			return fmt.Errorf("transcripts differ but no line does (cannot happen)")
		case i >= len(gl):
			return fmt.Errorf("step %q: the proxied transcript ends at line %d; the direct one goes on with:\n  %s",
				step, i+1, excerpt(wl[i], 0))
		case i >= len(wl):
			return fmt.Errorf("step %q: the proxied transcript has more lines than the direct one, from line %d:\n  %s",
				step, i+1, excerpt(gl[i], 0))
		}
		if strings.HasPrefix(wl[i], "== ") {
			step = strings.TrimPrefix(wl[i], "== ")
		}
		if wl[i] == gl[i] {
			continue
		}
		if strings.HasPrefix(gl[i], "== ") && !strings.HasPrefix(wl[i], "== ") {
			return fmt.Errorf("step %q: the proxied run moved on to step %q at line %d while the direct run still had:\n  %s",
				step, strings.TrimPrefix(gl[i], "== "), i+1, excerpt(wl[i], 0))
		}
		at := firstDiff(wl[i], gl[i])
		return fmt.Errorf("step %q, transcript line %d, byte %d of the line:\n  direct:  %s\n  proxied: %s",
			step, i+1, at, excerpt(wl[i], at), excerpt(gl[i], at))
	}
}

func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// excerpt shows a long line around offset at, cut on rune boundaries.
func excerpt(line string, at int) string {
	const before, after = 160, 160
	start, end := max(0, at-before), min(len(line), at+after)
	for start > 0 && !utf8.RuneStart(line[start]) {
		start--
	}
	for end < len(line) && !utf8.RuneStart(line[end]) {
		end++
	}
	s := line[start:end]
	if start > 0 {
		s = "…" + s
	}
	if end < len(line) {
		s += fmt.Sprintf("… (%d bytes)", len(line))
	}
	return s
}
