package upstream

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// How a remote connection ends with its session (end.go).

// endServer is a Streamable HTTP server of one session, s1: it answers initialize,
// a 404 to the tools/call "expire" (it forgot the session), and every other tools/call
// and cancel with call.
func endServer(t *testing.T, call func(w http.ResponseWriter, body string)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		b, _ := io.ReadAll(r.Body)
		s := string(b)
		switch {
		case strings.Contains(s, `"initialize"`):
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"x","version":"0"}}}`)
		case strings.Contains(s, `"expire"`):
			w.WriteHeader(http.StatusNotFound)
		case strings.Contains(s, `tools/call`) || strings.Contains(s, `notifications/cancelled`):
			call(w, s)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestAnswersReadBeforeTheEndReachTheReader: 2 and 8 (and 100) calls answered while
// the reader is slow, their answers waiting for room in the inbox, then the session
// ends. Every answer the server sent reaches the reader: cancelling the session's
// exchanges dropped those still waiting, and the relay answered calls that had run
// as lost (a host that retries runs them twice).
func TestAnswersReadBeforeTheEndReachTheReader(t *testing.T) {
	for _, n := range []int{2, 8, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			var answered atomic.Int32
			srv := endServer(t, func(w http.ResponseWriter, s string) {
				i := strings.Index(s, `"id":`)
				j := strings.Index(s[i:], ",")
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0",`+s[i:i+j]+`,"result":{"content":[]}}`)
				answered.Add(1)
			})
			sh, err := newRemoteShared(Remote{URL: srv.URL, Transport: TransportHTTP, Name: "x", CloseGrace: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			c := newRemote(sh)
			defer c.Close()
			write := func(msg string) {
				if err := c.Write([]byte(msg)); err != nil {
					t.Fatal(err)
				}
			}
			write(initReq)
			write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			if _, err := c.Read(); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fast"}}`, 100+i))
			}
			// Every answer read off the wire (no request pending): those past the
			// inbox's 64 wait in deliver for room. An answer still on the wire as
			// the session ends is lost with it, as any request in flight is.
			testutil.Eventually(t, "every answer read", func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				return answered.Load() == int32(n) && len(c.pending) == 0
			})
			write(`{"jsonrpc":"2.0","id":999,"method":"tools/call","params":{"name":"expire"}}`)
			// The reader is slow (a slow host): the end comes while answers wait.
			time.Sleep(100 * time.Millisecond)
			got := 0
			for {
				m, err := c.Read()
				var se *SessionEndedError
				if errors.As(err, &se) {
					break
				}
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if strings.Contains(string(m), `"result"`) {
					got++
				}
			}
			if got != n {
				t.Fatalf("the server answered %d calls before its session ended; the reader got %d", n, got)
			}
		})
	}
}

// TestCancelledCallIsNotCarried: the host cancels a call the ended session refused (its
// 404 comes after the cancel), and one still queued behind the end with its cancel.
// Neither goes to the next session: it would run a tool the host gave up on.
func TestCancelledCallIsNotCarried(t *testing.T) {
	t.Parallel()
	callIn, cancelIn := make(chan struct{}), make(chan struct{})
	var once, cancelOnce sync.Once
	srv := endServer(t, func(w http.ResponseWriter, s string) {
		if strings.Contains(s, `notifications/cancelled`) {
			cancelOnce.Do(func() { close(cancelIn) })
			w.WriteHeader(http.StatusNotFound)
			return
		}
		once.Do(func() { close(callIn) })
		select {
		case <-cancelIn:
		case <-time.After(wait):
		}
		w.WriteHeader(http.StatusNotFound)
	})
	cl := dial(t, Remote{URL: srv.URL, Transport: TransportHTTP})
	cl.handshake()
	cl.write(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	<-callIn
	cl.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	select {
	case se := <-cl.ended:
		for _, m := range se.Msgs {
			if strings.Contains(string(m), `"id":5`) {
				t.Fatalf("the cancelled call is carried to the next session: %s", m)
			}
		}
	case <-time.After(wait):
		t.Fatalf("the session did not end; log:\n%s", cl.log)
	}
}

// TestQueuedCancelDropsItsCall: a call and its cancel still queued when the session
// ends (refuse, as the end drains the queue): the call is not carried.
func TestQueuedCancelDropsItsCall(t *testing.T) {
	c := &remoteConn{remoteShared: &remoteShared{log: slog.New(slog.NewTextHandler(io.Discard, nil))}, pending: map[string]*pendingReq{}}
	c.end.init()
	c.end.is.Store(true)
	call := parseOut([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`))
	other := parseOut([]byte(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"y"}}`))
	cancel := parseOut([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`))
	for _, m := range []*outMsg{call, other, cancel} {
		c.refuse(m)
	}
	if len(c.end.refused) != 1 || c.end.refused[0] != other {
		t.Fatalf("carried %d messages, want only the call not cancelled", len(c.end.refused))
	}
}
