package recorder

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// A step POST the recorder keeps failing reaches it exactly once per pause of the
// dispatcher's backoff: one retry layer, not an HTTP client's quick retries multiplied
// inside each of the dispatcher's attempts (which hammered a failing recorder and kept
// a worker sleeping while delivery was meant to be paused).
func TestOneAttemptPerBackoffStep(t *testing.T) {
	const outer = 4
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	cfg := recorderConfig(t, rec, t.TempDir())

	var mu sync.Mutex
	var served []int // failed step POSTs the recorder had answered when the k-th attempt ended
	attempts := newCounter()
	cfg.tuning.hooks.attempt = func(path string, status int, _ error) {
		if path != "/proxy/step" || status != http.StatusInternalServerError {
			return
		}
		// The hook runs on the dispatcher's goroutine before it can start the next
		// attempt, and the recorder logs a request before answering it, so this count
		// is exact: every POST of this attempt, and none of the next.
		n := 0
		for _, req := range rec.Requests() {
			if req.Path == "/proxy/step" {
				n++
			}
		}
		mu.Lock()
		served = append(served, n)
		mu.Unlock()
		attempts.add(1)
	}
	r := open(t, cfg)
	if _, err := rec.WaitRegistrations(ctx, 1); err != nil {
		t.Fatal(err)
	}
	rec.Fail(http.StatusInternalServerError)
	r.Submit(recordertest.SampleStep("t", 1))
	if err := attempts.wait(ctx, outer); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := append([]int(nil), served[:outer]...)
	mu.Unlock()
	for k, n := range got {
		if n != k+1 {
			t.Fatalf("after outer attempt %d the recorder had seen %d step POSTs, want %d (all: %v)", k+1, n, k+1, got)
		}
	}

	rec.Fail(0)
	if _, err := rec.WaitSteps(ctx, 1); err != nil { // and it still arrives
		t.Fatal(err)
	}
}

// A recorder that closes a kept-alive connection just as a POST goes out on it (its
// idle timeout) does not make that POST fail: it is sent again on a new connection,
// at once. Without this the race would read as an outage — a warning, a pause, every
// proxyId registered again. The server here reads the second request on the old
// connection and closes it unanswered, which is the race made certain.
func TestPostResentWhenKeptAliveConnectionDies(t *testing.T) {
	ctx := testutil.Context(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan string, 4) // "conn N: path" for every request answered
	go func() {
		for conn := 1; ; conn++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(testutil.Guard))
				br := bufio.NewReader(c)
				for n := 1; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if conn == 1 && n == 2 {
						return // closed under the second request, unanswered
					}
					served <- fmt.Sprintf("conn %d: %s", conn, req.URL.Path)
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				}
			}()
		}
	}()

	c := newClient(tuning{}.withDefaults())
	defer c.closeIdle()
	ep := &Endpoint{URL: "http://" + ln.Addr().String(), Token: "t"}
	for _, path := range []string{"/proxy/register", "/proxy/step"} {
		if res := c.post(ctx, ep, path, []byte(`{}`)); res.err != nil || res.status != http.StatusOK {
			t.Fatalf("post %s: status %d, err %v", path, res.status, res.err)
		}
	}
	got := []string{testutil.Recv(t, served, "the first request served"), testutil.Recv(t, served, "the second request served")}
	if want := []string{"conn 1: /proxy/register", "conn 2: /proxy/step"}; !slices.Equal(got, want) {
		t.Errorf("served %v, want %v", got, want)
	}
}

// The client's own HTTP/1.1 reads every shape of answer net/http reads (chunked, closing
// the connection, HTTP/1.0, after a 100 Continue), keeps the connection only when the
// answer left it usable, and posts on a new one after an answer that closed it.
func TestHTTP1AnswerShapes(t *testing.T) {
	ctx := testutil.Context(t)
	answers := []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"ok\r\n7\r\n\":true}\r\n0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
		"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
		"HTTP/1.0 200 OK\r\n\r\n{\"ok\":true}",
		"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type seen struct {
		conn int
		req  *http.Request
		body string
	}
	requests := make(chan seen, len(answers))
	go func() {
		next := 0
		for conn := 1; ; conn++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(testutil.Guard))
				br := bufio.NewReader(c)
				for next < len(answers) {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(req.Body)
					requests <- seen{conn, req, string(b)}
					a := answers[next]
					next++
					io.WriteString(c, a)
					if strings.Contains(a, "close") || strings.HasPrefix(a, "HTTP/1.0") {
						return
					}
				}
			}()
		}
	}()
	c := newClient(tuning{}.withDefaults())
	defer c.closeIdle()
	ep := &Endpoint{URL: "http://" + ln.Addr().String(), Token: "s3cret"}
	for i, a := range answers {
		res := c.post(ctx, ep, "/proxy/step", []byte(`{"n":`+strconv.Itoa(i)+`}`))
		wantStatus := http.StatusOK
		if strings.Contains(a, "503") {
			wantStatus = http.StatusServiceUnavailable
			if res.retryAfter != 7*time.Second {
				t.Errorf("answer %d: Retry-After %v, want 7s", i, res.retryAfter)
			}
		}
		if res.err != nil || res.status != wantStatus || string(res.body) != `{"ok":true}` {
			t.Fatalf("answer %d: status %d, body %q, err %v", i, res.status, res.body, res.err)
		}
		got := testutil.Recv(t, requests, "the request")
		if got.req.Method != "POST" || got.req.URL.Path != "/proxy/step" || got.req.Header.Get("Authorization") != "Bearer s3cret" ||
			got.req.Header.Get("Content-Type") != "application/json" || got.body != `{"n":`+strconv.Itoa(i)+`}` {
			t.Fatalf("answer %d: the recorder got %s %s %v %q", i, got.req.Method, got.req.URL, got.req.Header, got.body)
		}
		// Connections: the first five answers on one; a new one after each that closed.
		wantConn := map[int]int{0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 2, 6: 3}[i]
		if got.conn != wantConn {
			t.Errorf("answer %d came on connection %d, want %d", i, got.conn, wantConn)
		}
	}
}

// A token that would break the request head (a line break in it) is not written into
// one: the request goes to net/http, which refuses it.
func TestHTTP1RefusesATokenWithALineBreak(t *testing.T) {
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	c := newClient(tuning{}.withDefaults())
	defer c.closeIdle()
	ep := &Endpoint{URL: rec.URL(), Token: "t\r\nX-Injected: 1"}
	if res := c.post(ctx, ep, "/proxy/register", []byte(`{}`)); res.err == nil {
		t.Fatalf("posted with a token holding a line break: status %d", res.status)
	}
	for _, r := range rec.Requests() {
		t.Errorf("the recorder got a request: %+v", r)
	}
}
