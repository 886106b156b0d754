package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestUnansweredLargeCallsHoldOnlyTheirReports: a host sends 20,000 calls of 16 KB
// (305 MB) to a server that never answers. Each call waits for its end holding what
// its report will say of it (the arguments redacted and clipped, the fingerprint),
// not its request: a view of the request kept every one whole, and the proxy peaked
// at 340-345 MB. The bound is the proxy's peak RSS (the kernel's, from wait4), under
// 200 MiB; every call is reported, in full.
func TestUnansweredLargeCallsHoldOnlyTheirReports(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	journal := filepath.Join(t.TempDir(), "pending.jsonl")
	const (
		calls = 20000
		size  = 16 << 10
		bound = 200 << 20
	)
	cmd := exec.Command(testutil.Build(t, "./cmd/bir-proxy"),
		"--server", "pending", "--journal", journal, "--journal-max-mb", "100000", "--", raw, "--reply")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "BIR_OFF=0", "XDG_STATE_HOME="+t.TempDir(), "BIR_RECORDER_URL=")
	p := testutil.Start(t, cmd)
	// The proxy's own peak (VmHWM), read until it exits: wait4's Maxrss is the largest
	// of the proxy and the descendants it reaped (the supervisor, the server), and a
	// server reading 305 MB of requests on a busy machine can pass the proxy.
	var hwm atomic.Int64
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		status := fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid)
		for {
			b, err := os.ReadFile(status)
			if err != nil {
				return // exited
			}
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
					if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
						hwm.Store(kb << 10)
					}
				}
			}
			select {
			case <-p.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	body := strings.Repeat("lorem ipsum dolor sit amet ", size/27)
	w := bufio.NewWriterSize(p.Stdin, 1<<20)
	for i := 1; i <= calls; i++ {
		if err := p.Stdin.SetWriteDeadline(time.Now().Add(testutil.Guard)); err != nil {
			t.Fatal(err)
		}
		// rawserver never answers the tool "hang".
		if _, err := fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"hang","arguments":{"_bir_call_id":"c-%d","text":"%s %d"}}}`+"\n", i, i, body, i); err != nil {
			t.Fatalf("writing call %d: %v", i, err)
		}
		if i%500 == 0 {
			// Load shaping, not synchronisation: a host at full speed on a machine
			// busy with the rest of the suite outruns bookkeeping, whose queue then
			// holds requests whole up to its budget (256 MiB, docs/recording.md;
			// 751 MiB RSS in a full run). What this test holds the proxy to is what a
			// pending call keeps once bookkeeping has seen it: paced, the queue
			// stays short and the peak is that.
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// The host goes: every call ends upstream_lost, and is reported.
	p.Stdin.Close()
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	rest, _ := io.ReadAll(p.Stdout)
	if len(rest) != 0 {
		t.Errorf("the host was sent %.200q, for calls nobody answered", rest)
	}
	<-watched
	family := int64(p.Cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) << 10 // KiB on Linux
	peak := hwm.Load()
	t.Logf("peak RSS %d MiB for %d unanswered calls of %d KiB (the proxy with its reaped descendants: %d MiB)", peak>>20, calls, size>>10, family>>20)
	if peak == 0 {
		t.Fatal("the proxy's VmHWM was never read")
	}

	f, err := os.Open(journal)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		st := gjson.ParseBytes(sc.Bytes())
		id := st.Get("callId").String()
		if seen[id] || st.Get("outcome").String() != "upstream_lost" || st.Get("argsFingerprint").String() == "" ||
			!strings.HasPrefix(st.Get("args.text").String(), "lorem ipsum") || strings.Contains(sc.Text(), "fell behind") {
			t.Fatalf("a report not in full, or twice: %.300s", sc.Bytes())
		}
		seen[id] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != calls {
		t.Fatalf("%d reports for %d calls", len(seen), calls)
	}
	if peak > bound {
		t.Fatalf("peak RSS %d MiB, want at most %d MiB", peak>>20, bound>>20)
	}
}
