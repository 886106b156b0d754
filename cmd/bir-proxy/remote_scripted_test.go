package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The scripted raw HTTP servers of the remote tests (remote_*_test.go): a net.Listener on
// 127.0.0.1 whose answers are exactly the bytes a test writes, so a hostile or odd
// server (a redirect elsewhere, a body echoing credentials, an endless answer, one that
// never answers) is what the proxy meets.

// rawReq is one request a scripted server received.
type rawReq struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// rawServer serves each request on each connection with handle, which writes the
// whole raw response to w (and may block, for a stream, until done is closed).
type rawServer struct {
	URL  string // http://127.0.0.1:PORT
	ln   net.Listener
	wg   sync.WaitGroup
	done chan struct{}

	mu    sync.Mutex
	reqs  []rawReq
	conns map[net.Conn]bool
}

func startRawServer(t *testing.T, handle func(r *rawReq, w *bufio.Writer, done <-chan struct{})) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{URL: "http://" + ln.Addr().String(), ln: ln, done: make(chan struct{}), conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[conn] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer conn.Close()
				br, bw := bufio.NewReader(conn), bufio.NewWriter(conn)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
					r := &rawReq{Method: req.Method, Path: req.URL.RequestURI(), Header: req.Header, Body: body}
					s.mu.Lock()
					s.reqs = append(s.reqs, *r)
					s.mu.Unlock()
					handle(r, bw, s.done)
					if bw.Flush() != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *rawServer) close() {
	select {
	case <-s.done:
		return
	default:
	}
	close(s.done)
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *rawServer) requests() []rawReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rawReq(nil), s.reqs...)
}

// rawSink is a listener that answers nothing and keeps whatever reaches it: where a
// credential must never go.
type rawSink struct {
	URL string
	ln  net.Listener
	wg  sync.WaitGroup

	mu    sync.Mutex
	conns int
	got   bytes.Buffer
}

func startRawSink(t *testing.T) *rawSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawSink{URL: "http://" + ln.Addr().String(), ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer conn.Close()
				_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
				b, _ := io.ReadAll(io.LimitReader(conn, 1<<20))
				s.mu.Lock()
				s.got.Write(b)
				s.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

// received is how many connections reached the sink and what they sent.
func (s *rawSink) received() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, s.got.String()
}

// writeResp writes one whole HTTP/1.1 response with a Content-Length.
func writeResp(w *bufio.Writer, status string, header []string, body string) {
	w.WriteString("HTTP/1.1 " + status + "\r\n")
	for _, h := range header {
		w.WriteString(h + "\r\n")
	}
	w.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// rpcID is the raw id of a JSON-RPC request body ("" for none), read the simple way
// the scripted servers need (their own test messages).
func rpcID(body []byte) string {
	s := string(body)
	i := strings.Index(s, `"id":`)
	if i < 0 {
		return ""
	}
	s = s[i+5:]
	end := strings.IndexAny(s, ",}")
	if end < 0 {
		return ""
	}
	return strings.TrimSpace(s[:end])
}

// rpcMethod is the method of a JSON-RPC request body ("" for none).
func rpcMethod(body []byte) string {
	s := string(body)
	i := strings.Index(s, `"method":"`)
	if i < 0 {
		return ""
	}
	s = s[i+10:]
	end := strings.IndexByte(s, '"')
	if end < 0 {
		return ""
	}
	return s[:end]
}

const rawInitResult = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"0"}}`
