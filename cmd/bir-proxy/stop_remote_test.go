package main

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestRemoteStopIsBoundedWhenTheServerNeverAnswers: `bir-proxy --url` to a server that
// accepts connections and never answers. The host sends initialize and ends the
// session (closes stdin; with sig, also SIGTERM): the proxy must exit within
// --stop-grace + 1 s, however long the POST under way would wait.
func TestRemoteStopIsBoundedWhenTheServerNeverAnswers(t *testing.T) {
	for _, sig := range []bool{false, true} {
		name := "eof"
		if sig {
			name = "eof+sigterm"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Accepts, reads, and never answers: connections are held until the test ends.
			accepted := make(chan struct{}, 16)
			addr := rawPeer(t, func(c net.Conn) {
				select {
				case accepted <- struct{}{}:
				default:
				}
				_, _ = io.Copy(io.Discard, c)
			})
			const grace = time.Second
			s := startProxy(t, nil, "--server", "mute", "--transport", "http", "--stop-grace", grace.String(), "--url", "http://"+addr+"/mcp")
			s.Send(initializeReq)
			select {
			case <-accepted:
			case <-time.After(20 * time.Second):
				t.Fatal("the proxy never connected to the server")
			}
			began := time.Now()
			s.Stdin.Close()
			if sig {
				if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			bound := grace + time.Second
			select {
			case <-s.Done():
			case <-time.After(bound + 5*time.Second):
				t.Fatalf("the proxy was still running %v after the host ended the session (bound %v)", time.Since(began).Round(time.Millisecond), bound)
			}
			t.Logf("exited %v after the host ended the session", time.Since(began).Round(time.Millisecond))
		})
	}
}
