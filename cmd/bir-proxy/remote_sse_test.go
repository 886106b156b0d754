package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// silentGETServer is a scripted HTTP/1.1 server on 127.0.0.1: it accepts every
// connection; a POST gets 405 with a plain-text body (as an HTTP+SSE server answers
// one, which sends --transport auto to try a GET); a GET is read and never answered,
// the connection held open until the test ends. It returns the URL and a count of the
// GETs it received.
func silentGETServer(t *testing.T) (url string, gets func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	addr := rawPeer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if req.Method == http.MethodGet {
				mu.Lock()
				n++
				mu.Unlock()
				_, _ = io.Copy(io.Discard, c) // never answered: held until closed
				return
			}
			body := "Method Not Allowed"
			_, _ = io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		}
	})
	return "http://" + addr + "/sse", func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestSSEGetNeverAnsweredAnswersInitialize: with --transport sse or auto, the GET
// that opens the event stream was bounded only until its connection was made; a
// server that accepted it and never answered left initialize, and everything after
// it, unanswered for good. --connect-timeout now covers the wait for the response
// head: the host gets an error with its id, and the proxy exits when the host leaves.
func TestSSEGetNeverAnsweredAnswersInitialize(t *testing.T) {
	for _, transport := range []string{"sse", "auto"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			url, gets := silentGETServer(t)
			s := startProxy(t, nil, "--server", "silent", "--url", url, "--transport", transport, "--connect-timeout", "300ms")
			s.Send(hostInit)
			a, _ := s.expect("0")
			// sse: the GET is the connection, and its failure is the answer. auto: the
			// failed GET says the server is not HTTP+SSE, so the POST's own 405 is.
			want := "no answer to the GET within 300ms"
			if transport == "auto" {
				want = "HTTP 405"
			}
			if !isError(a) || !strings.Contains(a, want) {
				t.Fatalf("initialize got %s, want an error saying %q", a, want)
			}
			if gets() == 0 {
				t.Fatal("the server received no GET: the test did not test the event stream's wait")
			}
			// The next request is answered too (it tries again, bounded the same way).
			s.Send(`{"jsonrpc":"2.0","id":"next","method":"tools/list"}`)
			if a, _ := s.expect(`"next"`); !isError(a) {
				t.Fatalf("the next request got %s, want an error", a)
			}
			s.end() // bounded by testutil.Guard
		})
	}
}
