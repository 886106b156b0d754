package relay_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/upstream"
)

// TestLentMessagesKeptAreCopies: on a pure pipe both readers lend their lines
// (framing.WithLending: the server's with Command.Slab, the host's because nothing
// records and a Process copies what it is written). What the relay keeps past the
// next read, an answer to its own request, must be a copy: every answer a caller got
// is still its own once the host's pipelined traffic has gone through the buffers.
func TestLentMessagesKeptAreCopies(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	proc, err := upstream.Start(upstream.Command{Path: raw, Args: []string{"--reply"}, Name: "raw", Slab: true})
	if err != nil {
		t.Fatal(err)
	}
	r, host := wireConn(t, proc, nil)
	const n = 300
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			if err := host.w.Write([]byte(`{"jsonrpc":"2.0","id":` + itoa(i) + `,"method":"tools/call","params":{"name":"echo","arguments":{"host":` + itoa(i) + `}}}`)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	hostGot := make(chan []string, 1)
	go func() {
		var got []string
		for range n {
			msg, err := host.r.Read()
			if err != nil {
				t.Error(err)
				break
			}
			got = append(got, string(msg))
		}
		hostGot <- got
	}()
	var answers [][]byte
	for i := range n / 3 {
		resp, err := r.Call(context.Background(), relay.Request{Method: "tools/call", Params: []byte(`{"name":"echo","arguments":{"own":` + itoa(i) + `}}`)})
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, resp)
	}
	wg.Wait()
	got := testutil.Recv(t, hostGot, "the host's answers")
	for i, a := range answers {
		if !strings.Contains(string(a), `{\"own\":`+itoa(i)+`}`) {
			t.Fatalf("own answer %d changed after it was returned: %.200s", i, a)
		}
	}
	for i, m := range got {
		if !strings.Contains(m, `"id":`+itoa(i)+`,`) || !strings.Contains(m, `{\"host\":`+itoa(i)+`}`) {
			t.Fatalf("host answer %d: %.200s", i, m)
		}
	}
}

// keeper is an upstream that keeps every message written to it, as given, and does
// not say it copies them (CopiesWrites): the relay must not lend it any.
type keeper struct {
	up   upstream.Conn
	mu   sync.Mutex
	kept [][]byte
}

func (k *keeper) Read() ([]byte, error) { return k.up.Read() }
func (k *keeper) Close() error          { return k.up.Close() }

// Capabilities: none, CopiesWrites above all.
func (k *keeper) Capabilities() upstream.Capabilities { return upstream.Capabilities{} }
func (k *keeper) Write(m []byte) error {
	k.mu.Lock()
	k.kept = append(k.kept, m)
	k.mu.Unlock()
	return k.up.Write(m)
}

// TestNoLendingToAKeeper: an upstream that does not promise to copy what it is
// written gets host messages of its own, even on a pure pipe: each one it kept is
// still what the host sent once all of them went through the host's read buffer.
func TestNoLendingToAKeeper(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawserver")
	proc, err := upstream.Start(upstream.Command{Path: raw, Args: []string{"--reply"}, Name: "raw", Slab: true})
	if err != nil {
		t.Fatal(err)
	}
	k := &keeper{up: proc}
	_, host := wireConn(t, k, nil)
	const n = 2000
	call := func(i int) string {
		return `{"jsonrpc":"2.0","id":` + itoa(i) + `,"method":"tools/call","params":{"name":"echo","arguments":{"host":` + itoa(i) + `}}}`
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			if err := host.w.Write([]byte(call(i))); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for i := range n {
		if _, err := host.r.Read(); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	wg.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.kept) != n {
		t.Fatalf("the upstream was written %d messages, want %d", len(k.kept), n)
	}
	for i, m := range k.kept {
		if string(m) != call(i) {
			t.Fatalf("message %d as the upstream kept it changed to %.200q", i, m)
		}
	}
}
