package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// (Linux only: the proxy's peak RSS is read from /proc.)

// answerPeakRSS is the proxy's peak RSS for one tools/call answered with a result of
// size bytes, which the host reads at about 32 MB/s (a host parsing what it reads),
// recording to a journal unless birOff is "1".
func answerPeakRSS(t *testing.T, birOff, streamAt string, size int) int64 {
	t.Helper()
	journal := filepath.Join(t.TempDir(), "j.jsonl")
	cmd, in, out, done := rawProxyPipes(t, nil, []string{"BIR_OFF=" + birOff, "BIR_RECORDER_URL=", "BIR_STREAM_THRESHOLD=" + streamAt},
		[]string{"--server", "mem", "--journal", journal}, "--reply", "--reply-size", strconv.Itoa(size))
	go in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{}}}` + "\n")
	read := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		n := 0
		for {
			k, err := out.Read(buf)
			n += k
			if err != nil {
				read <- fmt.Errorf("after %d bytes: %w", n, err)
				return
			}
			if bytes.IndexByte(buf[:k], '\n') >= 0 {
				read <- nil
				return
			}
			time.Sleep(2 * time.Millisecond) // the pace of the host, not a wait for an event
		}
	}()
	if err := testutil.Recv(t, read, "the answer at the host"); err != nil {
		t.Fatalf("BIR_OFF=%s: reading the answer: %v", birOff, err)
	}
	return peakAfterReport(t, cmd, in, done, birOff == "0", journal)
}

// TestRecordingALongAnswerCostsNoMemoryInProportion: recording a 32 MB answer that
// streams to a host reading it at its own pace holds a bounded part of it (what the
// reduction has not read yet), where the same answer read whole is held whole.
func TestRecordingALongAnswerCostsNoMemoryInProportion(t *testing.T) {
	const size = 32 << 20
	off := answerPeakRSS(t, "1", "", size)
	on := answerPeakRSS(t, "0", "", size)
	whole := answerPeakRSS(t, "0", "0", size)
	t.Logf("peak RSS for a %d-byte answer: %d MB recording it streamed, %d MB recording it whole, %d MB under BIR_OFF=1", size, on>>20, whole>>20, off>>20)
	if on-off > 16<<20 {
		t.Errorf("recording a streamed answer of %d bytes took the proxy to %d MB, %d MB over the pure pipe's %d MB", size, on>>20, (on-off)>>20, off>>20)
	}
	if whole-off < size {
		t.Errorf("the checker's control: recording the same answer whole took only %d MB over the pure pipe", (whole-off)>>20)
	}
}
