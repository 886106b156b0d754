package replay

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/backoff"
)

// sender posts dispatch results (POST /proxy/result) one at a time, in the order the
// dispatches ended. A result that fails is retried with the poll loop's backoff until
// giveUp after its dispatch ended, then dropped with one log line (for every result
// dropped at that moment). It holds no timer and no request while there is nothing to
// post.
type sender struct {
	e *Executor

	mu      sync.Mutex
	queue   []pendingResult
	queuedB int // bytes of the bodies in queue
	// refusedFull counts results not queued because the queue was full, since that
	// was last said (under mu).
	refusedFull int
	full        atomic.Bool // the queue is at its bound: the poll loop waits before polling again
	wake        chan struct{}
	closing     chan struct{} // Close began: post what can be posted, then end

	ctx    context.Context // ends posts and waits at Close's deadline
	cancel context.CancelFunc
	done   chan struct{}

	// droppedInOutage counts results given up since the first give-up was said; -1
	// while none has been (owned by run).
	droppedInOutage int
}

type pendingResult struct {
	id    string
	body  []byte
	since time.Time
}

func newSender(e *Executor) *sender {
	ctx, cancel := context.WithCancel(context.Background())
	return &sender{e: e, wake: make(chan struct{}, 1), closing: make(chan struct{}), ctx: ctx, cancel: cancel, done: make(chan struct{}), droppedInOutage: -1}
}

// add queues a result; it never waits. Past the queue's bound (maxResults results or
// maxResultBytes of them) the result is dropped and counted: a recorder that hands
// out dispatches without taking their results once grew this queue by gigabytes in
// seconds, and a result it does not take cannot be told anything anyway. The first
// drop of a run of them is said at once, the count when the queue has room again.
func (s *sender) add(id string, body []byte) {
	t := s.e.tune
	s.mu.Lock()
	if len(s.queue) >= t.maxResults || s.queuedB+len(body) > t.maxResultBytes {
		s.refusedFull++
		first := s.refusedFull == 1
		s.full.Store(true)
		n := len(s.queue)
		s.mu.Unlock()
		if first {
			s.e.log.Warn("too many dispatch results waiting for the recorder; dropping new ones until it takes some", "waiting", n, "dispatchId", id)
		}
		return
	}
	s.queue = append(s.queue, pendingResult{id: id, body: body, since: time.Now()})
	s.queuedB += len(body)
	if len(s.queue) >= t.maxResults || s.queuedB >= t.maxResultBytes {
		s.full.Store(true)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// close lets the sender post what it can until ctx ends, then stops it.
func (s *sender) close(ctx context.Context) {
	close(s.closing)
	select {
	case <-s.done:
	case <-ctx.Done():
		s.cancel()
		<-s.done
	}
	s.cancel()
}

// head waits for the oldest result; ok is false once closing with nothing left, or
// cut off by close's deadline.
func (s *sender) head() (pendingResult, bool) {
	closing := s.closing
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			p := s.queue[0]
			s.mu.Unlock()
			return p, true
		}
		s.mu.Unlock()
		if closing == nil {
			return pendingResult{}, false
		}
		select {
		case <-s.wake:
		case <-closing:
			closing = nil // one more look: the last results may have just arrived
		case <-s.ctx.Done():
			return pendingResult{}, false
		}
	}
}

func (s *sender) pop() {
	s.mu.Lock()
	s.queuedB -= len(s.queue[0].body)
	s.queue[0] = pendingResult{} // the body goes with it, not with the array
	s.queue = s.queue[1:]
	s.roomLocked()
	s.mu.Unlock()
}

// roomLocked notes that the queue may have room again, and says how many results
// were dropped while it had none.
func (s *sender) roomLocked() {
	t := s.e.tune
	if len(s.queue) >= t.maxResults || s.queuedB >= t.maxResultBytes {
		return
	}
	if s.refusedFull > 0 {
		s.e.log.Warn("dropped dispatch results while too many were waiting for the recorder", "count", s.refusedFull)
		s.refusedFull = 0
	}
	s.full.Store(false)
}

// dropOlder gives up every result that has waited past giveUp. The first give-up of
// an outage is said at once; later ones are only counted, and said in one line when
// the recorder takes a result again or the proxy exits: a recorder that fails for an
// hour costs two lines, not one per dispatch.
func (s *sender) dropOlder(now time.Time) {
	s.mu.Lock()
	var ids []string
	keep := s.queue[:0]
	for _, p := range s.queue {
		if now.Sub(p.since) >= s.e.tune.giveUp {
			ids = append(ids, p.id)
			s.queuedB -= len(p.body)
		} else {
			keep = append(keep, p)
		}
	}
	clear(s.queue[len(keep):]) // the dropped bodies go
	s.queue = keep
	s.roomLocked()
	s.mu.Unlock()
	if s.droppedInOutage < 0 {
		s.logDropped(ids, "the recorder did not take them within "+s.e.tune.giveUp.String())
		s.droppedInOutage = 0
		return
	}
	s.droppedInOutage += len(ids)
}

// outageOver says the dropped results counted since the first give-up, if any.
func (s *sender) outageOver() {
	if s.droppedInOutage > 0 {
		s.e.log.Warn("gave up posting more dispatch results while the recorder was failing", "count", s.droppedInOutage)
	}
	s.droppedInOutage = -1
}

func (s *sender) logDropped(ids []string, why string) {
	if len(ids) == 0 {
		return
	}
	shown := ids
	if len(shown) > 5 {
		shown = shown[:5]
	}
	s.e.log.Warn("gave up posting dispatch results: "+why, "count", len(ids), "dispatchIds", strings.Join(shown, ","))
}

func (s *sender) run() {
	defer close(s.done)
	e := s.e
	b := newPacer(e.tune)
	refused := false // the last answer was unknown_proxy
	defer func() {
		// Cut off by Close's deadline: what is left is said once.
		s.mu.Lock()
		var ids []string
		for _, p := range s.queue {
			ids = append(ids, p.id)
		}
		s.queue, s.queuedB = nil, 0
		dropped := s.refusedFull
		s.refusedFull = 0
		s.mu.Unlock()
		if dropped > 0 {
			e.log.Warn("dropped dispatch results while too many were waiting for the recorder", "count", dropped)
		}
		s.outageOver()
		s.logDropped(ids, "the proxy exited before the recorder took them")
	}()
	for {
		p, ok := s.head()
		if !ok {
			return
		}
		if time.Since(p.since) >= e.tune.giveUp {
			s.dropOlder(time.Now())
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, e.tune.resultTimeout)
		a, err := e.rec.Post(ctx, "/proxy/result", p.body, 4<<10)
		cancel()
		if s.ctx.Err() != nil {
			return
		}
		// A result is worth waiting for until its own give-up time.
		until := p.since.Add(e.tune.giveUp)
		switch {
		case err == nil && a.Status == http.StatusOK:
			b.reset()
			s.pop()
			refused = false
			s.outageOver()
		case err == nil && a.Status == http.StatusNotFound:
			// unknown_proxy: register again (the register reports also wait for), then
			// resend; refused again right after registering, it waits first, or the
			// two would spin.
			if refused {
				s.pause(&b, 0, until)
			}
			refused = true
			n := e.rec.Reregister()
			wctx, cancel := context.WithDeadline(s.ctx, until)
			_ = e.rec.WaitRegistered(wctx, n)
			cancel()
			continue
		case err == nil && a.Status >= 400 && a.Status < 500 && a.Status != http.StatusRequestTimeout &&
			a.Status != http.StatusTooManyRequests && a.Status != http.StatusUnauthorized && a.Status != http.StatusForbidden:
			// The recorder says it can never take this one; resending would only repeat that.
			e.log.Error("the recorder refused a dispatch result; it is not sent again", "dispatchId", p.id, "status", a.Status, "body", clip(a.Body, 200))
			s.pop()
		default:
			e.log.Debug("posting a dispatch result failed", "dispatchId", p.id, "status", a.Status, "err", err)
			s.pause(&b, a.RetryAfter, until)
		}
	}
}

// pause waits out the next backoff step, no later than until (the head's give-up).
func (s *sender) pause(b *pacer, retryAfter time.Duration, until time.Time) {
	backoff.Sleep(s.ctx, min(b.next(retryAfter), max(time.Until(until), 0)))
}
