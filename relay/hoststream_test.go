package relay_test

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/upstream"
)

// lateIC is a keyed interceptor that counts what it is given after the test says
// Run has returned (the session then closes it: a recorder's spool is gone).
type lateIC struct {
	mu     sync.Mutex
	closed bool
	late   []string
}

func (ic *lateIC) note(what string) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.closed {
		ic.late = append(ic.late, what)
	}
}

func (ic *lateIC) close() {
	ic.mu.Lock()
	ic.closed = true
	ic.mu.Unlock()
}

func (ic *lateIC) lateCalls() []string {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return append([]string(nil), ic.late...)
}

func (ic *lateIC) CorrelationKey() string { return "_bir_call_id" }
func (ic *lateIC) FromHost(msg []byte, _ time.Time) []byte {
	ic.note("FromHost")
	return msg
}
func (ic *lateIC) Forwarded(time.Time) { ic.note("Forwarded") }
func (ic *lateIC) FromProxy(msg []byte, _ relay.Own, _ time.Time) []byte {
	ic.note("FromProxy")
	return msg
}
func (ic *lateIC) FromUpstream([]byte, time.Time) { ic.note("FromUpstream") }
func (ic *lateIC) ToProxy([]byte, time.Time)      { ic.note("ToProxy") }
func (ic *lateIC) UpstreamLost(time.Time)         { ic.note("UpstreamLost") }

func (ic *lateIC) Capabilities() relay.Capabilities { return relay.Capabilities{Keyed: ic} }

// TestLongHostCallEndingAfterRunTouchesNoInterceptor: a host input whose read
// cannot be interrupted (a blocking stdin, as the proxy uses with two CPUs or more)
// is not joined by the end of Run, which then leaves the interceptor and the
// upstream to be closed. A long call the host was streaming when the server died,
// and that it finishes after Run returned, must touch neither: the streamed line's
// end answered it through interception (FromUpstream) on an interceptor already
// closed.
func TestLongHostCallEndingAfterRunTouchesNoInterceptor(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	record, _ := recordFIFO(t)
	proc, err := upstream.Start(upstream.Command{Path: raw, Args: []string{"--record", record}, Name: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer outR.Close()
	defer outW.Close()
	go io.Copy(io.Discard, outR)
	if err := inW.SetWriteDeadline(time.Now().Add(testutil.Guard)); err != nil {
		t.Fatal(err)
	}
	ic := &lateIC{}
	// struct{ io.Reader } hides SetReadDeadline: the read cannot be interrupted.
	r := relay.New(relay.Options{HostIn: struct{ io.Reader }{inR}, HostOut: outW, Upstream: proc, Intercept: ic, IDPrefix: "bir:test:", StreamThreshold: 1})
	ran := make(chan error, 1)
	go func() { ran <- r.Run(context.Background()) }()

	head := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"w","arguments":{"_bir_call_id":"c","content":"`
	// Written, the proxy has read most of it (a pipe holds 64 KiB): the line is
	// being streamed to the server.
	if _, err := io.WriteString(inW, head+strings.Repeat("x", 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(proc.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Recv(t, ran, "Run to return after the server died")
	ic.close() // what the session does once Run has returned
	if _, err := io.WriteString(inW, strings.Repeat("y", 256<<10)+`"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	inW.Close()
	testutil.Recv(t, r.HostDone(), "the host pump to end at the host's end")
	if late := ic.lateCalls(); len(late) > 0 {
		t.Fatalf("the interceptor was called after Run returned: %v", late)
	}
}
