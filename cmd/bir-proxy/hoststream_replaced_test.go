package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reviveTo answers the re-handshake of a server the proxy started after a death.
func reviveTo(t *testing.T, s *scripted) {
	t.Helper()
	init := s.recvLine(t)
	id, ok := jsonID([]byte(init))
	if !ok || !strings.Contains(init, `"initialize"`) {
		t.Fatalf("the new server got %.200s, want the re-handshake's initialize", init)
	}
	s.print(t, `{"jsonrpc":"2.0","id":`+id+`,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`+"\n")
	if got := s.recvLine(t); !strings.Contains(got, "notifications/initialized") {
		t.Fatalf("the new server got %.200s, want notifications/initialized", got)
	}
}

// endThenNextCall writes rest, the end of a long call, and then a short call, which
// must be the next line s gets (nothing of the long call reaches it); s answers it,
// and what the host got by then is returned.
func (r *streamRig) endThenNextCall(t *testing.T, s *scripted, rest string) string {
	t.Helper()
	r.sendPart(rest + "\n")
	r.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
	if got := s.recvLine(t); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":8,`) {
		t.Fatalf("the new server got %.200s, want the host's next call (the long one was answered as lost)", got)
	}
	s.print(t, `{"jsonrpc":"2.0","id":8,"result":{}}`+"\n")
	return r.waitHost("the next call's answer", func(got string) bool { return strings.Contains(got, `"id":8,"result"`) })
}

// TestLongHostCallGatheredWhileReplacedIsNotSentAfterItsAnswer: a long call that
// begins while no server serves (one is being revived) is gathered whole, to be held
// for the next server. If the server that comes up dies before the call's end, the
// call is settled with the others in flight (the host gets an error answer for it);
// it must then not go to the server after that one, which would run the tool the
// host was told failed and answer the host a second time.
func TestLongHostCallGatheredWhileReplacedIsNotSentAfterItsAnswer(t *testing.T) {
	r := startStreamRig(t, []string{"BIR_STREAM_THRESHOLD=1"}, "--server", "s")
	s := r.server()
	r.handshake(t, s)
	s.Close() // dies with nothing in flight: the next is started
	s2 := r.server()
	init := s2.recvLine(t) // its re-handshake waits for the test: no server serves
	line, _ := longCall("7", 2<<20)
	half := len(line) / 2
	// Written, the proxy has read most of it (a pipe holds 64 KiB): the call began
	// while no server served, and is being gathered whole.
	r.sendPart(line[:half])
	id, _ := jsonID([]byte(init))
	s2.print(t, `{"jsonrpc":"2.0","id":`+id+`,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`+"\n")
	if got := s2.recvLine(t); !strings.Contains(got, "notifications/initialized") {
		t.Fatalf("the new server got %.200s, want notifications/initialized", got)
	}
	// Something of it reaches the relay, so its death loses what was in flight.
	s2.print(t, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"up"}}`+"\n")
	r.waitHost("the server's notification", func(got string) bool { return strings.Contains(got, `"data":"up"`) })
	s2.Close()
	r.waitHost("the call's error answer, as lost with its server", func(got string) bool { return strings.Contains(got, `"id":7,"error"`) })
	s3 := r.server()
	reviveTo(t, s3)
	got := r.endThenNextCall(t, s3, line[half:])
	if n := strings.Count(got, `"id":7,`); n != 1 {
		t.Fatalf("the host got %d answers for the long call, want one: %s", n, got)
	}
}

// TestLongHostCallWithoutNewlineIsRecorded: a host that writes its last call
// without a final newline and closes its input still meant it as a message: read
// whole, it is forwarded and recorded. Streamed, the server got it (with the
// newline) and ran it, but interception never saw it: the journal had no report of a
// call that ran.
func TestLongHostCallWithoutNewlineIsRecorded(t *testing.T) {
	for _, threshold := range []string{"0", "1"} {
		t.Run("threshold="+threshold, func(t *testing.T) {
			journal := filepath.Join(t.TempDir(), "j.jsonl")
			r := startStreamRig(t, []string{"BIR_OFF=0", "BIR_STREAM_THRESHOLD=" + threshold}, "--server", "s", "--journal", journal)
			s := r.server()
			r.handshake(t, s)
			line, stripped := longCall("7", 256<<10)
			r.sendPart(line)
			r.stdin.Close()
			if got := s.rawLine(t); got != stripped+"\n" {
				t.Fatalf("the server got %d bytes, want the call without its key (%d bytes)", len(got), len(stripped)+1)
			}
			s.print(t, `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}`+"\n")
			r.waitHost("the call's answer", func(got string) bool { return strings.Contains(got, `"id":7,"result"`) })
			s.Close()
			r.exited("the host closed its input")
			m := writeReport(t, journal)
			if m == nil || m["callId"] != "c-7" || m["outcome"] != "ok" {
				t.Fatalf("the call's report: %v, want one with callId c-7, outcome ok", m)
			}
		})
	}
}

// writeReport is the journal's report of the call to the tool "write", nil when
// there is none.
func writeReport(t *testing.T, journal string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["tool"] == "write" {
			return m
		}
	}
	t.Logf("no report of the call to write in the journal: %.500s", b)
	return nil
}
