package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
