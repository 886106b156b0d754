package upstream

import (
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestRemoteSessionCancelClosesTheStreamAfterGrace: a session-era request the
// host cancels, on a server that never answers it, has its response stream closed
// after cancelGrace (the server sees it closed), for an event-stream answer and for a
// JSON answer whose headers never came; the host gets nothing for it, and the
// notification itself was POSTed (the session era's way to cancel).
func TestRemoteSessionCancelClosesTheStreamAfterGrace(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{"sse", "json"} {
		t.Run(answer, func(t *testing.T) {
			t.Parallel()
			url, record := rawHTTP(t, "--answer", answer)
			cl := dial(t, Remote{URL: url, Transport: TransportHTTP})
			cl.handshake()
			cl.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang","arguments":{}}}`)
			testutil.Eventually(t, "the server to have the call", func() bool {
				for _, r := range requests(t, record) {
					if strings.Contains(r.Body, `"hang"`) {
						return true
					}
				}
				return false
			})
			cl.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
			testutil.Eventually(t, "the server to see the cancelled request's stream closed", func() bool {
				for _, r := range requests(t, record) {
					if r.Method == "EVENT" && r.Path == "closed" && r.Body == "1" {
						return true
					}
				}
				return false
			})
			cl.write(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
			if got := cl.next(); !strings.Contains(got, `"id":2`) {
				t.Fatalf("after a cancel the host must get nothing for the cancelled call, got %s", got)
			}
			posted := false
			for _, r := range requests(t, record) {
				posted = posted || strings.Contains(r.Body, "notifications/cancelled")
			}
			if !posted {
				t.Error("the session era cancels with the notification; it was not POSTed")
			}
		})
	}
}
