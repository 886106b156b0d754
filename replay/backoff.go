package replay

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is the pause after failures in a row: full jitter, each wait drawn from
// [0, min(cap, base·2^n)], so proxies that lost the recorder together do not come
// back in lockstep, and a recorder down for a minute sees about ten attempts.
type backoff struct {
	base, cap time.Duration
	failures  int
}

// next is the wait after one more failure; a Retry-After the recorder sent is
// honoured up to the cap.
func (b *backoff) next(retryAfter time.Duration) time.Duration {
	d := b.base << min(b.failures, 30)
	if d <= 0 || d > b.cap {
		d = b.cap
	}
	b.failures++
	wait := rand.N(d + 1)
	if retryAfter > wait {
		wait = min(retryAfter, b.cap)
	}
	return wait
}

func (b *backoff) reset() { b.failures = 0 }

// sleep waits d or until ctx ends, reporting whether the whole wait passed. The timer
// exists only for the wait: an idle executor holds none.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
