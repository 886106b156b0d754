// Package replay runs the recorder's replay dispatches (SPEC §4) on the upstream the
// host is already connected to. A poll loop long-polls the recorder for dispatches; a
// scheduler holds them until the upstream is ready (Gate) and runs them in arrival
// order through relay.Call, at most maxInFlight at a time; a sender posts each one's
// result. The host's path never waits on any of it: dispatches reach the upstream as
// the proxy's own requests, under the same write lock as the host's messages, and
// their answers never reach the host. See docs/replay.md.
package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/backoff"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/report"
)

// maxInFlight is how many dispatches of one proxy run on the upstream at once; the
// rest wait, in arrival order. A recorder replays a scenario a few calls at a time,
// and a server built for one host (most stdio servers handle requests one by one)
// must not find its queue filled by the replay while the host's own calls wait
// behind it.
const maxInFlight = 4

// Recorder is the recorder as the executor uses it (recorder.Remote).
type Recorder interface {
	ProxyID() string
	// Post makes one attempt; the executor's backoff is the only retry policy.
	Post(ctx context.Context, path string, body []byte, limit int64) (recorder.Answer, error)
	// Reregister has delivery register this proxy again; WaitRegistered waits for it.
	Reregister() uint64
	WaitRegistered(ctx context.Context, after uint64) error
}

// Upstream is where dispatches run (relay.Relay).
type Upstream interface {
	Call(ctx context.Context, req relay.Request) ([]byte, error)
}

// Config configures Start.
type Config struct {
	Recorder Recorder
	Upstream Upstream
	Gate     *Gate
	// HostDone is closed when the host has left (relay.Relay.HostDone): the proxy is
	// exiting, and the executor stops. Nil: only Stop stops it.
	HostDone <-chan struct{}
	Server   string // the --server name, sent with each poll
	PID      int
	Logger   *slog.Logger

	tuning tuning // zero fields take their defaults; tests shorten them
}

// tuning holds the executor's timings.
type tuning struct {
	wait           time.Duration // waitMs of a poll: how long the recorder may hold it
	slack          time.Duration // a poll's own timeout is wait+slack
	backoffBase    time.Duration // full jitter from here...
	backoffCap     time.Duration // ...doubling up to this (SPEC §5: 30 s)
	giveUp         time.Duration // a result not posted this long after its dispatch ended is dropped
	resultTimeout  time.Duration // one POST /proxy/result
	maxQueued      int           // dispatches waiting to run...
	maxQueuedBytes int           // ...and the bytes they hold
	maxResults     int           // results waiting to be posted...
	maxResultBytes int           // ...and their bytes
}

func (t tuning) withDefaults() tuning {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&t.wait, 25*time.Second)
	def(&t.slack, 5*time.Second)
	def(&t.backoffBase, 250*time.Millisecond)
	def(&t.backoffCap, 30*time.Second)
	def(&t.giveUp, time.Minute)
	def(&t.resultTimeout, 10*time.Second)
	if t.maxQueued <= 0 {
		t.maxQueued = 1024
	}
	if t.maxQueuedBytes <= 0 {
		t.maxQueuedBytes = 64 << 20
	}
	if t.maxResults <= 0 {
		t.maxResults = 1024
	}
	if t.maxResultBytes <= 0 {
		t.maxResultBytes = 64 << 20
	}
	return t
}

// maxPollAnswer bounds what one poll answer may carry.
const maxPollAnswer = 64 << 20

// Why a running dispatch's context was cancelled, for its outcome.
var (
	errRecorderCancel = errors.New("cancelled by the recorder")
	errExiting        = errors.New("the proxy is exiting")
)

// Executor polls the recorder and runs its dispatches. Start it with Start; Stop it
// when the proxy begins to exit, and Close it before the recorder connection closes.
type Executor struct {
	rec   Recorder
	up    Upstream
	gate  *Gate
	log   *slog.Logger
	tune  tuning
	pollB []byte // the poll request body, the same every time

	pollCtx   context.Context
	stopPoll  context.CancelFunc
	stopOnce  sync.Once
	closeOnce sync.Once
	stopC     chan struct{} // closed by Stop
	hostDone  <-chan struct{}
	// stopSeq is the gate's sequence number at Stop (0: not stopped), taken before
	// anything is cancelled; see exitCaused.
	stopSeq atomic.Uint64

	arrivals  chan pollAnswer
	sent      chan *dispatch // a running dispatch's request reached the upstream
	finished  chan *dispatch
	pollDone  chan struct{} // closed when the poll loop has ended
	scheduled chan struct{} // closed when the scheduler has ended
	runners   sync.WaitGroup
	results   *sender
}

// Start begins polling and returns at once.
func Start(cfg Config) *Executor {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	tune := cfg.tuning.withDefaults()
	pollCtx, stopPoll := context.WithCancel(context.Background())
	e := &Executor{
		rec:       cfg.Recorder,
		up:        cfg.Upstream,
		gate:      cfg.Gate,
		hostDone:  cfg.HostDone,
		log:       log.With("component", "replay"),
		tune:      tune,
		pollCtx:   pollCtx,
		stopPoll:  stopPoll,
		stopC:     make(chan struct{}),
		arrivals:  make(chan pollAnswer),
		sent:      make(chan *dispatch),
		finished:  make(chan *dispatch),
		pollDone:  make(chan struct{}),
		scheduled: make(chan struct{}),
	}
	e.pollB = pollBody(cfg.Recorder.ProxyID(), cfg.Server, cfg.PID, tune.wait)
	e.results = newSender(e)
	go e.poll()
	go e.schedule()
	go e.results.run()
	return e
}

func pollBody(proxyID, server string, pid int, wait time.Duration) []byte {
	b := []byte(`{"proxyId":`)
	b = jsonlex.AppendString(b, proxyID)
	b = append(b, `,"server":`...)
	b = jsonlex.AppendString(b, server)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, `,"waitMs":`...)
	b = strconv.AppendInt(b, wait.Milliseconds(), 10)
	return append(b, '}')
}

// Stop says the proxy is exiting: polling stops at once, queued dispatches are posted
// cancelled, running ones are cancelled upstream and posted cancelled — whatever the
// upstream does meanwhile (going away is then part of the exit, not upstream_lost).
// It does not wait; it is safe to call more than once and from any goroutine.
func (e *Executor) Stop() {
	e.stopOnce.Do(func() {
		e.stopSeq.Store(e.gate.seq.Add(1))
		e.stopPoll()
		close(e.stopC)
	})
}

// exitCaused reports whether the upstream being lost, or a dispatch failing to reach
// it, is part of the proxy's exit (posted cancelled) rather than the server going away
// on its own (upstream_lost). since is the gate's lostSeq when the one asking last
// looked (a dispatch: when it started). The host having left is an exit. Otherwise
// the order of the loss and Stop decides, whichever goroutine looks first: a server
// that dies on its own is recorded lost before the session ends and Stop follows,
// while a signal calls Stop before the server is stopped — so a loss not yet recorded
// when Stop has been called is the exit's.
func (e *Executor) exitCaused(since uint64) bool {
	select {
	case <-e.hostDone:
		return true
	default:
	}
	stop := e.stopSeq.Load()
	if stop == 0 {
		return false
	}
	lost := e.gate.lostSeq.Load()
	return lost <= since || lost > stop
}

// Close stops the executor, waits for every dispatch to have ended, and gives their
// results until ctx ends to reach the recorder; those that do not are given up with
// one log line. Every goroutine the executor started has ended when it returns. Call
// it after the upstream is closed, so that no dispatch can still be waiting on it.
func (e *Executor) Close(ctx context.Context) {
	e.closeOnce.Do(func() {
		e.Stop()
		<-e.pollDone
		<-e.scheduled
		e.runners.Wait()
		e.results.close(ctx)
	})
}

// schedule owns the dispatches: it queues what arrives, starts what may run, and ends
// what is cancelled, timed out while waiting, or stranded by a lost upstream. It holds
// a timer only while a queued dispatch has a deadline.
func (e *Executor) schedule() {
	defer close(e.scheduled)
	var (
		queue    []*dispatch
		queuedB  int
		waiting  = map[string]*dispatch{} // queued, by id
		running  = map[string]*dispatch{}
		ready    = e.gate.Ready()
		isReady  bool
		lost     = e.gate.lost()
		seenLost uint64 // the gate's lostSeq when a loss was last handled here
		stopC    = e.stopC
		hostDone = e.hostDone
		stopping bool
		pollDone = e.pollDone
		timer    *time.Timer
		overflow bool // said that the queue is full
		// sending is the dispatch last started, until its request is on the wire:
		// the next starts only then, so the upstream gets them in arrival order.
		sending *dispatch
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	take := func(i int) *dispatch {
		d := queue[i]
		queue = append(queue[:i], queue[i+1:]...)
		queuedB -= d.size
		delete(waiting, d.id)
		return d
	}
	drain := func(o outcome) {
		for len(queue) > 0 {
			e.settle(take(0), o)
		}
	}
	for {
		if isReady && !stopping && sending == nil && len(running) < maxInFlight && len(queue) > 0 {
			d := take(0)
			running[d.id] = d
			sending = d
			e.launch(d)
		}
		// The poll loop may still hand over what it just received; the scheduler ends
		// only after it, so no dispatch that reached the proxy goes unposted.
		if stopping && pollDone == nil && len(queue) == 0 && len(running) == 0 {
			return
		}
		var timerC <-chan time.Time
		if next := earliest(queue); !next.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(next))
			} else {
				timer.Reset(time.Until(next))
			}
			timerC = timer.C
		} else if timer != nil {
			timer.Stop() // nothing queued has a deadline: no wake-up for nothing
		}
		select {
		case a := <-e.arrivals:
			if a.bad > 0 {
				e.log.Warn("the recorder sent dispatches without a dispatchId; they are not run", "count", a.bad)
			}
			if a.excess > 0 {
				e.log.Warn("the recorder handed out more dispatches in one poll answer than bir-proxy can hold results for; the rest are not run and get no result", "taken", len(a.dispatches), "dropped", a.excess)
			}
			for _, d := range a.dispatches {
				switch {
				case waiting[d.id] != nil || running[d.id] != nil:
					e.log.Debug("dispatch handed out again while it is still here; the repeat is ignored", "dispatchId", d.id)
				case d.refused != "":
					// Not a dispatch SPEC §4 allows: the server is never contacted.
					e.log.Warn("refused a dispatch the recorder sent", "dispatchId", d.id, "why", d.refused)
					e.settle(d, outcome{name: report.OutcomeRPCError, err: invalidDispatch(d.refused)})
				case stopping:
					e.settle(d, outcome{name: report.OutcomeCancelled, err: proxyError("the proxy is exiting")})
				case len(queue) >= e.tune.maxQueued || queuedB+d.size > e.tune.maxQueuedBytes:
					if !overflow {
						overflow = true
						e.log.Warn("too many dispatches waiting for the server; refusing new ones until some have run", "waiting", len(queue))
					}
					// SPEC §4: rpc_error saying the proxy is busy, and not queued.
					e.settle(d, outcome{name: report.OutcomeRPCError, err: proxyError(fmt.Sprintf("bir-proxy is busy: %d dispatches already waiting; this one was not queued", len(queue)))})
				default:
					overflow = false
					queue = append(queue, d)
					queuedB += d.size
					waiting[d.id] = d
				}
			}
			for _, id := range a.cancels {
				if d := running[id]; d != nil {
					d.cancel(errRecorderCancel) // the runner tells the upstream and posts it
					continue
				}
				if d := waiting[id]; d != nil {
					// Never sent: nothing to tell the upstream.
					e.settle(take(indexOf(queue, d)), outcome{name: report.OutcomeCancelled, err: proxyError("cancelled by the recorder before it was sent")})
					continue
				}
				e.log.Debug("cancel for a dispatch that is not here (ended, or never arrived)", "dispatchId", id)
			}
		case d := <-e.sent:
			if d == sending {
				sending = nil
			}
		case d := <-e.finished:
			delete(running, d.id)
			if d == sending {
				sending = nil // it ended without being sent
			}
		case <-ready:
			isReady, ready = true, nil
		case <-lost:
			lost = e.gate.lost()
			seenLost = e.gate.lostSeq.Load()
			// Running ones hear it from relay.Call; queued ones were meant for a server
			// that is gone.
			drain(outcome{name: report.OutcomeUpstreamLost, err: proxyError("the server went away before the dispatch was sent")})
		case <-timerC:
			now := time.Now()
			for i := 0; i < len(queue); {
				if d := queue[i]; !d.deadline.IsZero() && !d.deadline.After(now) {
					e.settle(take(i), outcome{name: report.OutcomeTimeout, err: proxyError(fmt.Sprintf("timed out after %d ms before it could be sent", d.timeout.Milliseconds()))})
					continue
				}
				i++
			}
		case <-hostDone:
			hostDone = nil
			e.Stop() // the host leaving is the proxy exiting: stopC follows
		case <-stopC:
			stopC, stopping = nil, true
			if e.exitCaused(seenLost) {
				drain(outcome{name: report.OutcomeCancelled, err: proxyError("the proxy is exiting")})
			} else {
				// The server went away on its own first (its loss may still be on its
				// way to this loop).
				drain(outcome{name: report.OutcomeUpstreamLost, err: proxyError("the server went away before the dispatch was sent")})
			}
			for _, d := range running {
				d.cancel(errExiting)
			}
		case <-pollDone:
			pollDone = nil
		}
	}
}

func earliest(queue []*dispatch) time.Time {
	var t time.Time
	for _, d := range queue {
		if !d.deadline.IsZero() && (t.IsZero() || d.deadline.Before(t)) {
			t = d.deadline
		}
	}
	return t
}

func indexOf(queue []*dispatch, d *dispatch) int {
	for i, q := range queue {
		if q == d {
			return i
		}
	}
	return -1
}

// launch runs d in a goroutine of its own; its end comes back on e.finished.
func (e *Executor) launch(d *dispatch) {
	ctx, cancel := context.WithCancelCause(context.Background())
	d.cancel = cancel
	d.lostSince = e.gate.lostSeq.Load()
	stopDeadline := func() bool { return false }
	if !d.deadline.IsZero() {
		// A deadline, not a cancel: relay.Call then tells interception it timed out.
		var c context.CancelFunc
		ctx, c = context.WithDeadline(ctx, d.deadline)
		stopDeadline = func() bool { c(); return true }
	}
	e.runners.Add(1)
	go func() {
		defer e.runners.Done()
		o := e.execute(ctx, d)
		stopDeadline()
		cancel(nil)
		e.settle(d, o)
		e.finished <- d // the scheduler runs until every runner has reported
	}()
}

// execute sends d upstream as a tools/call of the proxy's own and reads how it ended.
func (e *Executor) execute(ctx context.Context, d *dispatch) outcome {
	if ctx.Err() != nil {
		// Its deadline passed as it was started: sending it now would only be
		// followed by its cancel.
		return e.gaveUp(ctx.Err(), d, 0)
	}
	start := time.Now()
	resp, err := e.up.Call(ctx, relay.Request{
		Method: "tools/call", Params: callParams(d, e.gate.Meta()), Origin: d.id,
		Sent: func() { e.sent <- d }, // the scheduler takes it while d runs
	})
	if err != nil {
		return e.gaveUp(err, d, time.Since(start))
	}
	o := classify(resp)
	if o.name == report.OutcomeOK || o.name == report.OutcomeToolError {
		if t, ok, bad := taskHandle(o.result); ok {
			if bad != "" {
				o = outcome{name: report.OutcomeRPCError, err: proxyError("the server answered with a task handle that " + bad)}
			} else {
				o = e.follow(ctx, d, &t)
			}
		}
	}
	o.duration = time.Since(start)
	return o
}

// follow follows the task a dispatch was answered with (SPEC §4) until it ends, the
// dispatch's timeoutMs passes, the recorder cancels it or the proxy exits: tasks/get
// at the task's poll interval, then (2025-11-25) tasks/result, all under the proxy's
// own ids. A task it stops following before it ended gets tasks/cancel. The host
// never sees any of it: the answers come back on the proxy's own ids.
func (e *Executor) follow(ctx context.Context, d *dispatch, t *task) outcome {
	e.log.Debug("dispatch answered with a task; following it", "dispatchId", d.id, "taskId", clip(t.ID, 200))
	timer := time.NewTimer(t.Poll)
	defer timer.Stop()
	for polled := false; !polled || !terminalStatus(t.Status); polled = true {
		// input_required is waited out like working: the proxy has no one to answer
		// the task's questions (docs/replay.md), so only its deadline ends it.
		timer.Reset(t.Poll)
		select {
		case <-ctx.Done():
			return e.leaveTask(ctx, d, t, fmt.Errorf("%w: %w", ctx.Err(), context.Cause(ctx)))
		case <-timer.C:
		}
		resp, err := e.up.Call(ctx, relay.Request{Method: "tasks/get", Params: taskParams(t, e.gate.Meta()), Origin: d.id})
		if err != nil {
			return e.leaveTask(ctx, d, t, err)
		}
		f, ok := jsonlex.TopFields(resp)
		switch {
		case !ok:
			return e.dropTask(ctx, d, t, proxyError("the server's answer to tasks/get could not be read"))
		case f.Error != nil:
			// The server no longer knows the task, or refuses to say: its error is
			// the dispatch's end.
			return e.dropTask(ctx, d, t, f.Error)
		case f.Result == nil:
			return e.dropTask(ctx, d, t, proxyError("the server answered tasks/get with neither result nor error"))
		}
		if bad := t.Read(f.Result, true); bad != "" {
			return e.dropTask(ctx, d, t, proxyError("the server's answer to tasks/get "+bad))
		}
	}
	if t.Status == taskCancelled {
		return outcome{name: report.OutcomeCancelled, err: proxyError("the server cancelled the task")}
	}
	if t.Era == taskExt {
		if t.Status == taskFailed {
			return outcome{name: report.OutcomeRPCError, err: t.Err}
		}
		return classifyResult(t.Result)
	}
	// 2025-11-25: the result is fetched, now that the task has ended.
	resp, err := e.up.Call(ctx, relay.Request{Method: "tasks/result", Params: taskParams(t, e.gate.Meta()), Origin: d.id})
	if err != nil {
		return e.leaveTask(ctx, d, t, err)
	}
	return classify(resp) // what the tools/call would have answered; never followed again
}

// taskCancelWait bounds the wait for the answer to a tasks/cancel (its answer is not
// used; the wait only keeps the request from being abandoned at once).
const taskCancelWait = 2 * time.Second

// cancelTask sends tasks/cancel for t and waits for its answer at most
// taskCancelWait, whatever ctx says: the dispatch's own context has ended by then.
func (e *Executor) cancelTask(ctx context.Context, d *dispatch, t *task) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), taskCancelWait)
	defer cancel()
	if _, err := e.up.Call(cctx, relay.Request{Method: "tasks/cancel", Params: taskParams(t, e.gate.Meta()), Origin: d.id}); err != nil {
		e.log.Debug("tasks/cancel of a dispatch's task got no answer", "dispatchId", d.id, "err", err)
	}
}

// leaveTask ends the following of t on err, an error of relay.Call or of ctx: a
// deadline, a recorder's cancel or the exit get tasks/cancel first; a server gone
// gets nothing more.
func (e *Executor) leaveTask(ctx context.Context, d *dispatch, t *task, err error) outcome {
	if ctx.Err() == nil {
		return e.gaveUp(err, d, 0)
	}
	e.cancelTask(ctx, d, t)
	o := e.gaveUp(err, d, 0)
	if o.name == report.OutcomeTimeout {
		o.err = proxyError(fmt.Sprintf("the task %s did not end within %d ms (last status %q); tasks/cancel was sent", clip(t.ID, 200), d.timeout.Milliseconds(), clip([]byte(t.Status), 64)))
	}
	return o
}

// dropTask ends the following of t on an answer the proxy cannot follow: rpcErr is
// posted (rpc_error), and the task, which may still be running, gets tasks/cancel.
func (e *Executor) dropTask(ctx context.Context, d *dispatch, t *task, rpcErr []byte) outcome {
	e.log.Warn("a dispatch's task cannot be followed; it is cancelled and the dispatch posted rpc_error", "dispatchId", d.id, "taskId", clip(t.ID, 200), "error", clip(rpcErr, 200))
	e.cancelTask(ctx, d, t)
	return outcome{name: report.OutcomeRPCError, err: rpcErr}
}

// gaveUp is the outcome of a dispatch that got no answer: err says why.
func (e *Executor) gaveUp(err error, d *dispatch, took time.Duration) outcome {
	o := outcome{duration: took}
	switch {
	case errors.Is(err, relay.ErrMalformed):
		// Never sent: parsePoll lets no such dispatch through, and this is the
		// relay's own check behind it.
		o.name, o.err = report.OutcomeRPCError, invalidDispatch(err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		o.name, o.err = report.OutcomeTimeout, proxyError(fmt.Sprintf("no answer within %d ms", d.timeout.Milliseconds()))
	case errors.Is(err, errRecorderCancel):
		o.name, o.err = report.OutcomeCancelled, proxyError("cancelled by the recorder")
	case errors.Is(err, errExiting) || e.exitCaused(d.lostSince):
		// The server going away as the proxy stops it is part of the exit.
		o.name, o.err = report.OutcomeCancelled, proxyError("the proxy is exiting")
	default:
		// The server went away, or could not take the request.
		o.name, o.err = report.OutcomeUpstreamLost, proxyError(err.Error())
	}
	return o
}

// settle hands d's result to the sender; it never waits.
func (e *Executor) settle(d *dispatch, o outcome) {
	e.log.Debug("dispatch ended", "dispatchId", d.id, "tool", d.tool, "outcome", o.name)
	e.results.add(d.id, resultBody(e.rec.ProxyID(), d, o))
}

// poll is the poll loop (SPEC §5): one long poll at a time, held by the recorder up
// to waitMs. Idle with a healthy recorder it is one request per waitMs and nothing in
// between: no timer but the request's own timeout, which does not fire.
func (e *Executor) poll() {
	defer close(e.pollDone)
	ctx := e.pollCtx
	b := newPacer(e.tune)
	// A poll before the first register has succeeded would only be refused.
	if !e.register(ctx, 0) {
		return
	}
	fresh := true // registered since the last poll answer
	outage := false
	for {
		reqCtx, cancel := context.WithTimeout(ctx, e.tune.wait+e.tune.slack)
		sent := time.Now()
		a, err := e.rec.Post(reqCtx, "/proxy/poll", e.pollB, maxPollAnswer)
		cancel()
		if ctx.Err() != nil {
			// Stopped. A cut request brought nothing; but an answer read whole before
			// the cut holds dispatches the recorder now counts as handed to this
			// proxy: they go to the scheduler, which posts them cancelled, rather
			// than never being answered.
			if err == nil && a.Status == 200 {
				if ans, ok := parsePoll(a.Body, time.Now(), e.pollLimit()); ok && len(ans.dispatches)+len(ans.cancels)+ans.bad+ans.excess > 0 {
					e.arrivals <- ans
				}
			}
			return
		}
		switch {
		case err != nil:
			// Refused, cut off, or no answer in time. Back off, then register again
			// before the next poll: a recorder that comes back may be a new process
			// that knows no proxy. Delivery sends that register (under its own
			// backoff), so an outage is probed by one loop, not two.
			if !outage {
				outage = true
				e.log.Warn("recorder not reachable for polls; dispatches wait until it is back", "err", err)
			} else {
				e.log.Debug("poll failed", "err", err)
			}
			if !backoff.Sleep(ctx, b.next(0)) || !e.register(ctx, e.rec.Reregister()) {
				return
			}
			fresh = true
			continue
		case a.Status == 404:
			// unknown_proxy: the recorder forgot us. Register again, then poll; a
			// refusal right after registering waits first, or the two would spin.
			e.log.Debug("poll answered unknown_proxy; registering again")
			if fresh && !backoff.Sleep(ctx, b.next(0)) {
				return
			}
			if !e.register(ctx, e.rec.Reregister()) {
				return
			}
			fresh = true
			continue
		case a.Status != 200:
			if !outage {
				outage = true
				e.log.Warn("the recorder is failing polls; dispatches wait until it answers", "status", a.Status, "body", string(a.Body))
			}
			if !backoff.Sleep(ctx, b.next(a.RetryAfter)) {
				return
			}
			continue
		}
		ans, ok := parsePoll(a.Body, time.Now(), e.pollLimit())
		if !ok {
			e.log.Warn("the recorder's poll answer is not a JSON object; ignored", "body", clip(a.Body, 200))
			if !backoff.Sleep(ctx, b.next(0)) {
				return
			}
			continue
		}
		fresh = false
		if outage {
			outage = false
			e.log.Info("the recorder is answering polls again")
		}
		if len(ans.dispatches)+len(ans.cancels)+ans.bad+ans.excess == 0 {
			// Nothing, and long before waitMs: a recorder that does not hold polls
			// would have this loop spin, so it is paced as if the poll had failed.
			if time.Since(sent) < e.tune.wait/10 {
				if !backoff.Sleep(ctx, b.next(0)) {
					return
				}
				continue
			}
			b.reset()
			continue
		}
		e.arrivals <- ans // the scheduler takes arrivals until this loop has ended
		if e.results.full.Load() {
			// The recorder is not taking results: nothing more it hands out could be
			// answered, so the next poll waits, as after a failure (a flood of
			// dispatches would otherwise be parsed and dropped as fast as it comes).
			if !backoff.Sleep(ctx, b.next(0)) {
				return
			}
			continue
		}
		b.reset()
	}
}

// pollLimit is how many dispatches of one poll answer are read: as many as the queue
// can take and as many again to be refused busy, each with a result. A 64 MiB answer
// can hold millions of tiny ones; past this they are not run and get no result (one
// warning), for no queue of results could hold an answer for each.
func (e *Executor) pollLimit() int { return e.tune.maxQueued + e.tune.maxResults }

// register waits for a register of this proxy newer than after to have succeeded,
// reporting false when ctx ended (or the recorder connection closed) first.
func (e *Executor) register(ctx context.Context, after uint64) bool {
	if err := e.rec.WaitRegistered(ctx, after); err != nil {
		if ctx.Err() == nil {
			e.log.Debug("stopped polling", "err", err)
		}
		return false
	}
	return true
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
