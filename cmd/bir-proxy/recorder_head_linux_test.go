package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestRecorderHugeAnswerHeadBounded: a recorder that answers a step POST with 256 MiB
// of header gets the connection dropped once the head passes 1 MiB; the proxy's
// memory stays bounded, and the report stays spooled and is delivered when the
// recorder answers properly. The client read a head of any size: 1 GiB of header
// cost the proxy 2.7–3.1 GB of memory.
func TestRecorderHugeAnswerHeadBounded(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	state := t.TempDir()
	const total = 256 << 20
	var steps atomic.Int32
	written := make(chan int64, 1)
	delivered := make(chan int64, 4)
	env := scriptedRecorder(t, state, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := readRawRequest(br)
			if err != nil {
				return
			}
			if req.path != "/proxy/step" {
				answer(c, "200 OK", `{"ok":true}`)
				continue
			}
			if steps.Add(1) > 1 {
				answer(c, "200 OK", `{}`)
				delivered <- req.seq()
				continue
			}
			line := "X-Pad: " + strings.Repeat("a", 1017) + "\r\n"
			var n int64
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\n"); err == nil {
				for n < total {
					if _, err := io.WriteString(c, line); err != nil {
						break // the proxy dropped the connection
					}
					n += int64(len(line))
				}
				io.WriteString(c, "Content-Length: 2\r\n\r\n{}")
			}
			written <- n
			return
		}
	})
	s := startProxy(t, env, "--server", "hugehead", "--", raw, "--reply")
	s.Send(toolCall(1, `{"_bir_call_id":"c-1"}`))
	s.recv()
	if n := testutil.Recv(t, written, "the recorder to write the huge head"); n >= total {
		t.Errorf("the proxy read the whole %d MiB head: the connection was not dropped", n>>20)
	}
	// The answer has been dealt with once the report is sent again, or (as a client
	// that takes the head would) marked done.
	var resent int64
	testutil.Eventually(t, "the answer with the huge head to be dealt with", func() bool {
		select {
		case resent = <-delivered:
			return true
		default:
		}
		files, _ := filepath.Glob(filepath.Join(state, "bir-proxy", "spool", "*.jsonl"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(`{"ack":1}`)) {
				return true
			}
		}
		return false
	})
	hwm := procStatusKB(t, s.Cmd.Process.Pid, "VmHWM") << 10
	t.Logf("the proxy's peak RSS: %d MiB", hwm>>20)
	if hwm > 100<<20 {
		t.Errorf("the proxy's memory peaked at %d MiB reading a %d MiB answer head", hwm>>20, total>>20)
	}
	if resent != 1 {
		t.Fatalf("the report answered with the huge head was not sent again (it was taken as delivered)")
	}
	s.end()
	if left, _ := filepath.Glob(filepath.Join(state, "bir-proxy", "spool", "*.jsonl")); len(left) != 0 {
		t.Errorf("spool files left after the report was delivered: %v", left)
	}
}
