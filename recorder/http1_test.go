package recorder

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// rawEndpoint is rawRecorder's URL as an Endpoint.
func rawEndpoint(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) *Endpoint {
	t.Helper()
	url := rawRecorder(t, func(_ int, c net.Conn, br *bufio.Reader) { serve(c, br) })
	return &Endpoint{URL: url, Token: "t0k3n", Source: "test"}
}

// readRawRequest reads one request's head and body; it returns the path.
func readRawRequest(br *bufio.Reader) (string, []byte, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", nil, err
	}
	var method, path string
	fmt.Sscanf(line, "%s %s", &method, &path)
	n := 0
	for {
		h, err := br.ReadString('\n')
		if err != nil {
			return "", nil, err
		}
		if h == "\r\n" {
			break
		}
		if name, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(name, "Content-Length") {
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
		}
	}
	body := make([]byte, n)
	_, err = io.ReadFull(br, body)
	return path, body, err
}

// TestHTTP1InformationalFloodRefused: a recorder that answers a POST with an endless
// run of 1xx answers gets the request failed after a handful of them (net/http's
// five), with the connection dropped, instead of being read until the request's
// timeout while it spins the proxy's CPU. The client used to take any number.
func TestHTTP1InformationalFloodRefused(t *testing.T) {
	sent := make(chan int, 1)
	ep := rawEndpoint(t, func(c net.Conn, br *bufio.Reader) {
		if _, _, err := readRawRequest(br); err != nil {
			sent <- 0
			return
		}
		n := 0
		for ; n < 1_000_000; n++ {
			if _, err := io.WriteString(c, "HTTP/1.1 102 Processing\r\nX-N: 1\r\n\r\n"); err != nil {
				break // the client dropped the connection
			}
		}
		sent <- n
	})
	c := newClient(tuning{}.withDefaults())
	defer c.closeIdle()
	ctx := testutil.Context(t)
	res := c.send(ctx, ep, "/proxy/step", []byte(`{}`), 4<<10, 20*time.Second)
	if res.err == nil || !strings.Contains(res.err.Error(), "1xx") {
		t.Fatalf("post answered by a 1xx flood: status %d, err %v; want an error about too many 1xx answers", res.status, res.err)
	}
	if n := testutil.Recv(t, sent, "the flooding recorder to stop"); n >= 1_000_000 {
		t.Errorf("the client read all %d informational answers: the connection was not dropped", n)
	}
}

// TestHTTP1FewInformationalAnswersTaken: up to five 1xx answers before the answer are
// taken, as net/http takes them.
func TestHTTP1FewInformationalAnswersTaken(t *testing.T) {
	ep := rawEndpoint(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if _, _, err := readRawRequest(br); err != nil {
				return
			}
			io.WriteString(c, strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 5)+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := newClient(tuning{}.withDefaults())
	defer c.closeIdle()
	res := c.send(testutil.Context(t), ep, "/proxy/step", []byte(`{}`), 4<<10, 20*time.Second)
	if res.err != nil || res.status != http.StatusOK || string(res.body) != "ok" {
		t.Fatalf("status %d body %q err %v, want 200 ok", res.status, res.body, res.err)
	}
}

// TestHTTP1HugeHeadRefused: an answer head past 1 MiB (net/http's
// DefaultMaxHeaderBytes) fails the request and drops the connection. The client used
// to read a head of any size: 1 GiB of header cost the proxy ~3 GB of memory.
func TestHTTP1HugeHeadRefused(t *testing.T) {
	sent := make(chan int64, 1)
	const total = 64 << 20
	ep := rawEndpoint(t, func(c net.Conn, br *bufio.Reader) {
		if _, _, err := readRawRequest(br); err != nil {
			sent <- 0
			return
		}
		line := "X-Pad: " + strings.Repeat("a", 1017) + "\r\n"
		var n int64
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\n"); err == nil {
			for n < total {
				if _, err := io.WriteString(c, line); err != nil {
					break
				}
				n += int64(len(line))
			}
			io.WriteString(c, "Content-Length: 0\r\n\r\n")
		}
		sent <- n
	})
	c := newClient(tuning{}.withDefaults())
	defer c.closeIdle()
	res := c.send(testutil.Context(t), ep, "/proxy/step", []byte(`{}`), 4<<10, 20*time.Second)
	if res.err == nil {
		t.Fatalf("an answer with a %d MiB head was taken: status %d", total>>20, res.status)
	}
	if !strings.Contains(res.err.Error(), "head") {
		t.Errorf("err = %v, want one saying the answer's head is too large", res.err)
	}
	if n := testutil.Recv(t, sent, "the recorder to stop writing the head"); n >= total {
		t.Errorf("the whole %d MiB head was read: the connection was not dropped", n>>20)
	}
}

// TestHTTP1IdleConnectionsExpire: a kept-alive connection idle for the idle timeout
// is closed by the proxy (the recorder sees its end), not held open for the rest of
// the session.
func TestHTTP1IdleConnectionsExpire(t *testing.T) {
	closed := make(chan error, 1)
	ep := rawEndpoint(t, func(c net.Conn, br *bufio.Reader) {
		if _, _, err := readRawRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		// The next read ends when the client closes the connection.
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err := br.ReadByte()
		closed <- err
	})
	tune := tuning{idleTimeout: 50 * time.Millisecond}.withDefaults()
	c := newClient(tune)
	defer c.closeIdle()
	res := c.send(testutil.Context(t), ep, "/proxy/step", []byte(`{}`), 4<<10, 20*time.Second)
	if res.err != nil || res.status != http.StatusOK {
		t.Fatalf("status %d err %v", res.status, res.err)
	}
	if err := testutil.Recv(t, closed, "the idle connection to be closed"); !errors.Is(err, io.EOF) {
		t.Errorf("the idle connection was not closed by the client: read ended with %v", err)
	}
	c.h1.mu.Lock()
	n := len(c.h1.idle)
	c.h1.mu.Unlock()
	if n != 0 {
		t.Errorf("%d connections still idle in the pool after they expired", n)
	}
}
