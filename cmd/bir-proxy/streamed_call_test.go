package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// recordedCall sends one tools/call of tool with args through the built proxy
// (BIR_STREAM_THRESHOLD=streamAt, "" the default) recording to a journal, and
// returns its report.
func recordedCall(t *testing.T, streamAt, tool, args string) map[string]any {
	t.Helper()
	journal := filepath.Join(t.TempDir(), "j.jsonl")
	_, in, out, done := rawProxy(t, nil, []string{"BIR_OFF=0", "BIR_RECORDER_URL=", "BIR_STREAM_THRESHOLD=" + streamAt},
		[]string{"--server", "mem", "--journal", journal}, "--reply")
	go in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + "}}\n")
	if got := readWithin(t, out); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"result"`) {
		t.Fatalf("host got %.200s", got)
	}
	var rep map[string]any
	testutil.Eventually(t, "the call's report in the journal", func() bool {
		data, _ := os.ReadFile(journal)
		line, _, _ := strings.Cut(string(data), "\n")
		return json.Unmarshal([]byte(line), &rep) == nil && rep["outcome"] != nil
	})
	in.Close()
	<-done
	return rep
}

// TestStreamedCallWithManyMembersIsRecorded: a long call whose arguments have more
// than a hundred members (100 KB, streamed at the default threshold) was reported
// "not recorded: ... came faster than the proxy's bookkeeping could read them": the
// host's path queued each key and separator ArgStrip emits as a piece of its own,
// and the digest's queue holds 256 pieces, whatever their bytes. Its report is now
// the one the call read whole gets.
func TestStreamedCallWithManyMembersIsRecorded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteByte('{')
	for i := range 300 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"f%d":"%s"`, i, strings.Repeat("v", 300))
	}
	b.WriteString(`,"password":"hunter2"}`)
	args := b.String()
	streamed := recordedCall(t, "", "fail", args)
	whole := recordedCall(t, "0", "fail", args)
	for _, k := range []string{"args", "argsFingerprint", "argsClipped"} {
		s, _ := json.Marshal(streamed[k])
		w, _ := json.Marshal(whole[k])
		if string(s) != string(w) {
			t.Errorf("%s of the call streamed: %.200s; read whole: %.200s", k, s, w)
		}
	}
	if s, _ := json.Marshal(streamed); strings.Contains(string(s), "hunter2") {
		t.Errorf("the secret is in the streamed call's report: %.300s", s)
	}
}

// TestCutStreamedCallKeepsNoSecret: a long call the host cut off in the middle of a
// string (its stdin closed) reaches the server ended and is recorded, its arguments
// as the text they are; JSON held escaped in them (\"password\":\"hunter2) kept the
// password in the journal.
func TestCutStreamedCallKeepsNoSecret(t *testing.T) {
	t.Parallel()
	journal := filepath.Join(t.TempDir(), "j.jsonl")
	_, in, _, done := rawProxy(t, nil, []string{"BIR_OFF=0", "BIR_RECORDER_URL=", "BIR_STREAM_THRESHOLD=1"},
		[]string{"--server", "mem", "--journal", journal}, "--reply")
	pad := strings.Repeat("x", 100<<10)
	go func() {
		in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","pad":"` + pad + `","arguments":{"s":"{\"password\":\"hunter2`)
		in.Close()
	}()
	<-done
	data, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"tool":"w"`) {
		t.Fatalf("no report of the cut call: %.500s", data)
	}
	if strings.Contains(string(data), "hunter2") {
		t.Errorf("the secret is in the journal: %.500s", data)
	}
}

// TestPendingStreamedCallsHoldNoDigest: each long call streamed to a server that has
// not answered it held what its arguments were reduced to (the fingerprint's and the
// report's buffers, some 2 MB) until an answer woke bookkeeping: a request read whole
// over 64 KiB wakes it at once, but a streamed one reaches it as a small stand-in.
// 100 calls of 2 MiB to a tool that never answers took the proxy to 200 MB; now
// they cost what 10 do, give or take.
func TestPendingStreamedCallsHoldNoDigest(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the proxy's RSS from /proc")
	}
	t.Parallel()
	rss := func(n int) int64 {
		journal := filepath.Join(t.TempDir(), "j.jsonl")
		stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		cmd, in, _, _ := rawProxy(t, stderr, []string{"BIR_OFF=0", "BIR_RECORDER_URL=", "BIR_STREAM_THRESHOLD=1"},
			[]string{"--server", "mem", "--journal", journal, "--log-level", "debug"}, "--reply", "--record", filepath.Join(filepath.Dir(journal), "rec"))
		args := `{"a":"` + strings.Repeat("x", 2<<20) + `","b":{"c":[1,2,3]}}`
		for i := range n {
			if _, err := fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"hang","arguments":%s}}`+"\n", i, args); err != nil {
				t.Fatal(err)
			}
		}
		// The server has had every call (rawserver records what it reads), so the
		// proxy has read and passed on all of them.
		rec := filepath.Join(filepath.Dir(journal), "rec")
		testutil.Eventually(t, "the server to have every call", func() bool {
			data, _ := os.ReadFile(rec)
			return strings.Count(string(data), "\n") >= n
		})
		return procStatusKB(t, cmd.Process.Pid, "VmRSS") << 10
	}
	few, many := rss(10), rss(100)
	t.Logf("RSS with 10 long calls pending: %d MB; with 100: %d MB", few>>20, many>>20)
	if many-few > 40<<20 {
		t.Errorf("90 more pending streamed calls of 2 MiB took %d MB more", (many-few)>>20)
	}
}

// TestStreamedCallWithLongNameAndCallIDReportsThem: a long call's tool name or
// correlation id past what ArgStrip keeps of them (4 KiB; 16 KiB now) was reported with no tool
// and no callId, where the call read whole reports both, clipped. A long string now
// keeps its first part, more than any report shows.
func TestStreamedCallWithLongNameAndCallIDReportsThem(t *testing.T) {
	t.Parallel()
	pad := strings.Repeat("x", 100<<10)
	for _, c := range []struct{ name, id string }{
		{strings.Repeat("n", 30000), strings.Repeat("q", 30000)},
		{strings.Repeat(`\u0041`, 3000), strings.Repeat(`\u00e9`, 3000)},
		{strings.Repeat("é", 10000), strings.Repeat("😀", 5000)},
		{strings.Repeat(`\ud83d\ude00`, 2000), "x" + strings.Repeat(`\"`, 9000)},
	} {
		args := `{"a":"` + pad + `","_bir_call_id":"` + c.id + `"}`
		streamed := recordedCall(t, "1", c.name, args)
		whole := recordedCall(t, "0", c.name, args)
		for _, k := range []string{"tool", "callId"} {
			if s, w := fmt.Sprint(streamed[k]), fmt.Sprint(whole[k]); s != w {
				t.Errorf("%s of the call streamed: %.80q; read whole: %.80q", k, s, w)
			}
		}
	}
}
