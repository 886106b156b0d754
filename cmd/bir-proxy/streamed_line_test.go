package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// streamRig is the built proxy in front of testdata/sockserver, a server whose every
// byte the test writes through a TCP connection (scripted), with the host's side read
// as raw bytes: a streamed line's pieces are seen as they arrive, before its newline.
// The proxy is built with the race detector: its pumps and writers meet here.
type streamRig struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  *os.File
	host   *testutil.SyncBuffer // every byte the proxy wrote to the host
	stderr *testutil.SyncBuffer
	done   chan struct{}
	conns  chan net.Conn
}

// scripted is one server's connection: Write is what the server prints, in is what
// the proxy sent it.
type scripted struct {
	net.Conn
	in *framing.Reader
}

func startStreamRig(t *testing.T, env []string, proxyArgs ...string) *streamRig {
	t.Helper()
	bin := testutil.BuildRace(t, "./cmd/bir-proxy")
	srv := testutil.Build(t, "./cmd/bir-proxy/testdata/sockserver")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &streamRig{t: t, host: &testutil.SyncBuffer{}, stderr: &testutil.SyncBuffer{}, done: make(chan struct{}), conns: make(chan net.Conn, 8)}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.conns <- c
		}
	}()
	args := append(append(append([]string{}, proxyArgs...), "--", srv), ln.Addr().String())
	r.cmd = exec.Command(bin, args...)
	r.cmd.Env = append(append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "BIR_OFF=1"), env...)
	r.cmd.Stderr = r.stderr
	in, err := r.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.stdin = in.(*os.File)
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(r.host, out); close(copied) }()
	go func() { <-copied; _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.stdin.Close()
		_ = r.cmd.Process.Kill()
		<-r.done
		ln.Close()
		<-accepted
		close(r.conns)
		for c := range r.conns {
			c.Close()
		}
		if strings.Contains(r.stderr.String(), "DATA RACE") {
			t.Errorf("the proxy (built with the race detector) met a data race: %s", r.stderr.String())
		}
	})
	return r
}

// server waits for the next server the proxy starts.
func (r *streamRig) server() *scripted {
	r.t.Helper()
	c := testutil.Recv(r.t, r.conns, "the proxy to start the server")
	r.t.Cleanup(func() { c.Close() })
	return &scripted{Conn: c, in: framing.NewReader(c)}
}

// send writes a host line.
func (r *streamRig) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.stdin, line+"\n"); err != nil {
		r.t.Fatalf("writing to the proxy: %v", err)
	}
}

// waitHost waits until what the host got satisfies cond.
func (r *streamRig) waitHost(what string, cond func(got string) bool) string {
	r.t.Helper()
	if err := r.host.WaitUntil(testutil.Context(r.t), cond); err != nil {
		r.t.Fatalf("waiting for the host to get %s: %.300v (stderr: %s)", what, err, r.stderr.String())
	}
	return r.host.String()
}

// lines waits for n whole lines at the host and returns them.
func (r *streamRig) lines(n int) []string {
	r.t.Helper()
	got := r.waitHost(strconv.Itoa(n)+" lines", func(s string) bool { return strings.Count(s, "\n") >= n })
	return strings.Split(got, "\n")[:n]
}

// exited waits for the proxy to exit.
func (r *streamRig) exited(what string) {
	r.t.Helper()
	select {
	case <-r.done:
	case <-testutil.Context(r.t).Done():
		r.t.Fatalf("%s: the proxy did not exit (stderr: %s)", what, r.stderr.String())
	}
}

// recvLine is the next line the proxy sent the server.
func (s *scripted) recvLine(t *testing.T) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		m, err := s.in.Read()
		if err != nil {
			got <- "read error: " + err.Error()
			return
		}
		got <- string(m)
	}()
	return testutil.Recv(t, got, "a line at the server")
}

func (s *scripted) print(t *testing.T, b string) {
	t.Helper()
	if _, err := io.WriteString(s.Conn, b); err != nil {
		t.Fatalf("server writing: %v", err)
	}
}

// answerOf is a valid answer to id whose line is exactly size bytes.
func answerOf(id string, size int) string {
	head := `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"`
	tail := `"}]}}`
	return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
}

var _ = bytes.Equal
var _ = context.Background

// TestStreamedLineOfExactlyTheCapEndedByCRLF: an answer of exactly --max-message
// bytes ended by "\r\n" is within the cap (the "\r" is the terminator's, as the
// assembled path counts it). Streamed, when a read ended between the "\r" and the
// "\n", the "\r" was counted as the line's: the line was said over the cap, and the
// host, which had the whole valid answer already, got an error answer for the same
// id after it. Every threshold must give the host the same lines.
func TestStreamedLineOfExactlyTheCapEndedByCRLF(t *testing.T) {
	const max = 200_000
	for _, stream := range []string{"0", "1"} {
		t.Run("stream="+stream, func(t *testing.T) {
			r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=" + stream}, "--server", "s", "--no-revive", "--max-message", strconv.Itoa(max))
			s := r.server()
			r.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
			s.recvLine(t)
			answer := answerOf("7", max)
			s.print(t, answer+"\r")
			if stream != "0" {
				// All of it but the "\r" is at the host: the proxy's read ended there.
				r.waitHost("the streamed answer", func(got string) bool { return len(got) >= max })
			}
			s.print(t, "\n"+`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`+"\n")
			got := r.lines(2)
			if got[0] != answer+"\r" && got[0] != answer {
				t.Fatalf("the host's first line is %d bytes, %.80s…, want the answer", len(got[0]), got[0])
			}
			if !strings.Contains(got[1], "notifications/message") {
				t.Fatalf("after the answer the host got %.300s, want the server's next message", got[1])
			}
		})
	}
}

// TestStreamedLastLineWithoutNewline: a server that writes its last answer whole and
// valid but without a newline, then exits, meant it as a message: read whole, that
// answer is validated in full whatever its size and reaches the host. Streamed, a
// line over 1 MiB that the stream's end cut was never a message: the host got the
// whole valid answer and then an error answer for the same id.
func TestStreamedLastLineWithoutNewline(t *testing.T) {
	for _, stream := range []string{"0", "1"} {
		t.Run("stream="+stream, func(t *testing.T) {
			r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=" + stream}, "--server", "s", "--no-revive")
			s := r.server()
			r.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
			s.recvLine(t)
			answer := answerOf("7", 3<<20)
			s.print(t, answer)
			s.Close() // the server exits
			r.exited("the server ended")
			got := strings.Split(strings.TrimSuffix(r.host.String(), "\n"), "\n")
			if len(got) != 1 || got[0] != answer {
				t.Fatalf("the host got %d lines (the first %d bytes), want the one answer: %.300s", len(got), len(got[0]), got[len(got)-1])
			}
		})
	}
}

// TestServerStallsMidStreamedLine: a server that stops in the middle of a streamed
// answer, while the host goes on: the host's requests still reach the server, the
// proxy's own answer to the host (a request over the cap) waits behind the line
// instead of running into it, and when the host closes its stdin the proxy stops;
// the host then has the line ended, and whole lines after it: an error answer for
// the cut call, and the over-cap request's.
func TestServerStallsMidStreamedLine(t *testing.T) {
	r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=1"}, "--server", "s", "--no-revive", "--max-message", "100000")
	s := r.server()
	r.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
	s.recvLine(t)
	answer := answerOf("7", 90000)
	s.print(t, answer[:50000])
	r.waitHost("the streamed head", func(got string) bool { return len(got) >= 50000 })
	r.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"t","arguments":{"a":"` + strings.Repeat("y", 200000) + `"}}}`)
	r.send(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	got8 := s.recvLine(t)
	if strings.HasPrefix(got8, `{"jsonrpc":"2.0","id":8,`) {
		// The long call streamed to the server up to the cap, where it was ended
		// (docs/ARCHITECTURE.md, "Long messages, host → server"): a prefix only.
		if len(got8) > 100000 || strings.HasSuffix(got8, "}}}") {
			t.Fatalf("the server got %d bytes of the call over the cap", len(got8))
		}
		got8 = s.recvLine(t)
	}
	if !strings.Contains(got8, `"id":9`) {
		t.Fatalf("the server got %.200s, want the host's ping", got8)
	}
	if got := r.host.String(); got != answer[:50000] {
		t.Fatalf("while the line stalls the host got %d bytes, ending %q: something ran into the line", len(got), got[max(0, len(got)-200):])
	}
	r.stdin.Close()
	r.exited("the host closed its stdin")
	got := strings.Split(r.host.String(), "\n")
	if got[0] != answer[:50000] || got[len(got)-1] != "" {
		t.Fatalf("the host's first line: %d bytes; its last: %q", len(got[0]), got[len(got)-1])
	}
	ids := map[string]bool{}
	for _, l := range got[1 : len(got)-1] {
		id, ok := jsonID([]byte(l))
		if !ok || !strings.Contains(l, `"error"`) {
			t.Fatalf("after the cut line the host got %.300s", l)
		}
		ids[id] = true
	}
	if !ids["8"] || !ids["7"] {
		t.Fatalf("the host got error answers for %v, want 7 (cut) and 8 (over the cap); lines: %q", ids, got[1:])
	}
}

// TestProxyAnswersBehindAStalledLineDoNotStopTheSession: what the proxy writes to the
// host while a line streams waits behind it, up to 16 MiB; past that, the host pump
// that writes it waited for the line to end. A server stalled mid-line for good, and
// a host whose requests the proxy answers itself (here, requests over the cap), and
// the host pump no longer read: closing the host's stdin no longer stopped the proxy.
func TestProxyAnswersBehindAStalledLineDoNotStopTheSession(t *testing.T) {
	r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=1"}, "--server", "s", "--no-revive", "--max-message", "64")
	s := r.server()
	head := `{"jsonrpc":"2.0","id":7,"result":{"content":[`
	s.print(t, head)
	r.waitHost("the streamed head", func(got string) bool { return len(got) >= len(head) })
	sent := make(chan error, 1)
	go func() {
		// Each is over the cap of 64 and answered by the proxy (about 180 bytes):
		// more than 16 MiB of answers.
		var b strings.Builder
		for i := range 120_000 {
			b.WriteString(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"over"}}` + "\n")
			if b.Len() > 1<<20 {
				if _, err := io.WriteString(r.stdin, b.String()); err != nil {
					sent <- err
					return
				}
				b.Reset()
			}
		}
		_, err := io.WriteString(r.stdin, b.String())
		sent <- err
	}()
	if err := testutil.Recv(t, sent, "the host's requests to be read"); err != nil {
		t.Fatalf("writing the host's requests: %v", err)
	}
	// The server ends its answer at last: the host, which had only its head (the
	// line was ended early), gets an error answer for the call instead.
	s.print(t, `]}}`+"\n")
	r.waitHost("an error answer for the stalled call", func(got string) bool {
		return strings.Contains(got, `{"jsonrpc":"2.0","id":7,"error":`)
	})
	r.stdin.Close()
	r.exited("the host closed its stdin")
	got := strings.Split(strings.TrimSuffix(r.host.String(), "\n"), "\n")
	if got[0] != head {
		t.Fatalf("the host's first line is %.200q, want the stalled line's head, ended", got[0])
	}
	for _, l := range got[1:] {
		if !json.Valid([]byte(l)) {
			t.Fatalf("after the stalled line the host got %.300q", l)
		}
	}
	if len(got) < 120_002 {
		t.Fatalf("the host got %d lines, want an answer for each of its 120000 requests and the call", len(got)-1)
	}
}

// TestRevivalAfterADeathMidStreamedLine: a server that dies in the middle of a
// streamed answer is revived; with every line that decides streamed, the host gets
// the cut line ended, an error answer for that call, none of the re-handshake (its
// answers are the proxy's own, and its initialize answer is long), and the next
// call goes to the new server and back whole.
func TestRevivalAfterADeathMidStreamedLine(t *testing.T) {
	r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=1"}, "--server", "s")
	s := r.server()
	initResult := `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"},"instructions":"` + strings.Repeat("i", 100000) + `"}`
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
	s.recvLine(t)
	s.print(t, `{"jsonrpc":"2.0","id":1,"result":`+initResult+`}`+"\n")
	r.lines(1)
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.recvLine(t)
	r.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
	s.recvLine(t)
	answer := answerOf("7", 300000)
	before := len(r.host.String())
	s.print(t, answer[:150000])
	r.waitHost("the streamed head", func(got string) bool { return len(got) >= before+150000 })
	s.Close() // the server dies mid-line
	s2 := r.server()
	init2 := s2.recvLine(t)
	id, ok := jsonID([]byte(init2))
	if !ok || !strings.Contains(init2, `"initialize"`) || !strings.HasPrefix(id, `"bir:`) {
		t.Fatalf("the new server got %.200s, want the re-handshake's initialize", init2)
	}
	s2.print(t, `{"jsonrpc":"2.0","id":`+id+`,"result":`+initResult+`}`+"\n")
	if got := s2.recvLine(t); !strings.Contains(got, "notifications/initialized") {
		t.Fatalf("the new server got %.200s, want notifications/initialized", got)
	}
	r.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
	if got := s2.recvLine(t); !strings.Contains(got, `"id":8`) {
		t.Fatalf("the new server got %.200s, want the host's call", got)
	}
	answer8 := answerOf("8", 200000)
	s2.print(t, answer8+"\n")
	got := r.waitHost("the next call's answer", func(got string) bool { return strings.Contains(got, answer8+"\n") })
	lines := strings.Split(strings.TrimSuffix(got[before:], "\n"), "\n")
	if lines[0] != answer[:150000] {
		t.Fatalf("the cut line reached the host as %d bytes", len(lines[0]))
	}
	var saw7 bool
	for _, l := range lines[1 : len(lines)-1] {
		id, _ := jsonID([]byte(l))
		if strings.HasPrefix(id, `"bir:`) || !json.Valid([]byte(l)) {
			t.Fatalf("the host got %.300s", l)
		}
		saw7 = saw7 || id == "7" && strings.Contains(l, `"error"`)
	}
	if !saw7 || lines[len(lines)-1] != answer8 {
		t.Fatalf("after the cut line the host got %q…, want an error answer for 7 and then 8's answer", lines[1:len(lines)-1])
	}
}

// TestStreamedBytesAreTheAssembledOnes: lines that end as messages — a server's
// request, a notification whose id comes last, an escaped id, a batch, CRLF and
// blank-padded lines, an own-namespace answer (dropped), small lines between long
// ones — reach the host as the same bytes whether every line that decides is
// streamed or none is, written in pieces that cut them at many places.
func TestStreamedBytesAreTheAssembledOnes(t *testing.T) {
	big := strings.Repeat(`a\"b\\c\u00e9 `, 20000)
	script := []string{
		`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"text":"` + big + `"}}` + "\n",
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"t":"` + big + `"},"id":5}` + "\r\n",
		`{"jsonrpc":"2.0","id":"\u0037","result":{"t":"` + big + `"}}` + "\n",
		`[{"jsonrpc":"2.0","method":"notifications/message","params":{"t":"` + big + `"}},{"jsonrpc":"2.0","id":3,"result":{}}]` + "\n",
		`{"jsonrpc":"2.0","id":"bir:99","result":{"t":"` + big + `"}}` + "\n",
		"  \t" + `{"jsonrpc":"2.0","id":4,"result":{"t":"` + big + `"}}` + " \r\r\n",
		`{"jsonrpc":"2.0","method":"m","params":{}}` + "\n" + `{"jsonrpc":"2.0","id":6,"result":{}}` + "\n",
		`{"jsonrpc":"2.0","id":9,"error":{"code":1,"message":"` + big + `"}}` + "\r",
		"\n" + `{"jsonrpc":"2.0","method":"end","params":{}}` + "\n",
	}
	run := func(stream string) string {
		r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=" + stream}, "--server", "s", "--no-revive")
		s := r.server()
		for _, l := range script {
			for i := 0; i < len(l); i += 7919 {
				s.print(t, l[i:min(i+7919, len(l))])
			}
		}
		// The whole last line, its newline too: the host's output is read as it
		// comes, and a check that saw "end" before its newline compared 10 lines
		// with 11.
		return r.waitHost("the last message", func(got string) bool { return strings.Contains(got, `"method":"end","params":{}}`+"\n") })
	}
	whole, streamed := run("0"), run("1")
	if whole != streamed {
		w, s := strings.Split(whole, "\n"), strings.Split(streamed, "\n")
		for i := range min(len(w), len(s)) {
			if w[i] != s[i] {
				t.Fatalf("line %d differs: whole %d bytes %.120q, streamed %d bytes %.120q", i, len(w[i]), w[i], len(s[i]), s[i])
			}
		}
		t.Fatalf("whole: %d lines, streamed: %d", len(w), len(s))
	}
}

// TestStreamedServerRequestOverTheCap: a request of the server's streamed to the host
// that passes --max-message is ended at the cap, and the server, which waits for an
// answer, gets an error answer with its id; the next message is whole.
func TestStreamedServerRequestOverTheCap(t *testing.T) {
	r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=1"}, "--server", "s", "--no-revive", "--max-message", "100000")
	s := r.server()
	req := `{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"t":"` + strings.Repeat("q", 200000) + `"}}`
	s.print(t, req+"\n"+`{"jsonrpc":"2.0","method":"after","params":{}}`+"\n")
	if got := s.recvLine(t); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":"s1","error":{`) {
		t.Fatalf("the server got %.300s, want an error answer for its request", got)
	}
	got := r.lines(2)
	if got[0] != req[:100000] || got[1] != `{"jsonrpc":"2.0","method":"after","params":{}}` {
		t.Fatalf("the host got a %d-byte line, then %.200q", len(got[0]), got[1])
	}
}
