package recorder

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

func journalConfig(t testing.TB, path string) Config {
	return Config{Server: "github", JournalPath: path, Logger: testLogger(t)}
}

func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("%s does not end with a newline", path)
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// With no recorder, reports are JSON lines in the journal, one a line, in the shape of
// SPEC §5, and nothing else is done.
func TestJournalLines(t *testing.T) {
	ctx := testutil.Context(t)
	path := filepath.Join(t.TempDir(), "j", "github.jsonl")
	committed := newCounter()
	cfg := journalConfig(t, path)
	cfg.tuning.hooks.committed = committed.add
	r := open(t, cfg)
	if r.d != nil {
		t.Fatal("journal mode started delivery")
	}
	for i := 1; i <= 50; i++ {
		s := recordertest.SampleStep("create_issue", i)
		if i == 7 {
			s.CallID = nil
			s.Args = json.RawMessage(`{"broken`) // a bug upstream of us must not cost the report
		}
		r.Submit(s)
	}
	// On disk before Close: a SIGKILL now would lose nothing.
	if err := committed.wait(ctx, 50); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if len(lines) != 50 {
		t.Fatalf("%d lines, want 50", len(lines))
	}
	for i, line := range lines {
		if !json.Valid(line) {
			t.Fatalf("line %d is not JSON: %s", i+1, line)
		}
		r := gjson.ParseBytes(line)
		if r.Get("seq").Int() != int64(i+1) || r.Get("proxyId").String() == "" || r.Get("server").String() != "github" {
			t.Errorf("line %d: %s", i+1, line)
		}
		for _, key := range []string{"callId", "dispatchId", "args", "argsFingerprint", "receivedAt", "startedAt", "endedAt", "durationMs", "outcome"} {
			if !r.Get(key).Exists() {
				t.Errorf("line %d has no %s", i+1, key)
			}
		}
		if ts := r.Get("startedAt").String(); !strings.HasSuffix(ts, "Z") {
			t.Errorf("startedAt %q is not UTC", ts)
		}
	}
	if got := gjson.GetBytes(lines[6], "callId").Raw; got != "null" {
		t.Errorf("absent callId written as %s, want null", got)
	}
	if got := gjson.GetBytes(lines[0], "args.title").String(); got != "issue <1>" || !bytes.Contains(lines[0], []byte("<1>")) {
		t.Errorf("args changed on the way: %s", lines[0])
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoGoroutines(t)

	if _, err := exec.LookPath("jq"); err != nil {
		t.Log("jq not installed; skipping the jq check")
		return
	}
	out, err := exec.CommandContext(testutil.Context(t), "jq", "-r", `select(.outcome == "ok") | "\(.seq) \(.tool)"`, path).Output()
	if err != nil {
		t.Fatalf("jq: %v", err)
	}
	if got := strings.Count(string(out), " create_issue\n"); got != 50 {
		t.Errorf("jq read %d reports:\n%s", got, out)
	}
}

// Two proxies of one server append to the same journal: their lines interleave whole.
func TestJournalSharedByTwoProxies(t *testing.T) {
	ctx := testutil.Context(t)
	path := filepath.Join(t.TempDir(), "github.jsonl")
	const n = 150
	big := strings.Repeat("x", 6000) // several lines per write, writes past a page
	sinks := []*Reporter{open(t, journalConfig(t, path)), open(t, journalConfig(t, path))}
	var wg sync.WaitGroup
	for _, r := range sinks {
		wg.Go(func() {
			for i := 1; i <= n; i++ {
				s := recordertest.SampleStep("t", i)
				s.Args = json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, big))
				r.Submit(s)
			}
		})
	}
	wg.Wait()
	for _, r := range sinks {
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	seqs := map[string][]uint64{}
	for i, line := range readLines(t, path) {
		if !json.Valid(line) {
			t.Fatalf("line %d is not whole JSON (%d bytes)", i+1, len(line))
		}
		id := gjson.GetBytes(line, "proxyId").String()
		seqs[id] = append(seqs[id], gjson.GetBytes(line, "seq").Uint())
	}
	for _, r := range sinks {
		assertSeqSet(t, seqs[r.ProxyID()], n)
	}
}
