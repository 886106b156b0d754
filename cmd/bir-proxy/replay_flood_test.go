package main

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestReplayDispatchFloodStaysBounded: a recorder that answered every poll
// with thousands of dispatches and never took a result grew the proxy's results
// queue without bound (3.1 GB in about 15 s): each dispatch refused for a full queue
// left a result waiting a minute for a recorder that would never take it. Now the
// results waiting are bounded too (what does not fit is dropped and counted), a
// poll answer is read for at most as many dispatches as could be answered, and
// polls are paced while results cannot be posted. The proxy's RSS stays under a
// bound through the flood, the host's session works during it, and the proxy exits
// when the host leaves.
func TestReplayDispatchFloodStaysBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the proxy's RSS from /proc")
	}
	t.Parallel()
	var flooding atomic.Bool
	flooding.Store(true)
	var next atomic.Int64
	// 3000 dispatches an answer, each with a 1 KB id (which every result of it
	// carries) and 1 KB of arguments: about 6 MB an answer.
	pad := strings.Repeat("x", 1000)
	h := startHostileRecorder(t, func(*http.Request) int { return http.StatusServiceUnavailable })
	h.flood = func(int) []byte {
		if !flooding.Load() {
			return nil
		}
		var b strings.Builder
		b.WriteString(`{"dispatches":[`)
		for i := range 3000 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"dispatchId":"%s-%d","tool":"hang","arguments":{"pad":"%s"}}`, pad, next.Add(1), pad)
		}
		b.WriteString(`],"cancel":[]}`)
		return []byte(b.String())
	}
	s := startHostileReplay(t, h)
	pid := s.Cmd.Process.Pid

	const bound = 250 << 20
	var peak int64
	deadline := time.Now().Add(10 * time.Second) // how long the flood lasts, not a speed limit
	for i := 0; time.Now().Before(deadline); i++ {
		rss := procStatusKB(t, pid, "VmRSS") << 10
		peak = max(peak, rss)
		if rss > bound {
			flooding.Store(false)
			t.Fatalf("RSS %d MB under the flood (after %d dispatches handed out), over %d MB", rss>>20, next.Load(), bound>>20)
		}
		if i%20 == 0 {
			// The host's session works throughout.
			id := 1000 + i
			s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id))
			if a := s.recv(); gjson.Get(a, "id").Int() != int64(id) {
				t.Fatalf("the host's ping %d during the flood got %s", id, a)
			}
		}
		time.Sleep(50 * time.Millisecond) // sampling the RSS of a real process, not waiting for an event
	}
	flooding.Store(false)
	hwm := procStatusKB(t, pid, "VmHWM") << 10
	h.mu.Lock()
	polls, posted := h.polls, h.resultsIn
	h.mu.Unlock()
	t.Logf("%d dispatches handed out in %d polls, %d result POSTs refused; peak RSS %d MB (sampled %d MB)", next.Load(), polls, posted, hwm>>20, peak>>20)
	if next.Load() < 6000 {
		t.Fatalf("only %d dispatches handed out: the flood did not happen", next.Load())
	}
	if hwm > bound {
		t.Errorf("peak RSS %d MB, over %d MB", hwm>>20, bound>>20)
	}
	if !strings.Contains(s.Stderr.String(), "too many dispatch results waiting") {
		t.Errorf("no warning about the results dropped:\n%s", s.Stderr.String())
	}
	// It ends: the host leaves and the proxy exits.
	s.Stdin.Close()
	exited := make(chan int, 1)
	go func() { exited <- s.ExitCode() }()
	testutil.Recv(t, exited, "the proxy to exit after the flood")
}
