// Package backoff is the one retry pacing of the proxy: a wait that grows from a base
// by a factor per failure in a row, up to a cap, drawn with jitter, and stretched to
// what the peer asked with Retry-After (up to a bound). Every retry loop — recorder
// delivery, replay's polls and results, the OTLP exporter, the HTTP clients built on
// go-retryablehttp — takes its waits from a Policy; they differ only in their numbers,
// which each loop's documentation gives.
package backoff

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Jitter is how a wait is drawn from the step d.
type Jitter uint8

const (
	// Full draws from [0, d]: proxies that lost a peer together do not come back in
	// lockstep, and the mean wait is half the step.
	Full Jitter = iota
	// Half draws from [d/2, d]: never less than half the step (recorder delivery, whose
	// pause stops everything: a wait near zero would be no pause at all).
	Half
	// None waits d exactly.
	None
)

// Policy is one loop's numbers. Base and Cap are required; the rest default.
type Policy struct {
	Base   time.Duration // the step after the first failure
	Cap    time.Duration // the largest step
	Factor float64       // growth per failure in a row; 0 means 2
	Jitter Jitter
	// MaxRetryAfter bounds how long a peer's Retry-After can make the wait; 0 means
	// Cap. A Retry-After shorter than the drawn wait does not shorten it.
	MaxRetryAfter time.Duration
}

// Step is the wait before jitter after failures earlier failures in a row (0 for
// the first): Base·Factor^failures, at most Cap. It never overflows.
func (p Policy) Step(failures int) time.Duration {
	f := p.Factor
	if f <= 1 {
		f = 2
	}
	d := p.Base
	if d <= 0 || d >= p.Cap {
		return p.Cap
	}
	limit := time.Duration(float64(p.Cap) / f) // past it, one more growth passes Cap
	for range failures {
		if d >= limit {
			return p.Cap
		}
		if f == 2 {
			d *= 2 // exact, as the shifts it replaces
		} else {
			d = time.Duration(float64(d) * f)
		}
	}
	return min(d, p.Cap)
}

// Next is the wait after one more failure, failures being those before it in a row
// (0 for the first): Step(failures) drawn with the policy's jitter, or retryAfter
// (what the peer asked, 0 when it asked nothing) when that is longer, bounded by
// MaxRetryAfter.
func (p Policy) Next(failures int, retryAfter time.Duration) time.Duration {
	d := p.Step(failures)
	var wait time.Duration
	switch p.Jitter {
	case Full:
		wait = rand.N(d + 1)
	case Half:
		wait = d/2 + rand.N(d/2+1)
	default:
		wait = d
	}
	if retryAfter > wait {
		bound := p.MaxRetryAfter
		if bound <= 0 {
			bound = p.Cap
		}
		wait = max(wait, min(retryAfter, bound))
	}
	return wait
}

// Sleep waits d or until ctx ends, reporting whether the whole wait passed. The timer
// exists only for the wait: an idle loop holds none.
func Sleep(ctx context.Context, d time.Duration) bool {
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

// maxRetryAfter bounds what RetryAfter returns, far above any loop's bound: a peer's
// 10^12 seconds must not overflow a Duration.
const maxRetryAfter = 24 * time.Hour

// RetryAfter reads a Retry-After header's value (RFC 9110 §10.2.3): delay-seconds, or
// an HTTP date, taken as the time from now to it. It is 0 when v is absent, not one of
// the two, longer than any of them can be, zero or negative, or a date not after now;
// at most 24 h. Callers bound it further (Policy.Next).
func RetryAfter(v string, now time.Time) time.Duration {
	if v == "" || len(v) > 64 {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// FromResponse is RetryAfter of resp's header (0 for a nil resp).
func FromResponse(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	return RetryAfter(resp.Header.Get("Retry-After"), time.Now())
}
