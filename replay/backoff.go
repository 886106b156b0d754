package replay

import (
	"time"

	"github.com/bir-dev/bir-proxy/internal/backoff"
)

// pacer is the pause after failures in a row: full jitter, each wait drawn from
// [0, min(cap, base·2^n)], so proxies that lost the recorder together do not come
// back in lockstep, and a recorder down for a minute sees about ten attempts.
type pacer struct {
	policy   backoff.Policy
	failures int
}

// newPacer is the pacer of the tuning's numbers (250 ms doubling to 30 s by default).
func newPacer(t tuning) pacer {
	return pacer{policy: backoff.Policy{Base: t.backoffBase, Cap: t.backoffCap, Jitter: backoff.Full}}
}

// next is the wait after one more failure; a Retry-After the recorder sent is
// honoured up to the cap.
func (b *pacer) next(retryAfter time.Duration) time.Duration {
	wait := b.policy.Next(b.failures, retryAfter)
	b.failures++
	return wait
}

func (b *pacer) reset() { b.failures = 0 }
