package recorder

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// rawRecorder is a recorder on 127.0.0.1 that reads requests itself: serve gets each
// connection's number and the connection, and answers as the test wants.
func rawRecorder(t *testing.T, serve func(conn int, c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for conn := 1; ; conn++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(testutil.Guard))
				serve(conn, c, bufio.NewReader(c))
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func bodiesN(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(`{"n":` + strconv.Itoa(i) + `}`)
	}
	return out
}

// A group's requests are written together: this recorder reads all five before it
// answers any, which a client waiting for each answer before the next request would
// never see (the test would end at its deadline). They come on one connection, in
// order, and each answer goes to its own request.
func TestHTTP1PipelinesAGroup(t *testing.T) {
	ctx := testutil.Context(t)
	const n = 5
	conns := make(chan int, n)
	url := rawRecorder(t, func(conn int, c net.Conn, br *bufio.Reader) {
		var got []string
		for range n {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(req.Body)
			got = append(got, string(b))
			conns <- conn
		}
		for i, b := range got {
			status := "200 OK"
			if i == 3 {
				status = "503 Busy"
			}
			io.WriteString(c, "HTTP/1.1 "+status+"\r\nContent-Length: "+strconv.Itoa(len(b))+"\r\n\r\n"+b)
		}
		br.Peek(1) // until the client is done with the connection
	})
	c := newClient(tuning{}.withDefaults())
	defer c.closeIdle()
	ep := &Endpoint{URL: url, Token: "t"}
	if !c.pipelines(ep) {
		t.Fatal("a plain http:// recorder is not pipelined to")
	}
	out := c.postGroup(ctx, ep, "/proxy/step", bodiesN(n))
	if len(out) != n {
		t.Fatalf("%d answers for %d requests", len(out), n)
	}
	for i, r := range out {
		want := http.StatusOK
		if i == 3 {
			want = http.StatusServiceUnavailable
		}
		if r.err != nil || r.status != want || string(r.body) != `{"n":`+strconv.Itoa(i)+`}` {
			t.Errorf("answer %d: status %d, body %q, err %v; want %d and its own body", i, r.status, r.body, r.err, want)
		}
	}
	for range n {
		if conn := testutil.Recv(t, conns, "a request"); conn != 1 {
			t.Errorf("a request came on connection %d: the group was not on one", conn)
		}
	}
}

// A recorder that ends the connection partway through a group, saying so
// (Connection: close) or not, answers those before; the rest are unanswered, not
// failed, and for a while (a minute, doubling while it goes on) the client sends one
// request per exchange.
func TestHTTP1GroupCutShortByTheRecorder(t *testing.T) {
	for _, says := range []bool{true, false} {
		t.Run(map[bool]string{true: "Connection: close", false: "closes unsaid"}[says], func(t *testing.T) {
			ctx := testutil.Context(t)
			perConn := make(chan int, 64)
			url := rawRecorder(t, func(conn int, c net.Conn, br *bufio.Reader) {
				for i := 1; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						perConn <- i - 1
						return
					}
					io.Copy(io.Discard, req.Body)
					if i == 2 {
						if says {
							io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
						} else {
							io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
						}
						perConn <- i
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				}
			})
			c := newClient(tuning{}.withDefaults())
			defer c.closeIdle()
			var mu sync.Mutex
			clock := time.Now()
			c.h1.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
			advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
			ep := &Endpoint{URL: url, Token: "t"}
			out := c.postGroup(ctx, ep, "/proxy/step", bodiesN(4))
			for i, r := range out {
				switch {
				case i < 2 && (r.err != nil || r.status != http.StatusOK):
					t.Errorf("answer %d: status %d, err %v; want 200", i, r.status, r.err)
				case i >= 2 && !errors.Is(r.err, errUnanswered):
					t.Errorf("request %d after the recorder closed: %d %v, want errUnanswered", i, r.status, r.err)
				}
			}
			if n := testutil.Recv(t, perConn, "the first connection's end"); n != 2 {
				t.Errorf("the recorder answered %d on the first connection, want 2", n)
			}
			if c.pipelines(ep) {
				t.Errorf("still pipelining to a recorder that cut a group short")
			}
			out = c.postGroup(ctx, ep, "/proxy/step", bodiesN(3))
			if out[0].err != nil || out[0].status != http.StatusOK || !errors.Is(out[1].err, errUnanswered) || !errors.Is(out[2].err, errUnanswered) {
				t.Errorf("after: %+v, want the first alone answered", out)
			}

			// Not for the rest of the session: after a minute, a group is tried again.
			// Cut short again, the pause doubles; answered whole, it starts over. Each
			// group goes on a fresh connection (the recorder closes every one after
			// two answers; a kept one would be stale and answer nothing, a case
			// that sets no pause).
			cutShort := func(what string) {
				t.Helper()
				c.closeIdle()
				out := c.postGroup(ctx, ep, "/proxy/step", bodiesN(4))
				if out[0].err != nil || out[1].err != nil || !errors.Is(out[2].err, errUnanswered) {
					t.Fatalf("%s: %+v, want two answered and the rest cut short", what, out)
				}
				if c.pipelines(ep) {
					t.Fatalf("%s: pipelining right after the cut", what)
				}
			}
			advance(time.Minute)
			if !c.pipelines(ep) {
				t.Fatal("a minute after the cut, still one request per exchange")
			}
			cutShort("the second try")
			advance(time.Minute)
			if c.pipelines(ep) {
				t.Error("cut short twice in a row, pipelining came back after one minute, not two")
			}
			advance(time.Minute)
			if !c.pipelines(ep) {
				t.Fatal("two minutes after the second cut, still one request per exchange")
			}
			c.closeIdle()
			if out := c.postGroup(ctx, ep, "/proxy/step", bodiesN(2)); out[1].err != nil || out[1].status != http.StatusOK {
				t.Fatalf("a group of two: %+v, want both answered", out)
			}
			cutShort("after a group answered whole")
			advance(time.Minute)
			if !c.pipelines(ep) {
				t.Error("after a group answered whole, a cut paused pipelining for more than a minute")
			}
		})
	}
}

// Groups in flight together that one event cuts short (a recorder restarting under
// the whole window) pause pipelining once, for a minute, not a minute doubled for each.
func TestHTTP1GroupsCutTogetherPauseOnce(t *testing.T) {
	ctx := testutil.Context(t)
	const groups = 3
	arrived := make(chan struct{}, groups)
	release := make(chan struct{})
	url := rawRecorder(t, func(conn int, c net.Conn, br *bufio.Reader) {
		for i := 1; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if i == 1 {
				arrived <- struct{}{}
				select { // every group is in flight before any is answered
				case <-release:
				case <-ctx.Done():
					return
				}
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
			if i == 2 {
				return // two answered, the rest of the group cut short
			}
		}
	})
	c := newClient(tuning{}.withDefaults())
	defer c.closeIdle()
	var mu sync.Mutex
	clock := time.Now()
	c.h1.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	ep := &Endpoint{URL: url, Token: "t"}
	var wg sync.WaitGroup
	outs := make([][]response, groups)
	for g := range groups {
		wg.Go(func() { outs[g] = c.postGroup(ctx, ep, "/proxy/step", bodiesN(4)) })
	}
	for range groups {
		testutil.Recv(t, arrived, "a group")
	}
	close(release)
	wg.Wait()
	for g, out := range outs {
		if !errors.Is(out[2].err, errUnanswered) {
			t.Fatalf("group %d: %+v, want it cut short", g, out)
		}
	}
	mu.Lock()
	clock = clock.Add(time.Minute)
	mu.Unlock()
	if !c.pipelines(ep) {
		t.Error("three groups cut by one event paused pipelining for more than a minute")
	}
}

// A group nobody answers (the connection dies under it) is not all failed: the first
// request goes again alone, on a new connection, and its answer is what counts.
func TestHTTP1GroupUnansweredFallsBackToOne(t *testing.T) {
	ctx := testutil.Context(t)
	url := rawRecorder(t, func(conn int, c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if conn == 1 {
				return // cut under the group, nothing answered
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
	})
	c := newClient(tuning{}.withDefaults())
	defer c.closeIdle()
	ep := &Endpoint{URL: url, Token: "t"}
	out := c.postGroup(ctx, ep, "/proxy/step", bodiesN(3))
	if out[0].err != nil || out[0].status != http.StatusOK {
		t.Errorf("the first request: %d %v, want 200 from its second try", out[0].status, out[0].err)
	}
	for i, r := range out[1:] {
		if !errors.Is(r.err, errUnanswered) {
			t.Errorf("request %d: %v, want errUnanswered", i+1, r.err)
		}
	}
}

// Delivery pipelines to a quick plain recorder and still gives it one report per POST,
// every seq once; through a recorder that ends every connection after three answers
// without saying so, nothing is lost or failed either.
func TestPlainRecorderPipelined(t *testing.T) {
	t.Run("reference", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		rec := recordertest.Start(t)
		r := open(t, recorderConfig(t, rec, t.TempDir()))
		if _, err := rec.WaitRegistrations(ctx, 1); err != nil {
			t.Fatal(err)
		}
		const n = 500
		submitSteps(r, "piped", 1, n)
		waitSeqs(t, ctx, rec, r.ProxyID(), n)
		if got := len(stepPosts(rec)); got != n {
			t.Errorf("%d step POSTs for %d reports", got, n)
		}
		if d := rec.Duplicates(); d != 0 {
			t.Errorf("%d reports sent twice to a recorder that answered every one", d)
		}
	})
	t.Run("cuts connections", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		const n = 200
		var mu sync.Mutex
		seqs := map[string]int{}
		all := make(chan struct{})
		url := rawRecorder(t, func(conn int, c net.Conn, br *bufio.Reader) {
			for i := 1; i <= 3; i++ {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				b, _ := io.ReadAll(req.Body)
				if req.URL.Path == "/proxy/step" {
					mu.Lock()
					seqs[string(b)]++
					if len(seqs) == n && seqs[string(b)] == 1 {
						close(all)
					}
					mu.Unlock()
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
			}
		})
		cfg := recorderConfig(t, recordertest.Start(t), t.TempDir())
		cfg.Endpoint = &Endpoint{URL: url, Token: "t", Source: "test"}
		r := open(t, cfg)
		submitSteps(r, "cut", 1, n)
		select {
		case <-all:
		case <-ctx.Done():
			mu.Lock()
			t.Fatalf("the recorder took %d distinct reports, want %d", len(seqs), n)
		}
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
