package recorder

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/backoff"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/report"
)

// A lane is the delivery state of one proxyId: this run's, or one adopted from an
// earlier run's spool file.
type lane struct {
	proxyID string
	file    *spoolFile // nil: its entries carry their bytes
	adopted bool

	queued   []entry // waiting to be posted, by seq
	inflight int
	memBytes int64 // what the reports of a lane without a file hold in memory

	// known: the recorder has accepted a register of this proxyId since it last
	// forgot it. regDue: a register is owed (never sent, forgotten, or new facts).
	known       bool
	regDue      bool
	registering bool
	regSent     int // factsVersion of the last register sent or succeeded
	gen         int // counts successful registers
	refusals    int // unknown_proxy answers in a row right after registering
	// batch: the recorder's last register answer for this proxyId said it takes arrays
	// of reports (SPEC §5). A recorder that did not say so gets one report per POST.
	batch bool
}

type jobKind int

const (
	jobRegister jobKind = iota
	jobStep
	jobExit // tells a waiting request goroutine to end
)

func (k jobKind) path() string {
	if k == jobStep {
		return "/proxy/step"
	}
	return "/proxy/register"
}

type job struct {
	kind         jobKind
	lane         *lane
	entries      []entry // the reports of a step POST: one, or a batch
	batch        bool    // post entries as a JSON array
	group        bool    // post entries one per request, pipelined on one connection
	gen          int     // lane.gen when the step was sent
	factsVersion int
	payload      []byte // the register body
	ep           *Endpoint
	sent         uint64 // its place in the order requests were started (dispatcher.started)
}

// readError is a report that could not be read back from its spool file.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

type result struct {
	job
	took time.Duration // from the request's start to its answer
	response
	// group holds a group job's answers, one per entry (response is then unused).
	group   []response
	stopped bool // cancelled by Close, not an answer from the recorder
}

// slowAnswer is how long an accepted step takes before delivery counts as bound by the
// recorder's latency, and the window grows.
const slowAnswer = 20 * time.Millisecond

// Batches, as SPEC §5 bounds them.
const (
	maxBatch      = 256
	maxBatchBytes = 1 << 20
)

// maxGroup bounds the one-report POSTs to a plain recorder pipelined on one
// connection. They are answered one after another, so a group is only made while the
// recorder answers each within groupAnswer: a recorder taking 3 s per answer would
// hold a group of 16 for 48 s, where 16 connections take 3.
const (
	maxGroup    = 16
	groupAnswer = 5 * time.Millisecond
)

// keepInMemory is how many waiting reports of this run may keep their bytes in memory;
// past it, those already in the spool file are read back from there when sent.
const keepInMemory = 256

// dispatcher owns delivery: one goroutine (run) decides what to send, and each
// request runs in its own goroutine, at most window at once. The window starts at
// maxInFlight and grows by one with every report the recorder accepts slowly while
// reports are waiting, up to maxWindow: a recorder that answers slowly is not failing, and
// with a fixed window its latency alone would set the throughput (4 in flight at 3 s
// each is 1.3 reports a second, whatever the load). A failure shrinks it to one.
// It holds no timer and no runnable goroutine while there is nothing to send, so an
// idle proxy costs no CPU: a request's goroutine takes the next request when one is
// ready (a new goroutine grew its stack through net/http and the answer's parsing for
// every report, 7% of the proxy's CPU with a plain recorder), and up to maxInFlight of
// them wait parked for the next burst.
type dispatcher struct {
	log     *slog.Logger
	tune    tuning
	client  *client
	regBase registration

	mu           sync.Mutex
	inbox        []entry // reports of this run, not yet taken by run
	onDisk       []entry // where reports of this run now are in the spool file
	adoptedIn    []adoption
	facts        report.ServerFacts
	factsVersion int
	// transport is the upstream's transport as settled ("" until then: regBase's).
	transport string
	ep        *Endpoint
	// registered counts successful registers of this run's proxyId; regChanged is
	// closed (and replaced) at each. forget asks run to register it again.
	registered uint64
	regChanged chan struct{}
	forget     bool

	wake     chan struct{}
	results  chan result
	jobs     chan job      // to a request goroutine waiting for its next request
	draining chan struct{} // Close began: finish what can be finished quickly
	done     chan struct{} // run has ended and every request with it

	reqCtx     context.Context
	cancelReqs context.CancelFunc

	// Owned by run.
	// perAnswer is how long the recorder took per report in its last accepted step
	// answer (slowAnswer until one came: a recorder is not taken to be quick unheard).
	perAnswer time.Duration
	grouping  bool     // handling a group's answers: done1 gathers into groupDone
	groupDone []entry  // the reports of a group the recorder took, marked done together
	idle      int      // request goroutines that have answered and wait on jobs
	seqs      []uint64 // scratch: the seqs of one answer's reports
	lanes     []*lane
	current   *lane
	next      int // round robin over lanes
	inflight  int
	window    int // requests allowed at once: 1 after a failure, then maxInFlight, growing
	paused    bool
	timer     *time.Timer
	timerC    <-chan time.Time
	failures  int
	refresh   bool // read the discovery file again before the next attempt
	outage    bool // said on stderr that the recorder is unreachable or failing
	refused   bool // said on stderr that it refused the token
	// started counts the requests started; okStarted is what it was when a request
	// was last taken. A refusal of a request already in flight then is stale: the
	// recorder may have read it before the token was fixed, in any order with the
	// one it took. Two requests in flight as the token was fixed said the refusal
	// twice: one taken, then the other's 401 read as the token refused again.
	started, okStarted uint64

	spoolMax    int64        // bound of the spool files of all lanes together
	roomReqs    chan roomReq // the commit loop asks for room before a spool write
	droppedFile string       // where the count of dropped reports is kept, for status
	dropped     int64        // reports this run dropped to keep the bound
	// misrouted: said on stderr that it redirects or refuses requests for a reason
	// that is not the report's
	misrouted bool
}

type registration struct {
	ProxyID         string          `json:"proxyId"`
	Server          string          `json:"server"`
	PID             int             `json:"pid"`
	Version         string          `json:"version"`
	Upstream        Upstream        `json:"upstream"`
	ServerInfo      json.RawMessage `json:"serverInfo,omitempty"`
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	Tools           []string        `json:"tools,omitempty"`
}

func newDispatcher(cfg Config, proxyID string, own *spoolFile, adopted []adoption, log *slog.Logger) *dispatcher {
	tune := cfg.tuning.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	d := &dispatcher{
		log:    log,
		tune:   tune,
		client: newClient(tune),
		regBase: registration{
			Server: cfg.Server, PID: cfg.PID, Version: cfg.Version, Upstream: redactedUpstream(cfg.Upstream),
		},
		ep:         cfg.Endpoint,
		wake:       make(chan struct{}, 1),
		results:    make(chan result, tune.maxWindow),
		jobs:       make(chan job),
		draining:   make(chan struct{}),
		done:       make(chan struct{}),
		reqCtx:     ctx,
		cancelReqs: cancel,
		window:     tune.maxInFlight,
		perAnswer:  slowAnswer,
		spoolMax:   cfg.SpoolMax,
		regChanged: make(chan struct{}),
		roomReqs:   make(chan roomReq),
	}
	if d.spoolMax == 0 {
		d.spoolMax = DefaultSpoolMax
	}
	d.spoolMax = max(d.spoolMax, MinSpoolMax)
	d.current = &lane{proxyID: proxyID, file: own, regDue: true}
	d.lanes = append(d.lanes, d.current)
	for _, a := range adopted {
		d.lanes = append(d.lanes, &lane{proxyID: a.proxyID, file: a.file, adopted: true, queued: a.entries, regDue: true})
	}
	return d
}

// redactedUpstream is what a register says of the upstream. Servers are routinely given
// their keys on the command line (an API key, a DSN with its password, --token=…), and
// those reached the recorder as they were. The environment is not part of Upstream and
// is never sent.
func redactedUpstream(u Upstream) Upstream {
	u.Command = redact.CommandLine(u.Command)
	if u.URL != "" {
		u.URL = redact.Text(u.URL)
	}
	return u
}

// add hands over reports of this run, with their bytes.
func (d *dispatcher) add(entries []entry) {
	d.mu.Lock()
	d.inbox = append(d.inbox, entries...)
	d.mu.Unlock()
	d.poke()
}

// adopt takes over the reports of earlier runs.
func (d *dispatcher) adopt(as []adoption) {
	if len(as) == 0 {
		return
	}
	d.mu.Lock()
	d.adoptedIn = append(d.adoptedIn, as...)
	d.mu.Unlock()
	d.poke()
}

// spooled says where reports handed over by add now are in the spool file, so those
// still waiting can drop their bytes (a long outage would otherwise hold every report of
// the session in memory).
func (d *dispatcher) spooled(entries []entry) {
	d.mu.Lock()
	d.onDisk = append(d.onDisk, entries...)
	d.mu.Unlock()
}

// learn merges new facts and has this run registered again with them.
func (d *dispatcher) learn(f report.ServerFacts) {
	d.mu.Lock()
	if len(f.ServerInfo) > 0 {
		if json.Valid(f.ServerInfo) {
			d.facts.ServerInfo = slices.Clone(f.ServerInfo)
		} else {
			d.log.Debug("serverInfo is not valid JSON; not sent")
		}
	}
	if f.ProtocolVersion != "" {
		d.facts.ProtocolVersion = f.ProtocolVersion
	}
	if f.Tools != nil {
		d.facts.Tools = slices.Clone(f.Tools)
	}
	d.factsVersion++
	d.mu.Unlock()
	d.poke()
}

// settleTransport has this run registered again when the upstream's transport turns
// out to be another than the one registered (--transport auto falling back to sse).
func (d *dispatcher) settleTransport(t string) {
	d.mu.Lock()
	said := d.transport
	if said == "" {
		said = d.regBase.Upstream.Transport
	}
	if t == "" || t == said {
		d.mu.Unlock()
		return
	}
	d.transport = t
	d.factsVersion++
	d.mu.Unlock()
	d.poke()
}

func (d *dispatcher) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatcher) endpoint() *Endpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ep
}

func (d *dispatcher) run() {
	defer close(d.done)
	defer close(d.jobs) // every request has answered: the goroutines waiting end
	draining, stopped := d.draining, d.reqCtx.Done()
	isDraining, isStopped := false, false
	for {
		d.takeInbox()
		if !isStopped {
			d.pump()
		}
		for ; d.idle > d.tune.maxInFlight; d.idle-- {
			d.jobs <- job{kind: jobExit} // more waiting than a burst starts with
		}
		if d.inflight == 0 && (isStopped || isDraining && (d.paused || !d.hasWork())) {
			if d.timer != nil {
				d.timer.Stop()
			}
			return
		}
		select {
		case <-d.wake:
		case res := <-d.results:
			d.idle++ // its goroutine now waits on jobs
			d.inflight--
			res.lane.inflight--
			if res.group != nil {
				d.handleGroup(res)
			} else {
				d.handle(res)
			}
		case req := <-d.roomReqs:
			d.takeInbox() // the reports about to be written are queued
			d.bound(req.n)
			close(req.done)
		case <-d.timerC:
			d.timerC = nil
			d.resume()
		case <-draining:
			draining, isDraining = nil, true
		case <-stopped:
			stopped, isStopped = nil, true
		}
	}
}

func (d *dispatcher) takeInbox() {
	d.mu.Lock()
	in, onDisk, adopted := d.inbox, d.onDisk, d.adoptedIn
	d.inbox, d.onDisk, d.adoptedIn = nil, nil, nil
	version := d.factsVersion
	d.mu.Unlock()
	for _, a := range adopted {
		d.lanes = append(d.lanes, &lane{proxyID: a.proxyID, file: a.file, adopted: true, queued: a.entries, regDue: true})
	}
	d.mu.Lock()
	forget := d.forget
	d.forget = false
	d.mu.Unlock()
	if forget {
		// The poll loop heard unknown_proxy, or found the recorder again after it was
		// unreachable: it may be a new process that knows no proxy.
		d.current.known, d.current.regDue = false, true
	}
	d.current.queued = append(d.current.queued, in...)
	if d.current.file == nil {
		for _, e := range in {
			d.current.memBytes += int64(len(e.body) + 1)
		}
	}
	if len(onDisk) > 0 || len(adopted) > 0 || d.current.file == nil && len(in) > 0 {
		d.bound(0)
	}
	if q := d.current.queued; len(q) > keepInMemory {
		for _, f := range onDisk { // queued is ordered by seq
			if i, ok := slices.BinarySearchFunc(q, f.seq, func(e entry, seq uint64) int { return cmp.Compare(e.seq, seq) }); ok && q[i].body != nil {
				q[i] = f
			}
		}
	}
	if version != d.current.regSent && !d.current.registering {
		d.current.regDue = true
	}
}

func (d *dispatcher) hasWork() bool {
	for _, l := range d.lanes {
		if len(l.queued) > 0 {
			return true
		}
	}
	return false
}

// pump starts requests while the window allows: a register first where one is owed,
// then reports, taking lanes in turn so adopted backlogs and the live session share.
func (d *dispatcher) pump() {
	if d.paused {
		return
	}
	for d.inflight < d.window {
		j, ok := d.nextJob()
		if !ok {
			return
		}
		d.inflight++
		j.lane.inflight++
		d.started++
		j.sent = d.started
		if d.idle > 0 {
			d.idle--
			d.jobs <- j // taken at once: that goroutine is on its way to the receive
		} else {
			go d.worker(j)
		}
	}
}

// worker runs requests, one after another, until told to end.
func (d *dispatcher) worker(j job) {
	for {
		d.results <- d.do(j)
		var ok bool
		if j, ok = <-d.jobs; !ok || j.kind == jobExit {
			return
		}
	}
}

func (d *dispatcher) nextJob() (job, bool) {
	ep := d.endpoint()
	for i := range d.lanes {
		l := d.lanes[(d.next+i)%len(d.lanes)]
		if l.regDue && !l.registering {
			d.next = (d.next + i + 1) % len(d.lanes)
			return d.registerJob(l, ep), true
		}
	}
	for i := range d.lanes {
		l := d.lanes[(d.next+i)%len(d.lanes)]
		if l.known && len(l.queued) > 0 {
			n, group := 1, false
			switch {
			case l.batch:
				n = batchLen(l.queued)
				if n == len(l.queued) && l.inflight > 0 {
					// Not a full batch, and one of this lane's is on its way: these go
					// when it is answered, with what came meanwhile. Under a pipelined
					// host batches were ~75 reports where they can be 256, and the
					// requests cost the recorder and the proxy more than the reports;
					// a sequential host's next batch is due before the last is answered
					// anyway. (A timer that held batches to fill them cost the
					// sequential host's p99 instead.)
					continue
				}
			case len(l.queued) > 1 && d.perAnswer < groupAnswer && d.window <= d.tune.maxInFlight && d.client.pipelines(ep):
				n = min(len(l.queued), maxGroup)
				group = n > 1
			}
			d.next = (d.next + i + 1) % len(d.lanes)
			// A copy: requeue inserts into l.queued, which must not write over a
			// batch still being posted.
			es := slices.Clone(l.queued[:n])
			l.queued = l.queued[n:]
			return job{kind: jobStep, lane: l, entries: es, batch: l.batch, group: group, gen: l.gen, ep: ep}, true
		}
	}
	return job{}, false
}

// batchLen is how many of the first queued reports fit one batch: at most maxBatch and
// maxBatchBytes (with the brackets and commas), and always at least one.
func batchLen(q []entry) int {
	size := 1
	for i, e := range q {
		n := e.n
		if e.body != nil {
			n = len(e.body)
		}
		size += n + 1
		if i == maxBatch || i > 0 && size > maxBatchBytes {
			return i
		}
	}
	return len(q)
}

func (d *dispatcher) registerJob(l *lane, ep *Endpoint) job {
	reg := d.regBase
	reg.ProxyID = l.proxyID
	version := 0
	if l == d.current {
		d.mu.Lock()
		reg.ServerInfo, reg.ProtocolVersion, reg.Tools = d.facts.ServerInfo, d.facts.ProtocolVersion, d.facts.Tools
		if d.transport != "" {
			reg.Upstream.Transport = d.transport
		}
		version = d.factsVersion
		d.mu.Unlock()
	}
	body, err := json.Marshal(reg)
	if err != nil {
		// Only the raw serverInfo could fail, and learn checked it.
		reg.ServerInfo = nil
		body, _ = json.Marshal(reg)
	}
	l.registering, l.regDue = true, false
	return job{kind: jobRegister, lane: l, factsVersion: version, payload: body, ep: ep}
}

// do runs one request, in its own goroutine.
func (d *dispatcher) do(j job) result {
	if j.group {
		return d.doGroup(j)
	}
	ctx := d.reqCtx // the client bounds each request by tune.requestTimeout
	pieces := [][]byte{j.payload}
	if j.kind == jobStep {
		var err error
		if pieces, err = j.stepBody(); err != nil {
			return result{job: j, response: response{err: &readError{err}}}
		}
	}
	start := time.Now()
	resp := d.client.postPieces(ctx, j.ep, j.kind.path(), pieces)
	return result{job: j, took: time.Since(start), response: resp, stopped: resp.err != nil && d.reqCtx.Err() != nil}
}

// doGroup posts a group's reports, one per request, pipelined on one connection.
func (d *dispatcher) doGroup(j job) result {
	bodies := make([][]byte, 0, len(j.entries))
	var readErr error
	for _, e := range j.entries {
		b := e.body
		if b == nil {
			var err error
			if b, err = j.lane.file.read(e); err != nil {
				readErr = err // this one is lost; those after it are sent again
				break
			}
		}
		bodies = append(bodies, b)
	}
	start := time.Now()
	var group []response
	if len(bodies) > 0 {
		group = d.client.postGroup(d.reqCtx, j.ep, j.kind.path(), bodies)
	}
	if readErr != nil {
		group = append(group, response{err: &readError{readErr}})
	}
	for len(group) < len(j.entries) {
		group = append(group, response{err: errUnanswered})
	}
	return result{job: j, took: time.Since(start), group: group}
}

// handleGroup acts on each answer of a group as on the answer to a POST of its own,
// and marks the reports the recorder took done in one write. A report the recorder
// did not get to goes back in the queue, and is no failure of the recorder's.
func (d *dispatcher) handleGroup(res result) {
	answered := 0
	for _, r := range res.group {
		if !errors.Is(r.err, errUnanswered) {
			answered++
		}
	}
	d.grouping = true
	for i, r := range res.group {
		sub := res
		sub.group = nil
		sub.entries = res.entries[i : i+1 : i+1]
		sub.response = r
		sub.took = res.took / time.Duration(max(answered, 1)) // answered one after another
		sub.stopped = r.err != nil && d.reqCtx.Err() != nil
		if errors.Is(r.err, errUnanswered) {
			d.requeue(sub)
			continue
		}
		d.handle(sub)
	}
	d.grouping = false
	if len(d.groupDone) > 0 {
		done := res
		done.group, done.entries = nil, d.groupDone
		d.done1(done)
		clear(d.groupDone)
		d.groupDone = d.groupDone[:0]
	}
}

// stepBody is what a step POST carries, in pieces: the one report, or the batch as a
// JSON array of the reports' own bytes (copied into a body first, a batch cost the
// proxy 1 MiB of allocation per 1 MiB posted).
func (j job) stepBody() ([][]byte, error) {
	report := func(e entry) ([]byte, error) {
		if e.body != nil {
			return e.body, nil
		}
		return j.lane.file.read(e)
	}
	if !j.batch {
		b, err := report(j.entries[0])
		return [][]byte{b}, err
	}
	pieces := make([][]byte, 0, 2*len(j.entries)+1)
	for i, e := range j.entries {
		b, err := report(e)
		if err != nil {
			return nil, err
		}
		sep := batchComma
		if i == 0 {
			sep = batchOpen
		}
		pieces = append(pieces, sep, b)
	}
	return append(pieces, batchClose), nil
}

// The punctuation of a batch's body; never written to.
var (
	batchOpen  = []byte{'['}
	batchComma = []byte{','}
	batchClose = []byte{']'}
)

func (d *dispatcher) handle(res result) {
	if h := d.tune.hooks.attempt; h != nil {
		defer h(res.kind.path(), res.status, res.err)
	}
	l := res.lane
	if res.kind == jobRegister {
		l.registering = false
	}
	if res.stopped {
		d.requeue(res)
		return
	}
	if res.err != nil || res.status < 200 || res.status > 299 {
		// Stderr says an outage once; each failed attempt is here, for a debug run.
		d.log.Debug("recorder request failed", "path", res.kind.path(), "status", res.status, "err", res.err)
	}
	if res.err != nil {
		var readErr *readError
		if errors.As(res.err, &readErr) {
			d.log.Error("cannot read a report back from the spool file; it is lost", "proxyId", l.proxyID, "seqs", seqRange(res.entries), "err", res.err)
			d.done1(res)
			return
		}
		d.requeue(res)
		// A recorder that comes back may be a new process that knows no proxy.
		for _, l := range d.lanes {
			l.known = false
			l.regDue = true
		}
		if !d.outage {
			d.outage = true
			d.log.Warn("recorder unreachable; reports stay in the spool and are sent when it is back",
				"url", res.ep.URL, "err", res.err)
		}
		d.refresh = true
		d.fail(0)
		return
	}

	switch status := res.status; {
	case status >= 200 && status < 300:
		// Every 2xx: a recorder built on another framework may answer 201, 202 or 204
		// for what it took; anything else here once refused every register forever.
		d.ok()
		d.okStarted = d.started
		if res.kind == jobRegister {
			l.known = true
			l.batch = gjson.GetBytes(res.body, "batch").Bool()
			l.gen++
			l.regSent = res.factsVersion
			if l == d.current {
				d.mu.Lock()
				stale := d.factsVersion != res.factsVersion
				d.registered++
				close(d.regChanged)
				d.regChanged = make(chan struct{})
				d.mu.Unlock()
				l.regDue = l.regDue || stale
			}
			return
		}
		l.refusals = 0
		d.perAnswer = res.took
		switch {
		case res.took >= slowAnswer && d.hasWork():
			// Accepted, however slowly: one more request may go at once.
			d.window = min(d.window+1, d.tune.maxWindow)
		case res.took < slowAnswer && d.window > d.tune.maxInFlight:
			// Answers are quick again: more requests at once would only cost CPU (64
			// one-report POSTs in flight cost three times the CPU per report of 4).
			d.window--
		}
		d.done1(res)

	case (status == http.StatusUnauthorized || status == http.StatusForbidden) && res.sent <= d.okStarted:
		// Stale: a request as old was taken, so is the token now. The discovery file
		// is read again all the same (a recorder that restarted with a new token
		// right after that success answers 401 to the next round too, said then).
		d.requeue(res)
		d.refresh = true

	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		d.requeue(res)
		if !d.refused {
			d.refused = true
			d.log.Warn("the recorder refused the token: it is wrong or stale; reports stay in the spool and are retried",
				"status", status, "url", res.ep.URL, "source", res.ep.Source)
		}
		d.refresh = true
		d.fail(res.retryAfter)

	case status == http.StatusNotFound && res.kind == jobStep:
		// unknown_proxy: the recorder forgot us (it restarted). Register, then resend.
		d.requeue(res)
		if res.gen == l.gen && l.known {
			// Once per register: the other answers to what was in flight with it (a
			// pipelined group's, say) are the same refusal, not a second one.
			l.known, l.regDue = false, true
			l.refusals++
		}
		if l.refusals > 1 {
			d.fail(0) // refused again right after registering: do not spin
		}

	case res.kind == jobStep && finalStatus(status):
		// The recorder says this report can never be accepted; sending it again would
		// only repeat the refusal forever, in this run and every later one.
		d.log.Error("the recorder rejected a report; it is not sent again",
			"proxyId", l.proxyID, "seqs", seqRange(res.entries), "status", status, "body", string(res.body))
		d.done1(res)

	default:
		// A redirect (never followed: the token would go wherever it points), 408, 429,
		// 5xx, a 404 to a register, and every 4xx that is about the URL, something in
		// between or the recorder's version rather than this report: the report stays
		// in the spool and is retried after a pause. Dropping it here lost every report
		// sent to a recorder behind a 307.
		d.requeue(res)
		d.complain(res)
		d.fail(res.retryAfter)
	}
}

// finalStatus reports whether a step answer says the report itself can never be taken:
// malformed (400), too large (413) or not acceptable as a report (422). Only these drop
// a report; every other refusal may end when the recorder or its URL is fixed.
func finalStatus(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// complain says once, until a request succeeds again, why the recorder is not taking
// reports; each further attempt is at debug level only.
func (d *dispatcher) complain(res result) {
	status := res.status
	switch {
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500 ||
		status == http.StatusNotFound:
		if !d.outage {
			d.outage = true
			d.log.Warn("the recorder is failing requests; reports stay in the spool and are retried",
				"status", status, "body", string(res.body))
		}
	case status >= 300 && status < 400:
		if !d.misrouted {
			d.misrouted = true
			d.log.Warn("the recorder answered with a redirect, which is not followed (the token must not go elsewhere); "+
				"check the recorder URL; reports stay in the spool and are retried",
				"status", status, "url", res.ep.URL, "location", res.location, "source", res.ep.Source)
		}
	default:
		if !d.misrouted {
			d.misrouted = true
			d.log.Warn("the recorder refuses requests; reports stay in the spool and are retried",
				"path", res.kind.path(), "status", status, "url", res.ep.URL, "body", string(res.body))
		}
	}
}

// requeue puts a report that was not accepted back in its place, or owes the register.
func (d *dispatcher) requeue(res result) {
	l := res.lane
	if res.kind == jobRegister {
		l.regDue = true
		return
	}
	// The entries are in seq order and were taken from the front of the queue
	// together, so they go back together where the first belongs.
	i, _ := slices.BinarySearchFunc(l.queued, res.entries[0].seq, func(e entry, seq uint64) int { return cmp.Compare(e.seq, seq) })
	l.queued = slices.Insert(l.queued, i, res.entries...)

}

// seqRange names the reports of a step POST in a message: "17" or "17-42".
func seqRange(es []entry) string {
	if len(es) == 0 {
		return ""
	}
	first, last := strconv.FormatUint(es[0].seq, 10), strconv.FormatUint(es[len(es)-1].seq, 10)
	if len(es) == 1 {
		return first
	}
	return first + "-" + last
}

// done1 records that a report needs no more delivery, and lets an adopted file go
// once all of its reports are done.
func (d *dispatcher) done1(res result) {
	if d.grouping {
		d.groupDone = append(d.groupDone, res.entries...)
		return
	}
	l := res.lane
	if l.file == nil {
		for _, e := range res.entries {
			l.memBytes -= int64(len(e.body) + 1)
		}
	} else {
		seqs := d.seqs[:0]
		for _, e := range res.entries {
			seqs = append(seqs, e.seq)
		}
		d.seqs = seqs[:0]
		// Done marks grow the file too: when the bound has no room for them, the
		// reports are only noted done and a compaction gives their lines back.
		write := d.room(int64(maxAckLine * len(seqs)))
		if err := l.file.markDoneAs(write, seqs); err != nil {
			d.log.Debug("cannot mark reports done", "err", err)
		}
		if !write {
			d.bound(0)
		}
	}
	if d.finished(l) {
		d.log.Info("delivered the reports left by an earlier run", "proxyId", l.proxyID)
	}
}

// finished lets an adopted lane go once none of its reports is left: its file is
// deleted and it is taken off the lanes.
func (d *dispatcher) finished(l *lane) bool {
	if !l.adopted || len(l.queued) > 0 || l.inflight > 0 {
		return false
	}
	if err := l.file.remove(); err != nil {
		d.log.Warn("cannot remove a delivered spool file", "path", l.file.path, "err", err)
	}
	d.lanes = slices.DeleteFunc(d.lanes, func(x *lane) bool { return x == l })
	d.next = 0
	return true
}

func (d *dispatcher) ok() {
	d.failures = 0
	if !d.paused {
		// A success from before a pause (a group's answer after one that failed) does
		// not open the window: after the pause, one request probes.
		d.window = max(d.window, d.tune.maxInFlight)
	}
	d.refused = false
	d.misrouted = false
	if d.outage {
		d.outage = false
		d.log.Info("the recorder is back; delivering spooled reports")
	}
}

// fail pauses all delivery for a backoff that doubles with each failure up to the cap,
// or as long as the recorder asked (clamped to the same cap). After it, one request
// probes before the window opens again.
func (d *dispatcher) fail(retryAfter time.Duration) {
	d.window = 1
	if d.paused {
		return // requests that were already in flight failed too: one failure, one wait
	}
	wait := backoffWait(d.tune, d.failures, retryAfter)
	d.failures++
	d.paused = true
	if d.timer == nil {
		d.timer = time.NewTimer(wait)
	} else {
		d.timer.Reset(wait)
	}
	d.timerC = d.timer.C
}

// backoffWait is the pause after the failures-th failure in a row: doubling from the
// base with jitter up to the cap, or what the recorder asked for, clamped to the cap.
// Each wait is drawn from [d/2, d] (backoff.Half): the pause stops all delivery, and
// one near zero would be no pause at all.
func backoffWait(t tuning, failures int, retryAfter time.Duration) time.Duration {
	return backoff.Policy{Base: t.backoffBase, Cap: t.backoffCap, Jitter: backoff.Half}.Next(failures, retryAfter)
}

func (d *dispatcher) resume() {
	d.paused = false
	if !d.refresh {
		return
	}
	d.refresh = false
	old := d.endpoint()
	ep, err := old.reload()
	if err != nil {
		d.log.Debug("cannot read the recorder discovery file again", "err", err)
		return
	}
	if ep.URL == old.URL && ep.Token == old.Token {
		return
	}
	d.log.Info("recorder endpoint changed", "url", ep.URL, "source", ep.Source)
	d.mu.Lock()
	d.ep = ep
	d.mu.Unlock()
	if ep.URL != old.URL {
		for _, l := range d.lanes {
			l.known, l.regDue = false, true
		}
	}
}

// close lets delivery finish what it quickly can, stops it, and settles the spool
// files: deleted when everything in them is done, else left for the next run.
func (d *dispatcher) close(ctx context.Context) error {
	close(d.draining)
	grace, cancel := context.WithTimeout(ctx, d.tune.closeGrace)
	select {
	case <-d.done:
	case <-grace.Done():
	}
	cancel()
	d.cancelReqs()
	<-d.done
	d.client.closeIdle()

	var errs []error
	for _, l := range d.lanes {
		left := len(l.queued)
		if left > 0 {
			inMemory := 0
			for _, e := range l.queued {
				if e.body != nil && (l.file == nil || !l.file.holds(e.seq)) {
					inMemory++
				}
			}
			if inMemory > 0 {
				d.log.Warn("reports that never reached the spool file are lost", "proxyId", l.proxyID, "reports", inMemory)
			}
			d.log.Info("reports left in the spool for the next run", "proxyId", l.proxyID, "reports", left)
		}
		if l.file == nil {
			continue
		}
		if left == 0 {
			errs = append(errs, l.file.remove())
		} else {
			errs = append(errs, l.file.close())
		}
	}
	return errors.Join(errs...)
}
