package recorder

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Remote is the recorder as a poll loop sees it (SPEC §5: poll, result): the same
// HTTP client and endpoint delivery uses, and a door into registration, so that a
// recorder that forgot this run's proxyId gets the one register reports also wait
// for, not a second one of the poll loop's own.
//
// Post makes exactly one attempt: like every request of this package, the caller's
// backoff is its only retry policy.
type Remote struct {
	d       *dispatcher
	proxyID string
}

// Answer is what came back from one Post.
type Answer struct {
	Status     int
	Body       []byte        // up to the limit given to Post
	RetryAfter time.Duration // the recorder asked to wait (429/503), else 0
}

// ErrClosed is returned by WaitRegistered once the Reporter is closed.
var ErrClosed = errors.New("the recorder connection is closed")

// Remote returns the recorder this Reporter delivers to, or nil in journal mode.
func (r *Reporter) Remote() *Remote {
	if r.d == nil {
		return nil
	}
	return &Remote{d: r.d, proxyID: r.proxyID}
}

// ProxyID is this run's proxyId.
func (c *Remote) ProxyID() string { return c.proxyID }

// Post sends body to path (e.g. "/proxy/poll") once and returns the answer, keeping at
// most limit bytes of it. An error means no whole answer came (refused, cut off, ctx).
func (c *Remote) Post(ctx context.Context, path string, body []byte, limit int64) (Answer, error) {
	resp := c.d.client.postLimit(ctx, c.d.endpoint(), path, body, limit)
	if resp.err != nil {
		return Answer{}, resp.err
	}
	if resp.cut != nil {
		return Answer{}, fmt.Errorf("post %s: reading the answer: %w", path, resp.cut)
	}
	return Answer{Status: resp.status, Body: resp.body, RetryAfter: resp.retryAfter}, nil
}

// Registered is how many registers of this run's proxyId have succeeded so far.
func (c *Remote) Registered() uint64 {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return c.d.registered
}

// Reregister says the recorder may have forgotten this run's proxyId (a route answered
// unknown_proxy, or it answers again after being unreachable): delivery registers it
// again, ahead of any report, under its own backoff. It returns Registered as it was,
// for WaitRegistered.
func (c *Remote) Reregister() uint64 {
	c.d.mu.Lock()
	c.d.forget = true
	n := c.d.registered
	c.d.mu.Unlock()
	c.d.poke()
	return n
}

// WaitRegistered waits until more than after registers have succeeded, ctx ends, or the
// Reporter is closed.
func (c *Remote) WaitRegistered(ctx context.Context, after uint64) error {
	for {
		c.d.mu.Lock()
		n, changed := c.d.registered, c.d.regChanged
		c.d.mu.Unlock()
		if n > after {
			return nil
		}
		select {
		case <-changed:
		case <-c.d.done:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("waiting for the recorder to register this proxy: %w", ctx.Err())
		}
	}
}
