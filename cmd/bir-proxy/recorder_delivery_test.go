package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// TestRecorderAnswering204TakesReports: a recorder that answers 201/204 instead of 200
// gets every report once, and the spool is empty at exit. A register answered 204 used
// to count as refused, so nothing was ever sent.
func TestRecorderAnswering204TakesReports(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	for _, status := range []int{http.StatusCreated, http.StatusNoContent} {
		rec := recordertest.Start(t)
		rec.Answer(status)
		state := t.TempDir()
		s := startProxy(t, recording(rec, state), "--server", "twoxx", "--", raw, "--reply")
		for i := 1; i <= 5; i++ {
			s.Send(toolCall(i, fmt.Sprintf(`{"_bir_call_id":"c-%d"}`, i)))
			s.recv()
		}
		if _, err := rec.WaitSteps(testutil.Context(t), 5); err != nil {
			t.Fatal(err)
		}
		s.end()
		if left, _ := filepath.Glob(filepath.Join(state, "bir-proxy", "spool", "*")); len(left) != 0 {
			t.Errorf("answered %d: spool files left: %v", status, left)
		}
		if strings.Contains(s.Stderr.String(), "level=ERROR") {
			t.Errorf("answered %d: stderr:\n%s", status, s.Stderr.String())
		}
	}
}

// TestRecorderBehindRedirectLosesNothing: a recorder that answers 307 keeps its reports
// in the spool (the redirect is not followed, so the token goes nowhere else), says so
// once, and gets every report once it answers again.
func TestRecorderBehindRedirectLosesNothing(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	elsewhere := recordertest.Start(t)
	s := startProxy(t, recording(rec, t.TempDir()), "--server", "redir", "--", raw, "--reply")
	ctx := testutil.Context(t)
	if _, err := rec.WaitRegistrations(ctx, 1); err != nil {
		t.Fatal(err)
	}
	rec.Redirect(http.StatusTemporaryRedirect, elsewhere.URL()+"/proxy/step")
	for i := 1; i <= 5; i++ {
		s.Send(toolCall(i, fmt.Sprintf(`{"_bir_call_id":"c-%d"}`, i)))
		s.recv()
	}
	if _, err := rec.Wait(ctx, func(v recordertest.Snapshot) bool {
		n := 0
		for _, req := range v.Requests {
			if req.Path == "/proxy/step" && req.Status == http.StatusTemporaryRedirect {
				n++
			}
		}
		// Past the first requests, which were in flight together: later ones are
		// single probes after a pause, so none can straddle the switch back below.
		return n >= 6
	}); err != nil {
		t.Fatal(err)
	}
	rec.Redirect(0, "")
	steps, err := rec.WaitSteps(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, st := range steps {
		seen[st.Get("callId").String()] = true
	}
	for i := 1; i <= 5; i++ {
		if !seen[fmt.Sprintf("c-%d", i)] {
			t.Errorf("report c-%d lost behind the redirect", i)
		}
	}
	if n := len(elsewhere.Requests()); n != 0 {
		t.Errorf("the redirect was followed: %d requests reached its target", n)
	}
	if n := strings.Count(s.Stderr.String(), "redirect"); n != 1 {
		t.Errorf("the redirect was said %d times, want once:\n%s", n, s.Stderr.String())
	}
	s.end()
}

// TestRegisterBodyRedacted: the server's command line reaches the recorder with every
// secret in it redacted, in each shape servers are given keys in, and the server's
// environment is never sent. An Anthropic key, a DSN password, a GitHub token and a
// --password value all used to arrive as they were.
func TestRegisterBodyRedacted(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	anthropic := "sk-ant-api03-" + strings.Repeat("aB3dE5gH7jK9", 8)
	github := "ghp_" + strings.Repeat("Xy7Qw3", 6)
	secrets := map[string]string{
		"anthropic key":   anthropic,
		"postgres dsn":    "pgS3cretPw",
		"github token":    github,
		"--password":      "hunter2pw",
		"-p":              "mysqlPw9",
		"--token=":        "tok3nValue",
		"KEY=value":       "k3yValue7",
		"--api-key value": "apiK3yValue",
		"environment":     "envOnlySecret42",
	}
	// rawserver stops reading flags at "--" and ignores the rest: the secrets are
	// only there to be on its command line.
	args := []string{"--server", "cmdline", "--", raw, "--reply", "--",
		anthropic,
		"postgresql://app:" + secrets["postgres dsn"] + "@db.internal:5432/app",
		"--github-token", github,
		"--password", secrets["--password"],
		"-p", secrets["-p"],
		"--token=" + secrets["--token="],
		"OPENAI_API_KEY=" + secrets["KEY=value"],
		"--api-key", secrets["--api-key value"],
		"--port", "8080",
	}
	env := append(recording(rec, t.TempDir()), "MY_SERVER_SECRET="+secrets["environment"])
	s := startProxy(t, env, args...)
	regs, err := rec.WaitRegistrations(testutil.Context(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range rec.Requests() {
		for shape, secret := range secrets {
			if strings.Contains(string(req.Body), secret) {
				t.Errorf("%s: %s reached the recorder in %s", req.Path, shape, req.Body)
			}
		}
	}
	body := string(regs[0].Body)
	for _, kept := range []string{`"--password","[REDACTED]"`, `"--token=[REDACTED]"`, `"OPENAI_API_KEY=[REDACTED]"`,
		`"postgresql://app:[REDACTED]@db.internal:5432/app"`, `"--port","8080"`, `"--reply"`} {
		if !strings.Contains(body, kept) {
			t.Errorf("register body lost %s: %s", kept, body)
		}
	}
	if strings.Contains(body, "MY_SERVER_SECRET") || strings.Contains(body, `"env`) {
		t.Errorf("register body carries the environment: %s", body)
	}
	s.end()
}

// TestTokenInToolNameAndCallIDRedacted: a token the host put in the tool name or in
// the callId does not reach the recorder.
func TestTokenInToolNameAndCallIDRedacted(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	tool := "ghp_" + strings.Repeat("Tq4Wz8", 6)
	callID := "xoxb-" + strings.Repeat("12345678-", 3) + "abcDEF"
	s := startProxy(t, recording(rec, t.TempDir()), "--server", "names", "--", raw, "--reply")
	s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run-%s","arguments":{"_bir_call_id":"c-%s"}}}`, tool, callID))
	s.recv()
	steps, err := rec.WaitSteps(testutil.Context(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{tool, callID} {
		if strings.Contains(string(steps[0].Body), secret) {
			t.Errorf("a token reached the recorder: %s", steps[0].Body)
		}
	}
	if got := steps[0].Get("tool").String(); got != "run-[REDACTED]" {
		t.Errorf("tool = %q", got)
	}
	if got := steps[0].Get("callId").String(); got != "c-[REDACTED]" {
		t.Errorf("callId = %q", got)
	}
	s.end()
}

// TestUntrustedDiscoveryFileIgnored: a .bir/recorder.json that another user owns and
// anyone can write, in a 1777 directory above the working directory, gets neither the
// register nor any report; stderr says why, and the reports go to the journal.
func TestUntrustedDiscoveryFileIgnored(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	shared := filepath.Join(t.TempDir(), "shared")
	cwd := filepath.Join(shared, "proj")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	file, err := rec.WriteDiscoveryFile(shared)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o666); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		if err := os.Chown(file, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	state := t.TempDir()
	s := startProxyIn(t, cwd, []string{"BIR_OFF=0", "XDG_STATE_HOME=" + state, "BIR_RECORDER_URL="}, "--server", "untrusted", "--", raw, "--reply")
	s.Send(toolCall(1, `{"_bir_call_id":"u-1"}`))
	s.recv()
	s.end()
	if n := len(rec.Requests()); n != 0 {
		t.Errorf("the recorder named by an untrusted file got %d requests", n)
	}
	if e := s.Stderr.String(); !strings.Contains(e, "is not trusted") || !strings.Contains(e, "journal") || !strings.Contains(e, file) {
		t.Errorf("stderr does not say the file was ignored and why:\n%s", e)
	}
	data, err := os.ReadFile(filepath.Join(state, "bir-proxy", "journal", "untrusted.jsonl"))
	if err != nil || !strings.Contains(string(data), `"callId":"u-1"`) {
		t.Errorf("journal: %s, %v", data, err)
	}
}

// TestLooseJournalModesTightened: a journal file left 0666 in a 0777 directory is made
// the user's alone (0600, 0700) when the proxy opens it, and stderr says so.
func TestLooseJournalModesTightened(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	state := t.TempDir()
	dir := filepath.Join(state, "bir-proxy", "journal")
	journal := filepath.Join(dir, "loose.jsonl")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{filepath.Dir(dir): 0o777, dir: 0o777, journal: 0o666} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	s := startProxyIn(t, t.TempDir(), []string{"BIR_OFF=0", "XDG_STATE_HOME=" + state, "BIR_RECORDER_URL="}, "--server", "loose", "--", raw, "--reply")
	s.Send(toolCall(1, `{}`))
	s.recv()
	s.end()
	for path, want := range map[string]os.FileMode{filepath.Dir(dir): 0o700, dir: 0o700, journal: 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", path, got, want)
		}
	}
	if !strings.Contains(s.Stderr.String(), "tightened") {
		t.Errorf("stderr does not say the modes were tightened:\n%s", s.Stderr.String())
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"256MiB": 256 << 20, "1g": 1 << 30, "1.5G": 3 << 29, "300000": 300000, "64 KiB": 64 << 10, "2kb": 2048,
		"7B": 7, "1TiB": 1 << 40,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1M", "1e3", "1.2.3G", "10 parsecs", "1ib", "1i", "99999999999999T", "1KiBB"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// FuzzParseSize: no input panics, none gives a negative size, and a size printed by the
// flag's String reads back as itself.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"256MiB", "1.5g", "0", "", "9223372036854775807", "1e400", ".", "8 TiB", "3kib"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("parseSize(%q) = %d", s, n)
		}
		if back, err := parseSize(formatSize(n)); err != nil || back != n {
			t.Fatalf("parseSize(%q) = %d, printed %q, read back %d, %v", s, n, formatSize(n), back, err)
		}
	})
}

// TestSpoolBoundedWhileRecorderDown: with the recorder down, the spool stays under
// --spool-max, the oldest reports going first with a count on stderr and in
// `bir-proxy status`; the host's calls are all answered; the newest reports reach the
// recorder once it is back. The spool used to grow without bound.
func TestSpoolBoundedWhileRecorderDown(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	rec.Down()
	state := t.TempDir()
	s := startProxy(t, recording(rec, state), "--server", "bounded", "--spool-max", "256KiB", "--", raw, "--reply")
	const n = 400 // about 1.3 KiB each: twice the bound
	pad := strings.Repeat("x", 1000)
	for i := 1; i <= n; i++ {
		s.Send(toolCall(i, fmt.Sprintf(`{"_bir_call_id":"c-%d","pad":%q}`, i, pad)))
		s.recv()
	}
	ctx := testutil.Context(t)
	if err := s.Stderr.WaitFor(ctx, "the spool is full"); err != nil {
		t.Fatal(err)
	}
	s.end()
	spool := filepath.Join(state, "bir-proxy", "spool")
	files, _ := filepath.Glob(filepath.Join(spool, "*.jsonl"))
	var size int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		size += st.Size()
	}
	if size > 256<<10 {
		t.Errorf("the spool holds %d bytes, over --spool-max 256KiB", size)
	}

	home := t.TempDir()
	status := exec.Command(testutil.Build(t, "./cmd/bir-proxy"), "status")
	status.Dir = home
	status.Env = append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+state, "BIR_RECORDER_URL=", "BIR_OFF=0")
	out, err := status.CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "spool: bounded:") || !strings.Contains(string(out), "reports dropped because the spool was full") {
		t.Errorf("status does not show the drops:\n%s", out)
	}

	if err := rec.Up(); err != nil {
		t.Fatal(err)
	}
	next := startProxy(t, recording(rec, state), "--server", "bounded", "--", raw, "--reply")
	steps, err := rec.Wait(ctx, func(v recordertest.Snapshot) bool {
		for _, st := range v.Steps {
			if st.Get("callId").String() == fmt.Sprintf("c-%d", n) {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("the newest report did not arrive: %v", err)
	}
	for _, st := range steps.Steps {
		if st.Get("callId").String() == "c-1" {
			t.Errorf("the oldest report was kept and the newest dropped? got c-1")
		}
	}
	next.end()
}
