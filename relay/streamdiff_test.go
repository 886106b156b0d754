package relay_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/upstream"
)

// The scripted server: this test binary, run with scriptEnv set to a file. It
// reads scriptWaitEnv lines from stdin, then copies the file to its stdout, creates
// the file scriptDoneEnv names, then reads stdin to its end. What it writes is all
// the test's: a hostile server's lines.
const (
	scriptEnv     = "BIR_RELAY_TEST_SCRIPTED_SERVER"
	scriptWaitEnv = "BIR_RELAY_TEST_SCRIPTED_WAIT"
	scriptDoneEnv = "BIR_RELAY_TEST_SCRIPTED_DONE"
	// Or, with recordEnv set to a file, it writes all it reads to it, and says
	// nothing.
	recordEnv = "BIR_RELAY_TEST_RECORDING_SERVER"
)

func init() {
	if rec := os.Getenv(recordEnv); rec != "" {
		f, err := os.Create(rec)
		if err != nil {
			os.Exit(3)
		}
		if _, err := io.Copy(f, os.Stdin); err != nil {
			os.Exit(4)
		}
		if f.Close() != nil {
			os.Exit(5)
		}
		os.Exit(0)
	}
	path := os.Getenv(scriptEnv)
	if path == "" {
		return
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	n, _ := strconv.Atoi(os.Getenv(scriptWaitEnv))
	for range n {
		if _, err := in.ReadSlice('\n'); err != nil && err != bufio.ErrBufferFull {
			break
		}
	}
	f, err := os.Open(path)
	if err != nil {
		os.Exit(3)
	}
	if _, err := io.Copy(os.Stdout, f); err != nil {
		os.Exit(4)
	}
	if done := os.Getenv(scriptDoneEnv); done != "" {
		if os.WriteFile(done, nil, 0o600) != nil {
			os.Exit(5)
		}
	}
	_, _ = io.Copy(io.Discard, in)
	os.Exit(0)
}

// collected is a Sink that keeps what every report says (at once: its raw fields
// are the caller's scratch).
type collected struct {
	mu    sync.Mutex
	steps []string
}

func (c *collected) Submit(st report.Step) {
	id := ""
	if st.CallID != nil {
		id = *st.CallID
	}
	s := fmt.Sprintf("tool=%s call=%s args=%s fp=%s argsClipped=%v outcome=%s result=%s clipped=%v error=%s resultBytes=%d",
		st.Tool, id, st.Args, st.ArgsFingerprint, st.ArgsClipped, st.Outcome, st.Result, st.ResultClipped, st.Error, st.ResultBytes)
	c.mu.Lock()
	c.steps = append(c.steps, s)
	c.mu.Unlock()
}

// sorted is a sorted copy of the steps submitted (the order of two calls' reports
// is bookkeeping's, not the wire's).
func (c *collected) sorted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.steps)
	sort.Strings(out)
	return out
}
func (c *collected) Learned(report.ServerFacts) {}

// startWithPipes starts the test binary self as the server, with env, and makes the
// host's two pipes (the relay's ends: inR, outW; the test's: inW, outR). end closes
// the server and the test's read ends.
func startWithPipes(t *testing.T, self string, env []string, name string, slab bool) (proc *upstream.Process, inR, inW, outR, outW *os.File, end func()) {
	t.Helper()
	proc, err := upstream.Start(upstream.Command{Path: self, Env: env, Name: name, Slab: slab, MaxMessage: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if inR, inW, err = os.Pipe(); err == nil {
		outR, outW, err = os.Pipe()
	}
	if err != nil {
		proc.Close()
		t.Fatal(err)
	}
	return proc, inR, inW, outR, outW, func() {
		inR.Close()
		outR.Close()
		proc.Close()
	}
}

// pipeRun is what the host got, and what was recorded, of one session in which the
// host sends calls 1..calls and closes its input, and the server answers with script.
type pipeRun struct {
	host  []string
	steps []string
}

func runScripted(t *testing.T, script string, calls, threshold int, slab, record bool) pipeRun {
	t.Helper()
	path := t.TempDir() + "/script"
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	done := t.TempDir() + "/written"
	env := append(os.Environ(), scriptEnv+"="+path, scriptWaitEnv+"="+strconv.Itoa(calls), scriptDoneEnv+"="+done)
	proc, inR, inW, outR, outW, end := startWithPipes(t, self, env, "scripted", slab)
	defer end()
	_ = outR.SetReadDeadline(time.Now().Add(testutil.Guard))
	sink := &collected{}
	var ic relay.Interceptor
	var icClose func()
	if record {
		i := intercept.New(intercept.Options{Sink: sink})
		ic, icClose = i, i.Close
	}
	r := relay.New(relay.Options{HostIn: inR, HostOut: outW, Upstream: proc, Intercept: ic, IDPrefix: "bir:test:", StreamThreshold: threshold, MaxMessage: 1 << 20})
	ran := make(chan error, 1)
	go func() {
		ran <- r.Run(context.Background())
		outW.Close()
	}()
	hw := framing.NewWriter(inW)
	for i := 1; i <= calls; i++ {
		if err := hw.Write([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"t` + strconv.Itoa(i) + `","arguments":{}}}`)); err != nil {
			t.Fatal(err)
		}
	}
	var run pipeRun
	hr := framing.NewReader(outR, framing.WithMaxMessage(8<<20))
	got := make(chan struct{})
	go func() {
		defer close(got)
		for {
			msg, err := hr.Read()
			if err != nil {
				return
			}
			run.host = append(run.host, string(msg))
		}
	}()
	// The host's end once the server has printed all (it waits for the calls first):
	// the session ends gently, every line delivered. Not before: the relay gives the
	// server's last lines a second (pumpGrace) once the host has gone, and under load
	// megabytes of the script still in the pipe took longer (the last call was then
	// reported lost in one run and answered in the other).
	waitForFile(t, done)
	inW.Close()
	testutil.Recv(t, got, "the host's output to end")
	if err := testutil.Recv(t, ran, "Run to return"); err != nil {
		t.Logf("Run: %v", err)
	}
	if icClose != nil {
		icClose()
	}
	run.steps = sink.sorted()
	return run
}

// hostileScript is a server's output meant to find where a line streamed as it
// arrives (BIR_STREAM_THRESHOLD=1) and one read whole part ways: lines that end at
// the read buffer's boundaries, duplicate and odd ids, ids of calls never sent, a
// late "method", escapes, NUL and invalid UTF-8 in strings, batches, an answer of the
// proxy's own namespace, blank lines, a last line without its newline.
func hostileScript() string {
	var b strings.Builder
	pad := func(id string, n int) string {
		// An answer of exactly n bytes.
		head := `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"`
		tail := `"}]}}`
		return head + strings.Repeat("p", n-len(head)-len(tail)) + tail
	}
	b.WriteString(pad("1", 65535) + "\n")   // its newline the buffer's last byte
	b.WriteString(pad("2", 65536) + "\n")   // one past
	b.WriteString(pad("3", 65534) + "\r\n") // "\r" the buffer's last byte
	b.WriteString(`{"jsonrpc":"2.0","id":4,"result":{"isError":true,"content":[]},"id":5}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":{}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":1e400,"result":{}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":"\u0036","result":{"content":[{"type":"text","text":"esc \" \\ \n \u0000"}]}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":"bir:test:9","result":{}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":"\u0062ir:test:9","result":{}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}` + "\n")
	b.WriteString("\n   \n\t\r\n")
	b.WriteString(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"nul ` + "\x00" + ` bad ` + "\xff\xfe" + ` utf8"}]}}` + "\n")
	b.WriteString(`[{"jsonrpc":"2.0","id":8,"result":{}},{"jsonrpc":"2.0","method":"notifications/message","params":{}}]` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"` + strings.Repeat("q", 200000) + `"}]},"id":9,"method":"sampling/createMessage"}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":10,"error":{"code":-32000,"message":"` + strings.Repeat("e", 100000) + `"}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":11,"result":{"resultType":"input_required","content":[]}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":99,"result":{}}` + "\n") // never asked
	b.WriteString(`{"jsonrpc":"2.0","id":12,"result":{"content":[]},"result":{"isError":true,"content":[{"type":"text","text":"second"}]}}` + "\n")
	b.WriteString(`  {"jsonrpc":"2.0","id":13,"result":{}}  ` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":14,"result":{"content":[{"type":"text","text":"` + strings.Repeat("\\\"", 80000) + `"}]}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":15,"result":` + strings.Repeat("[", 3000) + strings.Repeat("]", 3000) + `}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"the first of two"}]}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a second answer"}]}}` + "\n")
	b.WriteString(pad("17", 1<<20) + "\n")                                                                                                 // exactly the cap
	b.WriteString(pad("18", 1<<20) + "\r\n")                                                                                               // the cap, and its "\r"
	b.WriteString(pad("19", 1<<20+1) + "\n")                                                                                               // one over
	b.WriteString(pad("20", 3<<20) + "\n")                                                                                                 // well over
	b.WriteString(pad("21", 256<<10-1) + "\n")                                                                                             // the stream buffer's size
	b.WriteString(pad("22", 65536) + "\n")                                                                                                 // the threshold
	b.WriteString(`{"result":{"content":[{"type":"text","text":"` + strings.Repeat("t", 200000) + `"}]},"jsonrpc":"2.0","id":98}` + "\n")  // routed by its end
	b.WriteString(`{"result":{"content":[{"type":"text","text":"` + strings.Repeat("t", 200000) + `"}]},"jsonrpc":"2.0","id":97}}` + "\n") // and no message
	b.WriteString(`{"jsonrpc":"2.0","id":16,"result":{}}`)                                                                                 // no newline: the server's last line
	return b.String()
}

// TestStreamedAndAssembledAgree: whatever the server sends, a session in which every
// line streams (threshold 1) and one in which lines are read whole (the default)
// give the host the same bytes and record the same results; lent lines (Slab) too.
// (The lines read whole are those under baseThreshold.)
func TestStreamedAndAssembledAgree(t *testing.T) {
	script := hostileScript()
	for _, record := range []bool{false, true} {
		base := runScripted(t, script, 22, baseThreshold, false, record)
		if len(base.host) < 15 {
			t.Fatalf("the host got %d lines: %.300q", len(base.host), base.host)
		}
		if record && len(base.steps) != 22 {
			t.Fatalf("recorded %d steps: %q", len(base.steps), base.steps)
		}
		for _, c := range []struct {
			threshold int
			slab      bool
		}{{1, false}, {baseThreshold, !record}, {1, !record}} {
			got := runScripted(t, script, 22, c.threshold, c.slab, record)
			name := fmt.Sprintf("threshold %d slab %v record %v", c.threshold, c.slab, record)
			if d := firstDiff(base.host, got.host); d != "" {
				t.Errorf("%s: the host got other lines: %s", name, d)
			}
			if d := firstDiff(base.steps, got.steps); d != "" {
				t.Errorf("%s: other steps recorded: %s", name, d)
			}
		}
	}
}

// baseThreshold is what these runs compare threshold 1 with: 64 KiB, the default
// until the default became 4 MiB (relay.DefaultStreamThreshold), where the script's
// long lines are read whole. Streamed from 64 KiB they stream in both runs, and what
// is compared is where a line starts streaming, not whether (a line over the cap, or
// an error over 64 KiB, is said otherwise when streamed: docs/ARCHITECTURE.md).
const baseThreshold = 64 << 10

func firstDiff(a, b []string) string {
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("line %d (of %d and %d):\n  whole    %.400q\n  streamed %.400q", i, len(a), len(b), x, y)
		}
	}
	return ""
}

// runRecorded is what the server received, and what was recorded, of a session in
// which the host writes script (in pieces of piece bytes) and closes its input.
func runRecorded(t *testing.T, script string, piece, threshold int, slab bool) pipeRun {
	t.Helper()
	path := t.TempDir() + "/received"
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), recordEnv+"="+path)
	proc, inR, inW, outR, outW, end := startWithPipes(t, self, env, "recording", slab)
	defer end()
	_ = inW.SetWriteDeadline(time.Now().Add(testutil.Guard))
	_ = outR.SetReadDeadline(time.Now().Add(testutil.Guard))
	sink := &collected{}
	ic := intercept.New(intercept.Options{Sink: sink})
	r := relay.New(relay.Options{HostIn: inR, HostOut: outW, Upstream: proc, Intercept: ic, IDPrefix: "bir:test:", StreamThreshold: threshold, MaxMessage: 1 << 20})
	ran := make(chan error, 1)
	go func() {
		ran <- r.Run(context.Background())
		outW.Close()
	}()
	var run pipeRun
	got := make(chan struct{})
	go func() {
		defer close(got)
		hr := framing.NewReader(outR, framing.WithMaxMessage(8<<20))
		for {
			msg, err := hr.Read()
			if err != nil {
				return
			}
			run.host = append(run.host, string(msg))
		}
	}()
	for i := 0; i < len(script); i += piece {
		if _, err := inW.Write([]byte(script[i:min(i+piece, len(script))])); err != nil {
			t.Fatal(err)
		}
	}
	inW.Close()
	testutil.Recv(t, got, "the host's output to end")
	if err := testutil.Recv(t, ran, "Run to return"); err != nil {
		t.Logf("Run: %v", err)
	}
	ic.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	run.host = append(run.host, strings.Split(string(b), "\n")...)
	run.steps = sink.sorted()
	return run
}

// hostScript is a host's lines meant to find where a call streamed to the server
// as it arrives and one read whole part ways.
func hostScript() string {
	var b strings.Builder
	call := func(id string, n int, idLast bool) string {
		head := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"t","arguments":{"_bir_call_id":"c` + id + `","a":"`
		tail := `"}}}`
		if idLast {
			head = `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t","arguments":{"a":"`
			tail = `","_bir_call_id":"c` + id + `"}},"id":` + id + `}`
		}
		return head + strings.Repeat("h", max(n-len(head)-len(tail), 0)) + tail
	}
	b.WriteString(call("1", 100, false) + "\n")
	b.WriteString(call("2", 65535, false) + "\n")
	b.WriteString(call("3", 65536, true) + "\r\n")
	b.WriteString(call("4", 200000, true) + "\n")
	b.WriteString("\n \t \r\n")
	b.WriteString(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","arguments":{"_bir_call_id":"c5","a":"nul ` + "\x00 \xff" + `"}}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}` + "\n")
	b.WriteString(`[{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"t","arguments":{"_bir_call_id":"c6"}}}]` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"_bir_call_id":"c7","a":"` + strings.Repeat("q", 70000) + `"}},"id":8}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t","arguments":{"_bir_call\u005fid":"c9","a":"` + strings.Repeat("\\\"", 40000) + `"}}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"arguments":{"_bir_call_id":"c10","a":"` + strings.Repeat("z", 70000) + `"},"name":"late"}}` + "\n")
	b.WriteString(call("11", 300, false)) // no newline: the host's last line
	return b.String()
}

// TestHostStreamedAndAssembledAgree: whatever the host sends (within the cap), a
// session in which every call streams to the server (threshold 1) and one in which
// calls are read whole give the server the same bytes and record the same steps.
func TestHostStreamedAndAssembledAgree(t *testing.T) {
	script := hostScript()
	base := runRecorded(t, script, 1<<20, 0, false)
	if len(base.steps) != 10 {
		t.Logf("recorded %d steps: %.200q", len(base.steps), base.steps)
	}
	for _, c := range []struct{ piece, threshold int }{{1 << 20, 1}, {4093, 1}, {4093, 0}} {
		got := runRecorded(t, script, c.piece, c.threshold, false)
		name := fmt.Sprintf("pieces of %d, threshold %d", c.piece, c.threshold)
		if d := firstDiff(base.host, got.host); d != "" {
			t.Errorf("%s: the server got other lines: %s", name, d)
		}
		if d := firstDiff(base.steps, got.steps); d != "" {
			t.Errorf("%s: other steps recorded: %s", name, d)
		}
	}
}

// waitForFile waits, within testutil.Guard, for path to exist.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(testutil.Guard)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, testutil.Guard)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
