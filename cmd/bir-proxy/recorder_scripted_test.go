package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// scriptedRecorder is a recorder on 127.0.0.1 that writes exactly the bytes a test
// wants: serve gets each connection (and a reader of it) in a goroutine of its own.
// It returns the environment that points a proxy at it, recording into state.
func scriptedRecorder(t *testing.T, state string, serve func(c net.Conn, br *bufio.Reader)) []string {
	t.Helper()
	addr := rawPeer(t, func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(testutil.Guard))
		serve(c, bufio.NewReader(c))
	})
	return []string{"BIR_RECORDER_URL=http://" + addr, "BIR_RECORDER_TOKEN=t0k3n", "BIR_OFF=0", "XDG_STATE_HOME=" + state}
}

// rawRequest is one request a scripted recorder read.
type rawRequest struct {
	path string
	body []byte
}

// seq is the seq of a step report (0 for anything else).
func (r rawRequest) seq() int64 { return gjson.GetBytes(r.body, "seq").Int() }

// readRawRequest reads one request's head and its Content-Length body.
func readRawRequest(br *bufio.Reader) (rawRequest, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return rawRequest{}, err
	}
	var req rawRequest
	var method string
	fmt.Sscanf(line, "%s %s", &method, &req.path)
	n := 0
	for {
		h, err := br.ReadString('\n')
		if err != nil {
			return rawRequest{}, err
		}
		if h == "\r\n" {
			break
		}
		if name, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(name, "Content-Length") {
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
		}
	}
	req.body = make([]byte, n)
	_, err = io.ReadFull(br, req.body)
	return req, err
}

// answer writes a complete answer with a body.
func answer(c net.Conn, status, body string) error {
	_, err := fmt.Fprintf(c, "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", status, len(body), body)
	return err
}
