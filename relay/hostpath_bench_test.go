package relay_test

import (
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/session"
	"github.com/bir-dev/bir-proxy/upstream"
)

// discard is an upstream that takes every message and sends what is put in answers.
type discard struct {
	n       int
	answers chan []byte
}

func (d *discard) Read() ([]byte, error) {
	if m, ok := <-d.answers; ok {
		return m, nil
	}
	return nil, io.EOF
}
func (d *discard) Write(msg []byte) error { d.n += len(msg); return nil }
func (d *discard) Close() error           { return nil }

func (d *discard) Capabilities() upstream.Capabilities { return upstream.Capabilities{} }

// BenchmarkHostPath is the proxy's own work per small tools/call and its answer as
// BIR_OFF=1 runs it, without the syscalls and framing: the call through interception
// (the correlation key spliced out), the relay's registry of requests in flight and
// revival's look at it (upstream.Setup), written to a server behind session.Conn that
// discards it; then the answer through the relay's look. It is issue 13's "the pipe
// itself": the part of a message's cost that is the proxy's lexing and bookkeeping.
func BenchmarkHostPath(b *testing.B) {
	up := &discard{answers: make(chan []byte, 1)}
	rc := session.New(up, session.Options{Name: "bench", IDPrefix: "bir:x:"})
	defer rc.Terminate()
	r := relay.New(relay.Options{Upstream: rc, Intercept: intercept.New(intercept.Options{}), IDPrefix: "bir:x:"})
	// A session, as a host starts one: what revival records of it is then known, and
	// the calls that follow are looked at as they are in a session.
	now := time.Now()
	r.Forward([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`), now)
	up.answers <- []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`)
	if msg, err := rc.Read(); err != nil || r.NoteUpstream(msg, now) {
		b.Fatalf("the initialize answer: %v", err)
	}
	r.Forward([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), now)
	if rc.Setup().Era() != upstream.EraSession {
		b.Fatal("no session recorded")
	}
	const n = 1024
	calls := make([][]byte, n)
	answers := make([][]byte, n)
	for i := range calls {
		id := strconv.Itoa(i)
		calls[i] = []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world","_bir_call_id":"c-` + id + `"}}}`)
		answers[i] = []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"hello, world"}]}}`)
	}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := i % n
		// The key is spliced out in place, as the framing reader's fresh slice allows.
		buf = append(buf[:0], calls[k]...)
		if !r.Forward(buf, now) {
			b.Fatal("the relay stopped")
		}
		if r.NoteUpstream(answers[k], now) {
			b.Fatal("a host answer taken for the proxy's own")
		}
	}
	if up.n == 0 {
		b.Fatal("nothing reached the upstream")
	}
}
