package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestRemoteFailedCallsAnsweredOnceUnderConcurrency: eight calls at once, every other
// one refused with HTTP 500, the rest answered on their SSE streams; then the server
// sends late answers for the refused ones on its GET stream. Each id is answered
// exactly once (the proxy's error for the refused ones, the server's result for the
// rest), and the late answers never reach the host.
func TestRemoteFailedCallsAnsweredOnceUnderConcurrency(t *testing.T) {
	late := make(chan string, 16)
	srv := startRawServer(t, func(r *rawReq, w *bufio.Writer, done <-chan struct{}) {
		id := rpcID(r.Body)
		switch {
		case r.Method == "GET":
			w.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
			w.Flush()
			for {
				select {
				case <-done:
					return
				case ev := <-late:
					ev = "data: " + ev + "\n\n"
					fmt.Fprintf(w, "%x\r\n%s\r\n", len(ev), ev)
					if w.Flush() != nil {
						return
					}
				}
			}
		case r.Method == "DELETE":
			writeResp(w, "200 OK", nil, "")
		case rpcMethod(r.Body) == "initialize":
			writeResp(w, "200 OK", []string{"Content-Type: application/json", "Mcp-Session-Id: s1"},
				`{"jsonrpc":"2.0","id":`+id+`,"result":`+rawInitResult+`}`)
		case id == "":
			writeResp(w, "202 Accepted", nil, "")
		case rpcMethod(r.Body) == "ping":
			for n := 0; n < 8; n += 2 {
				late <- `{"jsonrpc":"2.0","id":` + strconv.Itoa(n) + `,"result":{"late":true}}`
			}
			late <- `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"marker"}}`
			writeResp(w, "200 OK", []string{"Content-Type: application/json"}, `{"jsonrpc":"2.0","id":`+id+`,"result":{}}`)
		default:
			n, _ := strconv.Atoi(id)
			if n%2 == 0 {
				writeResp(w, "500 Internal Server Error", nil, "")
				return
			}
			ev := "data: " + `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[]}}` + "\n\n"
			writeResp(w, "200 OK", []string{"Content-Type: text/event-stream"}, ev)
		}
	})
	s := startProxy(t, nil, "--server", "flaky", "--url", srv.URL+"/mcp", "--transport", "http")
	s.Send(remoteInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if ans := s.recv(); !gjson.Get(ans, "result.serverInfo").Exists() {
		t.Fatalf("initialize: %s", ans)
	}
	var calls []string
	for n := range 8 {
		calls = append(calls, `{"jsonrpc":"2.0","id":`+strconv.Itoa(n)+`,"method":"tools/call","params":{"name":"x","arguments":{}}}`)
	}
	s.Send(calls...)
	seen := map[int64]int{}
	for range 8 {
		ans := s.recv()
		n := gjson.Get(ans, "id").Int()
		seen[n]++
		if n%2 == 0 && !strings.Contains(gjson.Get(ans, "error.message").String(), "HTTP 500") {
			t.Errorf("id %d: want the proxy's HTTP 500 error, got %s", n, ans)
		}
		if n%2 == 1 && !gjson.Get(ans, "result").Exists() {
			t.Errorf("id %d: want the server's result, got %s", n, ans)
		}
	}
	s.Send(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	for got := 0; got < 2; {
		ans := s.recv()
		switch {
		case gjson.Get(ans, "id").Int() == 99 || strings.Contains(ans, "marker"):
			got++
		default:
			t.Errorf("after the failures the host got %s", ans)
		}
	}
	for n := range int64(8) {
		if seen[n] != 1 {
			t.Errorf("id %d answered %d times", n, seen[n])
		}
	}
}
