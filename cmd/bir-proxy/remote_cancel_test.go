package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

func fdCount(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Issue 21 item 9: a session-era request the host cancels, on a server that never
// answers an aborted request (the TypeScript SDK's), kept its response stream open:
// fds 9 → 109 after 100 cancels. After the grace (2 s) each is closed: the proxy's fds
// come back to where they were, and the host gets no answer for the cancelled calls.
// Half the calls hang after their event-stream headers (as the SDK does), half before
// any header (a JSON-answering server that never answers).
func TestRemoteCancelledStreamsAreClosed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	srv := startRawServer(t, func(r *rawReq, w *bufio.Writer, done <-chan struct{}) {
		method, id := rpcMethod(r.Body), rpcID(r.Body)
		switch {
		case r.Method == "GET":
			writeResp(w, "405 Method Not Allowed", nil, "")
		case r.Method == "DELETE":
			writeResp(w, "200 OK", nil, "")
		case method == "initialize":
			writeResp(w, "200 OK", []string{"Content-Type: application/json", "Mcp-Session-Id: sess-cancel-1"},
				`{"jsonrpc":"2.0","id":`+id+`,"result":`+rawInitResult+`}`)
		case id == "":
			writeResp(w, "202 Accepted", nil, "")
		case method == "ping":
			writeResp(w, "200 OK", []string{"Content-Type: application/json"}, `{"jsonrpc":"2.0","id":`+id+`,"result":{}}`)
		default:
			var n int
			fmt.Sscan(id, &n)
			if n%2 == 0 {
				w.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n")
				w.Flush()
			}
			<-done // never answers
		}
	})
	s := startProxy(t, nil, "--server", "silent", "--url", srv.URL+"/mcp", "--transport", "http")
	s.Send(remoteInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if ans := s.recv(); !gjson.Get(ans, "result.serverInfo").Exists() {
		t.Fatalf("initialize: %s", ans)
	}
	pid := s.Cmd.Process.Pid
	s.Send(`{"jsonrpc":"2.0","id":"p0","method":"ping"}`)
	s.recv()
	base := fdCount(t, pid)
	const calls = 100
	for i := 1; i <= calls; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{}}}`, i))
	}
	// Every call is on the wire (its connection open) before the cancels go.
	ctx := testutil.Context(t)
	for fdCount(t, pid) < base+calls/2 {
		select {
		case <-ctx.Done():
			t.Fatalf("the calls never opened their connections: %d fds, %d at start", fdCount(t, pid), base)
		case <-time.After(20 * time.Millisecond):
		}
	}
	for i := 1; i <= calls; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"user"}}`, i))
	}
	peak := fdCount(t, pid)
	// The streams close after the grace: wait for it (bounded), never for a fixed time.
	deadline := time.Now().Add(20 * time.Second)
	n := fdCount(t, pid)
	for n > base+4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		n = fdCount(t, pid)
	}
	t.Logf("fds: %d before the calls, %d with them in flight, %d after the cancels' grace", base, peak, n)
	if n > base+4 {
		t.Fatalf("after %d cancels the proxy holds %d fds, %d before: the cancelled streams stay open", calls, n, base)
	}
	// The host got nothing for the cancelled calls: the next answer is the ping's.
	s.Send(`{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
	if ans := s.recv(); gjson.Get(ans, "id").String() != "p1" {
		t.Fatalf("the host got %s, want the ping's answer (nothing for cancelled calls)", ans)
	}
	s.Stdin.Close()
	s.ExitCode()
}
