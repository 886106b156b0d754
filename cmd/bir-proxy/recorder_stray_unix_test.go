//go:build unix

package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestRecorderStrayAnswerDoesNotAckNextReport: a recorder that sends an extra,
// unsolicited "HTTP/1.1 200 OK" on a kept-alive connection after answering a report,
// then refuses the next report with 503, has that report kept in the spool and
// delivered later. The stray 200 used to be read as the next report's answer: the
// report the recorder refused was marked delivered and removed from the spool.
func TestRecorderStrayAnswerDoesNotAckNextReport(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	state := t.TempDir()
	answered1 := make(chan struct{})
	strayNow, strayOut := make(chan struct{}), make(chan struct{})
	type got struct {
		seq    int64
		status string
	}
	steps := make(chan got, 16)
	var refused2 atomic.Bool
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
			status := "200 OK"
			if req.seq() == 2 && !refused2.Swap(true) {
				status = "503 Service Unavailable"
			}
			answer(c, status, `{}`)
			steps <- got{req.seq(), status}
			if req.seq() == 1 {
				close(answered1)
				<-strayNow
				answer(c, "200 OK", `{}`) // answers nothing
				close(strayOut)
			}
		}
	})
	s := startProxy(t, env, "--server", "stray", "--", raw, "--reply")
	s.Send(toolCall(1, `{"_bir_call_id":"c-1"}`))
	s.recv()
	testutil.Recv(t, answered1, "report 1 to be answered")
	// The proxy has read the answer and put the connection back once the done mark
	// is in the spool file.
	testutil.Eventually(t, "report 1's done mark in the spool", func() bool {
		files, _ := filepath.Glob(filepath.Join(state, "bir-proxy", "spool", "*.jsonl"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), `{"ack":1}`) {
				return true
			}
		}
		return false
	})
	close(strayNow)
	testutil.Recv(t, strayOut, "the stray answer to be written")
	s.Send(toolCall(2, `{"_bir_call_id":"c-2"}`))
	s.recv()
	ctx, cancel := context.WithTimeout(testutil.Context(t), 20*time.Second)
	defer cancel()
	var seen []got
	for {
		select {
		case g := <-steps:
			seen = append(seen, g)
			if g.seq == 2 && g.status == "200 OK" {
				s.end()
				if left, _ := filepath.Glob(filepath.Join(state, "bir-proxy", "spool", "*.jsonl")); len(left) != 0 {
					t.Errorf("spool files left after every report was delivered: %v", left)
				}
				return
			}
		case <-ctx.Done():
			t.Fatalf("report 2, refused with 503, was never sent again (the stray 200 was taken for its answer); the recorder saw %v", seen)
		}
	}
}
