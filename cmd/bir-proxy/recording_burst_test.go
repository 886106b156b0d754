package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// icBurstBody is ~size bytes of what a tool's arguments legitimately carry in bulk: a
// document as one JSON string, with a few escapes. The relay skips it with memchr
// (assembly, which the race detector does not slow), while bookkeeping reads it byte
// by byte in Go (the fingerprint's canonical form, redaction's text rules): under the
// race detector, with a server that answers at once, bookkeeping falls behind the
// relay by more than its queue's budget, as it did for the host on a machine
// with cores to spare.
func icBurstBody(size int) string {
	words := []string{"the", "proxy", "records", "every", "call", "with", "its", "arguments", "and", "result",
		"ünïcödé", "naïve", "façade", `\"quoted\"`, "user@example.com", "https://example.com/a?b=c", "2026-12-01", "12345"}
	var b strings.Builder
	b.WriteString(`"`)
	for i := 0; b.Len() < size; i++ {
		b.WriteString(words[(i*7+i/5)%len(words)])
		b.WriteString([]string{" ", `\n`, ", ", ". "}[i%4])
	}
	b.WriteString(`"`)
	return b.String()
}

// icBurstArgs is the arguments of a call with body, its correlation key and a part of
// its own.
func icBurstArgs(callID, body string) string {
	return `{"_bir_call_id":"` + callID + `","query":"` + callID + `","document":` + body + `}`
}

// TestBurstsOfLargeCallsKeepEveryReport: a host keeping 25 calls with ~15 KB arguments
// in flight, the next sent as soon as one is answered, in journal mode, to a server
// that answers at once; the proxy built with the race detector (see icBurstBody).
// Bookkeeping falls behind the relay, its queue passes its byte budget, and answers
// are shed (the test logs whether they were: it is the machine's pace). A
// shed answer kept the lex spans of the message it replaced, which bookkeeping then
// applied to the shorter bytes: `slice bounds out of range`, the proxy gone, and every
// report after the crash lost. Every call must be answered, the proxy must exit 0, and
// every call must have one report in the journal: ok, or (a request shed over the
// budget) not recorded.
func TestBurstsOfLargeCallsKeepEveryReport(t *testing.T) {
	// Not parallel: a race-built proxy under a 30,000-call burst takes both CPUs for a
	// minute or more, and beside it the package's latency tests measure the machine
	// (a host call of TestReplayRecorderDownForAMinute took 2.35 s in a full run).
	// Serial tests run before the parallel ones start.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	journal := filepath.Join(t.TempDir(), "burst.jsonl")
	const (
		bursts = 1200 // calls in all: bursts*width
		width  = 25   // in flight, as the host sent them
		size   = 15 << 10
	)
	cmd := exec.Command(testutil.BuildRace(t, "./cmd/bir-proxy"),
		"--server", "burst", "--journal", journal, "--journal-max-mb", "1000000", "--", exe, icFastServerArg)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "BIR_OFF=0", "XDG_STATE_HOME="+state, "BIR_RECORDER_URL=")
	p := testutil.Start(t, cmd)
	s := &testHost{Proc: p, t: t, out: framing.NewReader(p.Stdout)}

	body := icBurstBody(size)
	total := bursts * width
	// The writer keeps width calls in flight, sending the next as soon as one is
	// answered; the two run apart so neither side's pipe fills while the other waits.
	slots := make(chan struct{}, width)
	done := make(chan struct{})
	defer close(done)
	werr := make(chan error, 1)
	go func() {
		for id := 1; id <= total; id++ {
			select {
			case slots <- struct{}{}:
			case <-done:
				werr <- nil
				return
			}
			if err := s.Stdin.SetWriteDeadline(time.Now().Add(testutil.Guard)); err != nil {
				werr <- err
				return
			}
			if _, err := io.WriteString(s.Stdin, toolCall(id, icBurstArgs(fmt.Sprintf("c-%d", id), body))+"\n"); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	answered := map[int64]bool{}
	for len(answered) < total {
		msg, err := s.out.Read()
		if err != nil {
			t.Fatalf("reading from the proxy after %d answers: %v (stderr: %s)", len(answered), err, icTail(s.Stderr.String()))
		}
		id := gjson.GetBytes(msg, "id").Int()
		if !gjson.GetBytes(msg, "result").Exists() || answered[id] {
			t.Fatalf("call %d answered %s", id, msg[:min(len(msg), 300)])
		}
		answered[id] = true
		<-slots
	}
	if err := <-werr; err != nil {
		t.Fatalf("writing to the proxy: %v", err)
	}
	// The proxy exits once bookkeeping has drained its backlog, which under the race
	// detector on a loaded machine takes longer than the usual bound.
	s.Stdin.Close()
	drain := time.NewTimer(10 * time.Minute)
	defer drain.Stop()
	select {
	case <-s.Done():
	case <-drain.C:
		t.Fatalf("the proxy did not exit 10 minutes after the host closed stdin")
	}
	if code := s.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit status %d: %s", code, icTail(s.Stderr.String()))
	}
	if strings.Contains(s.Stderr.String(), "panic") {
		t.Fatalf("the proxy panicked: %s", icTail(s.Stderr.String()))
	}

	f, err := os.Open(journal)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reported := map[string]int{}
	outcomes := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		st := gjson.ParseBytes(sc.Bytes())
		reported[st.Get("callId").String()]++
		outcome := st.Get("outcome").String()
		if outcome == "rpc_error" && strings.Contains(st.Get("error.message").String(), "fell behind") {
			outcome = "not recorded" // a request the queue had no room for: so reported
		}
		outcomes[outcome]++
	}
	missing := 0
	for id := 1; id <= bursts*width; id++ {
		if reported[fmt.Sprintf("c-%d", id)] != 1 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d calls have no single report in the journal (%d lines)", missing, bursts*width, len(reported))
	}
	// Every call was answered: a report that says otherwise (upstream_lost at the
	// end) paired a shed answer with the wrong bytes.
	if outcomes["ok"]+outcomes["not recorded"] != total {
		t.Fatalf("outcomes %v, want %d ok or not recorded", outcomes, total)
	}
	t.Logf("outcomes %v; bookkeeping fell behind (shed): %v", outcomes, strings.Contains(s.Stderr.String(), "fell behind"))
}

// icFastServerArg, as its one argument, makes this test binary a fast MCP server
// (icFastServer) instead of
// running its tests: the proxy is then the slowest thing between the host and the
// server, as with a real server that answers at once, and rawserver is not (it reads
// every request with gjson, and the proxy waited on it).
// (An argument, not the environment: the proxy gives the server a filtered one.)
const icFastServerArg = "-bir-test-fast-server"

func init() {
	if len(os.Args) == 2 && os.Args[1] == icFastServerArg {
		os.Exit(icFastServer(os.Stdin, os.Stdout))
	}
}

// icFastAnswer is the text of every answer: a short page, longer than what is kept of an
// answer bookkeeping has no room for (a shed answer used to be read with the spans of
// the longer original: past its end).
var icFastAnswer = strings.Repeat("done; ", 300)

// icFastServer answers every request line (whose "id" member comes first after
// "jsonrpc", as toolCall writes them) with a small result, as soon as it is read,
// flushing when no more input is buffered.
func icFastServer(in io.Reader, out io.Writer) int {
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<16)
	for {
		line, err := r.ReadSlice('\n')
		for err == bufio.ErrBufferFull {
			_, err = r.ReadSlice('\n') // the rest of a line longer than the buffer
		}
		if err != nil {
			w.Flush()
			return 0
		}
		if i := bytes.Index(line, []byte(`"id":`)); i >= 0 && bytes.Contains(line[:min(len(line), 200)], []byte(`"method"`)) {
			rest := line[i+5:]
			end := bytes.IndexAny(rest, ",}")
			if end > 0 {
				w.WriteString(`{"jsonrpc":"2.0","id":`)
				w.Write(rest[:end])
				w.WriteString(`,"result":{"content":[{"type":"text","text":"` + icFastAnswer + `"}]}}` + "\n")
			}
		}
		if r.Buffered() == 0 {
			if w.Flush() != nil {
				return 1
			}
		}
	}
}

// icTail is the end of a long stderr, for a failure message.
func icTail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}
