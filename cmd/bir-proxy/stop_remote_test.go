package main

import (
	"net"
	"sync"
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
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			// Accepts, reads, and never answers: connections are held until the test ends.
			var mu sync.Mutex
			var conns []net.Conn
			accepted := make(chan struct{}, 16)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
					go func() {
						buf := make([]byte, 4096)
						for {
							if _, err := c.Read(buf); err != nil {
								return
							}
						}
					}()
					select {
					case accepted <- struct{}{}:
					default:
					}
				}
			}()
			t.Cleanup(func() {
				ln.Close()
				mu.Lock()
				for _, c := range conns {
					c.Close()
				}
				mu.Unlock()
			})
			const grace = time.Second
			s := startProxy(t, nil, "--server", "mute", "--transport", "http", "--stop-grace", grace.String(), "--url", "http://"+ln.Addr().String()+"/mcp")
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
