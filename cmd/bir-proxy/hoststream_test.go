package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jcs"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// longCall is a tools/call of about size bytes whose arguments hold the correlation
// key between two members, and what the server must get of it: the key removed as
// intercept's strip removes it.
func longCall(id string, size int) (line, stripped string) {
	head := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"write","arguments":{"path":"/tmp/x", "_bir_call_id" : "c-` + id + `" ,"content":"`
	tail := `\n\"end\""}}}`
	line = head + strings.Repeat("0123456789abcdef", max(size-len(head)-len(tail), 0)/16) + tail
	stripped = strings.Replace(line, `"_bir_call_id" : "c-`+id+`" ,`, "", 1)
	if stripped == line {
		panic("longCall: nothing to strip")
	}
	return line, stripped
}

// rawAtLeast reads what the proxy sent the server until it has n bytes or a newline,
// whichever comes first, and returns it; the line is the test's alone (nothing was
// read ahead by s.in).
func (s *scripted) rawAtLeast(t *testing.T, n int) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		var b []byte
		buf := make([]byte, 64<<10)
		for len(b) < n {
			k, err := s.Conn.Read(buf)
			b = append(b, buf[:k]...)
			if err != nil || strings.IndexByte(string(buf[:k]), '\n') >= 0 {
				break
			}
		}
		got <- string(b)
	}()
	return testutil.Recv(t, got, "bytes at the server")
}

// rawLine reads the rest of the line the server is being sent, raw.
func (s *scripted) rawLine(t *testing.T) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		line, err := bufio.NewReaderSize(s.Conn, 1<<20).ReadString('\n')
		if err != nil {
			line += "(read error: " + err.Error() + ")"
		}
		got <- line
	}()
	return testutil.Recv(t, got, "the rest of the line at the server")
}

// handshake does the session's initialize through the rig.
func (r *streamRig) handshake(t *testing.T, s *scripted) {
	t.Helper()
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
	s.recvLine(t)
	s.print(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`+"\n")
	r.lines(1)
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.recvLine(t)
}

// sendPart writes part of a host line, no newline.
func (r *streamRig) sendPart(p string) {
	r.t.Helper()
	if _, err := io.WriteString(r.stdin, p); err != nil {
		r.t.Fatalf("writing to the proxy: %v", err)
	}
}

// TestLongHostCallReachesTheServerAsItArrives: a 2 MB tools/call goes to the server
// while the host is still writing it (the server has most of the first half before
// the host writes the second), with the correlation key removed exactly as from a
// whole line, at the default threshold and with every call streamed; its answer
// comes back.
func TestLongHostCallReachesTheServerAsItArrives(t *testing.T) {
	for _, threshold := range []string{"", "1"} {
		t.Run("threshold="+threshold, func(t *testing.T) {
			r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=" + threshold}, "--server", "s")
			s := r.server()
			r.handshake(t, s)
			line, stripped := longCall("7", 2<<20)
			half := len(line) / 2
			r.sendPart(line[:half])
			first := s.rawAtLeast(t, half/2)
			r.sendPart(line[half:] + "\n")
			got := first + s.rawLine(t)
			if got != stripped+"\n" {
				t.Fatalf("the server got %d bytes %.200q…%.100q, want the call without its key (%d bytes)", len(got), got, got[max(len(got)-100, 0):], len(stripped)+1)
			}
			s.print(t, `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`+"\n")
			if l := r.lines(2)[1]; l != `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}` {
				t.Fatalf("the host got %q", l)
			}
		})
	}
}

// TestLongHostCallIsRecordedAsWhole: recording, a streamed call's report (callId,
// tool, fingerprint, arguments) is the one the same call read whole gets; 4 MB of
// arguments, past the size jcs.Stream holds to fingerprint exactly.
func TestLongHostCallIsRecordedAsWhole(t *testing.T) {
	report := func(threshold string) map[string]any {
		journal := filepath.Join(t.TempDir(), "j.jsonl")
		r := startStreamRig(t, []string{"BIR_OFF=0", "BIR_STREAM_THRESHOLD=" + threshold}, "--server", "s", "--journal", journal)
		s := r.server()
		r.handshake(t, s)
		line, stripped := longCall("7", 4<<20)
		r.sendPart(line[:len(line)/2])
		r.sendPart(line[len(line)/2:] + "\n")
		if got := s.rawLine(t); got != stripped+"\n" {
			t.Fatalf("threshold %s: the server got %d bytes, want %d", threshold, len(got), len(stripped)+1)
		}
		s.print(t, `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}`+"\n")
		r.lines(2)
		r.stdin.Close()
		r.exited("the host closed its input")
		m := writeReport(t, journal)
		if m == nil {
			t.Fatalf("threshold %s: no report of the call in the journal", threshold)
		}
		return m
	}
	whole, streamed := report("0"), report("1")
	_, stripped := longCall("7", 4<<20)
	var msg struct {
		Params struct{ Arguments json.RawMessage }
	}
	if err := json.Unmarshal([]byte(stripped), &msg); err != nil {
		t.Fatal(err)
	}
	fp, err := jcs.Fingerprint(msg.Params.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"callId", "tool", "argsFingerprint", "args", "argsClipped", "outcome", "result"} {
		w, _ := json.Marshal(whole[k])
		g, _ := json.Marshal(streamed[k])
		if string(w) != string(g) {
			t.Errorf("%s: streamed %.200s, whole %.200s", k, g, w)
		}
	}
	if streamed["callId"] != "c-7" || streamed["argsFingerprint"] != fp || streamed["outcome"] != "ok" {
		t.Fatalf("streamed call's report: callId %v fingerprint %v outcome %v; want c-7 %s ok", streamed["callId"], streamed["argsFingerprint"], streamed["outcome"], fp)
	}
}

// TestServerDiesInTheMiddleOfALongHostCall: the server dies while a long call is
// being written to it; it is revived, the host gets one error answer for the call
// (and nothing of the call reaches the new server), and the next call goes through.
func TestServerDiesInTheMiddleOfALongHostCall(t *testing.T) {
	r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=1"}, "--server", "s")
	s := r.server()
	r.handshake(t, s)
	line, _ := longCall("7", 2<<20)
	half := len(line) / 2
	r.sendPart(line[:half])
	s.rawAtLeast(t, half/2)
	s.Close() // dies mid-line
	s2 := r.server()
	reviveTo(t, s2)
	got := r.endThenNextCall(t, s2, line[half:])
	if n := strings.Count(got, `"id":7,`); n != 1 || !strings.Contains(got, `"id":7,"error"`) {
		t.Fatalf("the host got %d answers for the call cut by the death, want one error: %s", n, got)
	}
}

// TestLongHostCallOverTheCap: a streamed call that passes --max-message gets the
// answer a call over the cap always gets, once, and the session goes on.
func TestLongHostCallOverTheCap(t *testing.T) {
	r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=1"}, "--server", "s", "--max-message", "300000")
	s := r.server()
	r.handshake(t, s)
	line, _ := longCall("7", 1<<20)
	for i := 0; i < len(line); i += 50000 {
		r.sendPart(line[i:min(i+50000, len(line))])
	}
	r.sendPart("\n")
	cut := s.rawLine(t)
	if len(cut) > 300001 || strings.Contains(cut, "_bir_call_id") {
		t.Fatalf("the server got %d bytes of the call over the cap (%.100q)", len(cut), cut)
	}
	got := r.waitHost("the answer to the call over the cap", func(got string) bool { return strings.Contains(got, `"id":7,`) })
	if !strings.Contains(got, `"id":7,"error":{"code":-32600`) || !strings.Contains(got, "over the proxy's --max-message cap") {
		t.Fatalf("the host got %s", got)
	}
	// The server answers the line it could not parse, as a JSON-RPC server does: that
	// error is not the host's, which got the answer a line over the cap gets, as if
	// the server had seen nothing. A later one, for a line of the host's, is.
	parseError := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`
	s.print(t, parseError+"\n")
	r.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
	if got := s.recvLine(t); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":8,`) {
		t.Fatalf("the server got %.200s, want the next call", got)
	}
	s.print(t, `{"jsonrpc":"2.0","id":8,"result":{"content":[]}}`+"\n"+parseError+"\n")
	lines := r.lines(4)
	if lines[2] != `{"jsonrpc":"2.0","id":8,"result":{"content":[]}}` || lines[3] != parseError {
		t.Fatalf("after the call over the cap, the host got %q, want the next call's answer and then the later parse error (and not the first); stderr: %s", lines[1:], r.stderr.String())
	}
}

// TestHostStallsInTheMiddleOfALongCall: the host stops writing in the middle of a
// long call and the server then exits: the proxy still ends, in bounded time.
func TestHostStallsInTheMiddleOfALongCall(t *testing.T) {
	r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=1"}, "--server", "s", "--no-revive")
	s := r.server()
	r.handshake(t, s)
	line, _ := longCall("7", 1<<20)
	r.sendPart(line[:len(line)/2])
	s.rawAtLeast(t, len(line)/4)
	start := time.Now()
	s.Close()
	r.exited("the server exited while the host stalled mid-call")
	t.Logf("the proxy exited %v after the server", time.Since(start))
}

// longCallIDLast is longCall as the TypeScript SDK writes a request: method, params,
// then jsonrpc and the id last.
func longCallIDLast(id string, size int) (line, stripped string) {
	line, stripped = longCall(id, size)
	head := `{"jsonrpc":"2.0","id":` + id + `,`
	move := func(s string) string {
		return "{" + strings.TrimSuffix(strings.TrimPrefix(s, head), "}") + `,"jsonrpc":"2.0","id":` + id + "}"
	}
	return move(line), move(stripped)
}

// TestLongHostCallWithItsIDLastStreams: a call whose id comes after its params (the
// TypeScript SDK's order: Claude Code, the Inspector) streams too, is answered, is
// recorded as read whole, and when the server dies in the middle of it, the host gets
// one error answer with its id.
func TestLongHostCallWithItsIDLastStreams(t *testing.T) {
	line, stripped := longCallIDLast("7", 2<<20)
	if !strings.HasSuffix(line, `"id":7}`) || !json.Valid([]byte(line)) || !json.Valid([]byte(stripped)) {
		t.Fatalf("the test's call is not what it means to be: %.100q…%.100q", line, line[len(line)-100:])
	}
	t.Run("answered and recorded", func(t *testing.T) {
		journal := filepath.Join(t.TempDir(), "j.jsonl")
		r := startStreamRig(t, []string{"BIR_OFF=0"}, "--server", "s", "--journal", journal)
		s := r.server()
		r.handshake(t, s)
		half := len(line) / 2
		r.sendPart(line[:half])
		first := s.rawAtLeast(t, half/2) // before the host wrote the rest (and the id)
		r.sendPart(line[half:] + "\n")
		if got := first + s.rawLine(t); got != stripped+"\n" {
			t.Fatalf("the server got %d bytes, want the call without its key (%d)", len(got), len(stripped)+1)
		}
		s.print(t, `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`+"\n")
		if l := r.lines(2)[1]; l != `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}` {
			t.Fatalf("the host got %q", l)
		}
		r.stdin.Close()
		r.exited("the host closed its input")
		b, _ := os.ReadFile(journal)
		if !strings.Contains(string(b), `"callId":"c-7"`) || !strings.Contains(string(b), `"outcome":"ok"`) || !strings.Contains(string(b), `"argsFingerprint":"sha256:`) {
			t.Fatalf("the journal has no complete report of the call: %.600s", b)
		}
	})
	t.Run("server dies mid-line", func(t *testing.T) {
		r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=1"}, "--server", "s")
		s := r.server()
		r.handshake(t, s)
		half := len(line) / 2
		r.sendPart(line[:half])
		s.rawAtLeast(t, half/2)
		s.Close()
		s2 := r.server()
		reviveTo(t, s2)
		got := r.endThenNextCall(t, s2, line[half:])
		if n := strings.Count(got, `"id":7,`); n != 1 || !strings.Contains(got, `"id":7,"error"`) {
			t.Fatalf("the host got %d answers for the call cut by the death, want one error: %s", n, got)
		}
	})
}
