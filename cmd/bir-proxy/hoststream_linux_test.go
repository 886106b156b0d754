package main

import (
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// (Linux only: the proxy's peak RSS is read from /proc.)

// TestLongHostCallStreamsWithARecorder: with a recorder configured, interception is
// wrapped in replay's Gate, which did not pass on the optional interfaces saying the
// relay may stream a host call (relay.KeyedInterceptor, StreamingInterceptor): a
// 64 MB tools/call was then read whole, and cost the proxy 129 MB of RSS over idle.
// Streamed, what it holds of it is bounded.
func TestLongHostCallStreamsWithARecorder(t *testing.T) {
	rec := recordertest.Start(t)
	cmd, in, out, done := rawProxy(t, nil, recording(rec, t.TempDir()), []string{"--server", "gated"}, "--reply")
	// Idle: the proxy up, registered with the recorder, a small call answered and
	// reported.
	in.WriteString(toolCall(1, `{"path":"/tmp/x"}`) + "\n")
	if got := readWithin(t, out); !strings.Contains(got, `"id":1`) {
		t.Fatalf("the small call: host got %.200s", got)
	}
	if _, err := rec.WaitSteps(testutil.Context(t), 1); err != nil {
		t.Fatal(err)
	}
	idle := procStatusKB(t, cmd.Process.Pid, "VmHWM") << 10

	const size = 64 << 20
	// fail answers with a line: the answer is not the subject.
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fail","arguments":{"path":"/tmp/x","content":"` +
		strings.Repeat("0123456789abcdef", size/16) + `"}}}` + "\n"
	go in.WriteString(call)
	if got := readWithin(t, out); !strings.Contains(got, `"id":2`) {
		t.Fatalf("the long call: host got %.200s", got)
	}
	if _, err := rec.WaitSteps(testutil.Context(t), 2); err != nil {
		t.Fatal(err)
	}
	peak := procStatusKB(t, cmd.Process.Pid, "VmHWM") << 10
	in.Close()
	<-done
	t.Logf("peak RSS: %d MB idle, %d MB after a %d MB call", idle>>20, peak>>20, size>>20)
	if peak-idle > 32<<20 {
		t.Errorf("a %d MB host call with a recorder took the proxy %d MB over its idle %d MB", size>>20, (peak-idle)>>20, idle>>20)
	}
}
