//go:build unix

package recorder

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"

	"golang.org/x/sys/unix"
)

// TestHTTP1StrayAnswerNotTakenForTheNext: an answer the recorder sends on a kept-alive
// connection after the one asked for is not read as the answer to the next request
// on it: the connection is dropped and the next request goes on a new one, and gets
// the recorder's real answer (here 503). The stray 200 used to be taken as the
// answer, and a report the recorder refused was marked delivered.
func TestHTTP1StrayAnswerNotTakenForTheNext(t *testing.T) {
	strayOut := make(chan struct{})
	ep := rawEndpoint(t, func(c net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			path, _, err := readRawRequest(br)
			if err != nil {
				return
			}
			if path == "/first" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				<-strayOut // the client has read the answer and kept the connection
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				continue
			}
			io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
		}
	})
	c := newClient(tuning{}.withDefaults())
	defer c.closeIdle()
	ctx := testutil.Context(t)
	if res := c.send(ctx, ep, "/first", []byte(`{}`), 4<<10, 20*time.Second); res.err != nil || res.status != http.StatusOK {
		t.Fatalf("first: status %d err %v", res.status, res.err)
	}
	close(strayOut)
	// The stray answer is on its way to the idle connection; wait until it is there
	// to be seen, as it would be long before a real next report.
	waitReadable(t, ctx, c.h1)
	res := c.send(ctx, ep, "/second", []byte(`{}`), 4<<10, 20*time.Second)
	if res.err != nil || res.status != http.StatusServiceUnavailable {
		t.Fatalf("second: status %d err %v, want the recorder's 503 (a stray 200 was taken for it)", res.status, res.err)
	}
}

// waitReadable waits until the one idle connection of h has bytes to read.
func waitReadable(t *testing.T, ctx context.Context, h *http1) {
	t.Helper()
	h.mu.Lock()
	if len(h.idle) != 1 {
		h.mu.Unlock()
		t.Fatalf("%d idle connections, want 1", len(h.idle))
	}
	nc := h.idle[0].nc
	h.mu.Unlock()
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		ready := false
		rc.Read(func(fd uintptr) bool {
			var b [1]byte
			n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			ready = err == nil && n > 0
			return true
		})
		if ready {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Millisecond):
		}
	}
	t.Fatal("the stray answer never arrived")
}
