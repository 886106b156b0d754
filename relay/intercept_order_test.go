package relay_test

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// slowSeenIC is a seenIC slow to take what the upstream sent, as a bookkeeping push
// can be on a loaded machine.
type slowSeenIC struct{ seenIC }

func (ic *slowSeenIC) FromUpstream(msg []byte, at time.Time) {
	time.Sleep(20 * time.Millisecond)
	ic.seenIC.FromUpstream(msg, at)
}

// TestInterceptionSeesAnAnswerBeforeTheHost: interception is handed each answer of
// the server's before the host can read it, so a host request built on an answer (a
// tools/call retry carrying the requestState the answer gave) is never looked at
// before that answer. Told after the write, the retry was queued first now and then
// under load, and a two-round call was reported as two calls.
func TestInterceptionSeesAnAnswerBeforeTheHost(t *testing.T) {
	for _, n := range []int{2, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			up := newReplacingConn()
			ic := &slowSeenIC{}
			_, host := wireConn(t, up, ic)
			for i := range n {
				host.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t"}}`, i))
				written(t, up)
			}
			for i := range n {
				answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"resultType":"input_required","requestState":"s%d"}}`, i, i)
				up.from <- fromServer{msg: []byte(answer)}
			}
			for range n {
				got := host.next(t)
				if !slices.Contains(ic.seen(), got) {
					t.Fatalf("the host read %s before interception was handed it", got)
				}
			}
		})
	}
}
