package main

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestRemoteStopIsBoundedWhenTheServerNeverAnswers: `bir-proxy --url` to a server that
// accepts connections and never answers. The host sends initialize and ends the
// session (closes stdin; with sig, also SIGTERM): the proxy must exit within
// --stop-grace + 1 s, however long the POST under way would wait.
func TestRemoteStopIsBoundedWhenTheServerNeverAnswers(t *testing.T) {
	eachStop(t, func(t *testing.T, sig bool) {
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
		endSession(t, s, sig, grace+time.Second)
	})
}
