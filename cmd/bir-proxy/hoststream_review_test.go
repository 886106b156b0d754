package main

import (
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
	r.sendPart(line[half:] + "\n")
	r.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
	if got := s3.recvLine(t); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":8,`) {
		t.Fatalf("the third server got %.200s, want the host's next call (the long one was answered as lost)", got)
	}
	s3.print(t, `{"jsonrpc":"2.0","id":8,"result":{}}`+"\n")
	got := r.waitHost("the next call's answer", func(got string) bool { return strings.Contains(got, `"id":8,"result"`) })
	if n := strings.Count(got, `"id":7,`); n != 1 {
		t.Fatalf("the host got %d answers for the long call, want one: %s", n, got)
	}
}
