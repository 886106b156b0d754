package mock

import (
	"bufio"
	"context"
	"io"
	"sync"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// MaxMessage bounds one line the mock reads: the proxy's own bound.
const MaxMessage = 256 << 20

// maxWaiting bounds the answers being waited for (latency, the live server): past it
// the mock reads no more until one is written.
const maxWaiting = 1024

// MaxLatency bounds a recorded duration waited for (--latency recorded).
const MaxLatency = time.Hour

// Serve answers the newline-delimited JSON-RPC messages read from in on out until in
// ends (then the answers still waited for are written, unless ctx is done) or ctx is
// done. A line past MaxMessage ends it with an error.
func (m *Mock) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	br := bufio.NewReaderSize(in, 64<<10)
	var wmu sync.Mutex
	var werr error
	write := func(b []byte) {
		if b == nil {
			return
		}
		wmu.Lock()
		defer wmu.Unlock()
		if werr == nil {
			_, werr = out.Write(append(b, '\n'))
		}
	}
	slots := make(chan struct{}, maxWaiting)
	// waits are the answers waited for, by their request's id: a host's
	// notifications/cancelled ends the wait, and its answer is not written (1024
	// cancelled calls recorded as slow took every slot, and the mock read no more,
	// TestCancelledCallIsNotWaitedFor).
	type wait struct{ cancel context.CancelFunc }
	var cmu sync.Mutex
	waits := map[string]*wait{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		line, _, err := cassette.ReadLine(br, MaxMessage)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if !jsonlex.Valid(line) {
			write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bir-proxy mock: a line that is not JSON"}}`))
			continue
		}
		jsonlex.EachRPC(line, func(msg []byte, f jsonlex.Fields) {
			if f.ID == nil && jsonlex.KeyIs(f.Method, "notifications/cancelled") {
				cmu.Lock()
				if w, ok := waits[jsonlex.IDKey(jsonlex.Get(f.Params, "requestId"))]; ok {
					w.cancel()
				}
				cmu.Unlock()
			}
			a := m.Take(msg, f)
			if a.Now() {
				write(a.reply)
				return
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wctx, cancel := context.WithCancel(ctx)
			w, k := &wait{cancel}, jsonlex.IDKey(f.ID)
			cmu.Lock()
			waits[k] = w // a reused id: the latest request's wait is cancelled
			cmu.Unlock()
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				if b := a.Wait(wctx); wctx.Err() == nil {
					write(b)
				}
				cancel()
				cmu.Lock()
				if waits[k] == w {
					delete(waits, k)
				}
				cmu.Unlock()
			}()
		})
		wmu.Lock()
		err = werr
		wmu.Unlock()
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
