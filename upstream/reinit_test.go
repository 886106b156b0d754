package upstream

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestReinitBacksOffAndGivesUp: a server that answers every GET with a session id
// with 404 expires each new session at once. In fake time the new sessions come
// 100 ms doubling apart, and after maxReinits of them no more are started for
// reinitMax; then one more round may begin. Before, they came with no pause at all.
func TestReinitBacksOffAndGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			inits []time.Time
		)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body []byte
			if r.Body != nil {
				body, _ = io.ReadAll(r.Body)
			}
			switch {
			case r.Method == http.MethodGet:
				w.WriteHeader(http.StatusNotFound)
			case strings.Contains(string(body), `"initialize"`):
				mu.Lock()
				inits = append(inits, time.Now())
				n := len(inits)
				mu.Unlock()
				id := strings.TrimSuffix(strings.SplitN(strings.SplitN(string(body), `"id":`, 2)[1], ",", 2)[0], "}")
				w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", n))
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"r","version":"1"}}}`)
			default:
				w.WriteHeader(http.StatusAccepted)
			}
		})
		cl := dial(t, Remote{URL: "http://fake.invalid/mcp", Transport: TransportHTTP, Client: &http.Client{Transport: handlerTransport{h}}})
		start := time.Now()
		cl.write(initReq)
		<-cl.msgs
		cl.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		time.Sleep(reinitMax - time.Second) // fake time: everything that would happen by then has
		synctest.Wait()
		mu.Lock()
		got := append([]time.Time(nil), inits...)
		mu.Unlock()
		if len(got) != 1+maxReinits {
			t.Fatalf("%d initialize POSTs in the first %v, want the host's and %d new sessions", len(got), time.Since(start), maxReinits)
		}
		// got[0] is the host's initialize; got[1] the first new session, at once.
		want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
		for i, w := range want {
			if gap := got[i+1].Sub(got[i]); gap != w {
				t.Errorf("initialize %d came %v after the one before, want %v", i+1, gap, w)
			}
		}
		// After the cool-down, one more round may begin.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		mu.Lock()
		after := len(inits)
		mu.Unlock()
		if after > len(got)+maxReinits {
			t.Errorf("%d initialize POSTs after the cool-down, want at most one more round", after-len(got))
		}
	})
}
