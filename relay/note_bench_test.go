package relay

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkNote is the relay's own per-message look at a small call and its answer:
// the registry of requests in flight, both directions.
func BenchmarkNote(b *testing.B) {
	r := New(Options{IDPrefix: "bir:x:"})
	reqs := make([][]byte, 1024)
	resps := make([][]byte, 1024)
	for i := range reqs {
		id := strconv.Itoa(i)
		reqs[i] = []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}`)
		resps[i] = []byte(`{"result":{"content":[{"type":"text","text":"hello, world"}]},"jsonrpc":"2.0","id":` + id + `}`)
	}
	b.ReportAllocs()
	now := time.Now()
	for i := 0; b.Loop(); i++ {
		r.lx.Lex(reqs[i%1024]) // the host path's one lex of the message
		r.noteHost(reqs[i%1024], &r.lx)
		r.noteUpstream(resps[i%1024], false, now)
	}
}
