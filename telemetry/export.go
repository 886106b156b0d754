package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/bir-dev/bir-proxy/internal/backoff"
	"github.com/bir-dev/bir-proxy/internal/httpclient"
)

// Defaults of the batching span processor (the SDK specification's, but the queue).
const (
	DefaultQueueSize  = 2048
	DefaultBatchSize  = 512
	DefaultBatchDelay = 5 * time.Second
	// maxResponse caps what is read of a collector's answer.
	maxResponse = 64 << 10
	// retries is how many times one batch is sent again after a retryable answer.
	retries = 2
)

// pace is the exporter's backoff: 1 s doubling to 32 s, no jitter, a Retry-After
// honoured up to 60 s. failures counts across batches (reset by a success): the
// batch after one that was dropped waits too.
var pace = backoff.Policy{Base: time.Second, Cap: 32 * time.Second, Jitter: backoff.None, MaxRetryAfter: 60 * time.Second}

// errStopping cuts a wait between two tries of a batch when Close starts: the exit's
// flush sends the batch once more, as it sends what is queued.
var errStopping = errors.New("the exporter is stopping")

// Options configure an Exporter.
type Options struct {
	Config Config
	// Version is bir-proxy's: service.version and the instrumentation scope's version.
	Version string
	// Server is the server's name, for the default service.name bir-proxy/SERVER.
	Server string
	Logger *slog.Logger
	// Client sends the exports (tests); nil: one that follows no redirect off the
	// configured origin.
	Client               *http.Client
	QueueSize, BatchSize int
	BatchDelay           time.Duration
	// StatePath, when set, is the file the exporter's counts are written to (State,
	// WriteState): every StateEvery at most while spans are dropped, and at Close.
	StatePath string
	// InstanceID is the proxy run's id (its proxyId): service.instance.id, so that a
	// session's calls are known as one run's, unless OTEL_RESOURCE_ATTRIBUTES says.
	InstanceID string
}

// Stats counts what the exporter did with the spans it was given.
type Stats struct {
	Exported uint64 // accepted by the collector
	Dropped  uint64 // never sent, or refused: queue full, collector down or refusing
	Rejected uint64 // sent, and rejected by the collector (partial success)
}

// Exporter batches spans and sends them, with the metrics, from one goroutine. Submit
// and Record never wait on the network.
type Exporter struct {
	cfg      Config
	traces   Signal // the settings of the traces' exports
	metrics  Signal // and of the metrics'
	version  string
	log      *slog.Logger
	client   *http.Client
	qsize    int
	bsize    int
	delay    time.Duration
	created  time.Time
	ops      *histogram
	sessions *histogram
	results  *histogram // mcp.client.tool.result.size
	lists    *histogram // mcp.client.tools.list.size

	mu          sync.Mutex
	cur         *batch   // being filled by Submit
	ready       []*batch // full, to be sent, oldest first
	spare       []*batch // sent, to be filled again
	queued      int      // spans in cur and ready
	res         []Attr
	session     []Attr
	closing     bool
	wake        chan struct{}
	stop        chan struct{}
	done        chan struct{}
	ctx         context.Context
	cancel      context.CancelFunc
	exported    atomic.Uint64
	dropped     atomic.Uint64
	rejected    atomic.Uint64
	warned      atomic.Bool
	server      string
	stateWarned atomic.Bool

	statePath string
	stateOn   bool // the state writer was started (under mu)
	stateWG   sync.WaitGroup
	lastErr   string // the last reason spans were dropped or not sent (under mu)
	lastErrAt time.Time

	// stopping is cancelled when Close starts (x.stop is closed).
	stopping   context.Context
	stopCancel context.CancelFunc
	// retrying sends the traces' exports, trying a batch again after a retryable
	// answer; its hooks run on the goroutine.
	retrying *retryablehttp.Client

	// owned by the goroutine
	buf      []byte
	retryAt  time.Time // nothing is sent before it (after a batch failed for good)
	failures int       // retryable failures in a row, for pace
	// sleeping is set while retrying waits between two tries; interrupt cuts that
	// wait (Close started meanwhile).
	sleeping  atomic.Bool
	interrupt context.CancelCauseFunc
}

// New starts an Exporter for a Config that is Enabled.
func New(o Options) *Exporter {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.BatchSize <= 0 || o.BatchSize > o.QueueSize {
		o.BatchSize = min(DefaultBatchSize, o.QueueSize)
	}
	if o.BatchDelay <= 0 {
		o.BatchDelay = DefaultBatchDelay
	}
	if o.Config.MetricInterval <= 0 {
		o.Config.MetricInterval = 60 * time.Second
	}
	o.Version = ValidUTF8(o.Version) // the scope's version, a string in OTLP
	now := time.Now()
	x := &Exporter{
		cfg: o.Config, traces: o.Config.TracesSignal(), metrics: o.Config.MetricsSignal(), version: o.Version, log: o.Logger, client: o.Client,
		qsize: o.QueueSize, bsize: o.BatchSize, delay: o.BatchDelay, created: now, statePath: o.StatePath, server: o.Server,
		ops:      newHistogram("mcp.client.operation.duration", "The duration of the MCP request or notification as observed on the sender from the time it was sent until the response or ack is received.", "s", durationBounds, now),
		sessions: newHistogram("mcp.client.session.duration", "The duration of the MCP session as observed on the MCP client.", "s", durationBounds, now),
		results:  newHistogram(ToolResultSize, "The size of a tools/call result as the server sent it (its JSON result member).", "By", sizeBounds, now),
		lists:    newHistogram(ToolsListSize, "The size of a tools/list result (one page) as the server sent it.", "By", sizeBounds, now),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if x.client == nil {
		x.client = newClient(max(x.traces.Timeout, x.metrics.Timeout))
	}
	x.res = baseResource(o.Config, o.Version, o.Server, o.InstanceID)
	x.ctx, x.cancel = context.WithCancel(context.Background())
	x.stopping, x.stopCancel = context.WithCancel(context.Background())
	x.retrying = x.newRetrying()
	go x.run()
	return x
}

// baseResource is the resource every export carries.
func baseResource(c Config, version, server, instance string) []Attr {
	name := "bir-proxy"
	if server != "" {
		name += "/" + server
	}
	res := []Attr{String("service.name", name), String("service.version", version),
		String("telemetry.sdk.name", "bir-proxy"), String("telemetry.sdk.language", "go"), String("telemetry.sdk.version", version)}
	if instance != "" {
		res = append(res, String("service.instance.id", instance))
	}
	for _, kv := range c.Resource {
		res = setAttr(res, kv[0], kv[1])
	}
	if c.ServiceName != "" {
		res = setAttr(res, "service.name", c.ServiceName)
	}
	return res
}

func setAttr(as []Attr, k, v string) []Attr {
	for i := range as {
		if as[i].Key == k {
			as[i] = String(k, v)
			return as
		}
	}
	return append(as, String(k, v))
}

// SetServer adds the server's serverInfo name and version to the resource of what is
// exported from now on.
func (x *Exporter) SetServer(name, version string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	res := append([]Attr(nil), x.res...) // a batch being encoded holds the old one
	if name != "" {
		res = setAttr(res, "bir.server.name", name)
	}
	if version != "" {
		res = setAttr(res, "bir.server.version", version)
	}
	x.res = res
}

// SetSession gives the attributes of the session's mcp.client.session.duration,
// recorded when the exporter is closed.
func (x *Exporter) SetSession(attrs []Attr) {
	x.mu.Lock()
	x.session = append([]Attr(nil), attrs...)
	x.mu.Unlock()
}

// batch is up to BatchSize spans. With OTLP/protobuf, Submit encodes each span into
// enc as it comes (the Span messages of the request's one ScopeSpans): the span is
// not copied, kept and read again when the batch is sent, only its bytes are, and
// the request is those bytes after a head made when it is sent. With OTLP/JSON the
// spans and their attributes are copied into spans and attrs, and encoded when sent.
// Batches are reused once sent: a span costs the exporter no allocation.
type batch struct {
	n     int // spans in the batch
	enc   []byte
	spans []Span
	attrs []Attr
}

// maxSpare is how many sent batches are kept for reuse.
const maxSpare = 2

// Submit queues a finished span. It never waits: with the queue full the span is
// dropped and counted. s.Attrs and s.Events are copied: the caller may reuse them
// once Submit returns.
func (x *Exporter) Submit(s Span) {
	if x.cfg.TracesURL == "" {
		return
	}
	// The span's own strings, as String makes its attributes', valid UTF-8.
	s.Name, s.StatusMsg, s.TraceState = ValidUTF8(s.Name), ValidUTF8(s.StatusMsg), ValidUTF8(s.TraceState)
	x.mu.Lock()
	if x.queued >= x.qsize || x.closing {
		x.mu.Unlock()
		x.drop(1, "the export queue is full (the collector is down, slow or refusing)")
		return
	}
	b := x.cur
	if b == nil {
		if n := len(x.spare); n > 0 {
			b, x.spare = x.spare[n-1], x.spare[:n-1]
		} else {
			b = x.newBatch()
		}
		x.cur = b
	}
	if x.traces.Protocol == ProtoJSON {
		// Appended where the batch's spans keep theirs (a growth leaves the earlier
		// spans' attributes where they were, which is as good).
		i := len(b.attrs)
		b.attrs = append(b.attrs, s.Attrs...)
		s.Attrs = b.attrs[i:len(b.attrs):len(b.attrs)]
		if len(s.Events) > 0 {
			// The caller may reuse them too (rare: a tool drift's).
			evs := slices.Clone(s.Events)
			for k := range evs {
				evs[k].Attrs = slices.Clone(evs[k].Attrs)
			}
			s.Events = evs
		}
		b.spans = append(b.spans, s)
	} else {
		b.enc = appendSpanProto(b.enc, &s)
	}
	b.n++
	x.queued++
	full := b.n >= x.bsize
	if full {
		x.ready = append(x.ready, b)
		x.cur = nil
	}
	x.mu.Unlock()
	if full {
		x.signal()
	}
}

func (x *Exporter) newBatch() *batch {
	if x.traces.Protocol == ProtoJSON {
		return &batch{spans: make([]Span, 0, x.bsize), attrs: make([]Attr, 0, 12*x.bsize)}
	}
	return &batch{enc: make([]byte, 0, 256*x.bsize)}
}

// Record adds one operation's duration to mcp.client.operation.duration.
func (x *Exporter) Record(attrs []Attr, d time.Duration) {
	if x.cfg.MetricsURL == "" {
		return
	}
	x.ops.record(attrs, d.Seconds())
}

// The size histograms (bytes, explicit buckets sizeBounds). Named as issue 38 asked,
// beside mcp.client.operation.duration, so one dashboard query finds all three; the
// MCP conventions define no size metric yet (docs/otel.md).
const (
	ToolResultSize = "mcp.client.tool.result.size"
	ToolsListSize  = "mcp.client.tools.list.size"
)

// RecordSize adds one result's size in bytes to the histogram named (ToolResultSize
// or ToolsListSize).
func (x *Exporter) RecordSize(name string, attrs []Attr, bytes int64) {
	if h := x.sizes(name); h != nil {
		h.record(attrs, float64(bytes))
	}
}

// SizeSeries is RecordSize's series of attrs, found once (nil when no metrics are
// exported); its Add takes a size in bytes.
func (x *Exporter) SizeSeries(name string, attrs []Attr) *Series {
	h := x.sizes(name)
	if h == nil {
		return nil
	}
	return &Series{h: h, p: h.pointOf(attrs)}
}

func (x *Exporter) sizes(name string) *histogram {
	if x.cfg.MetricsURL == "" {
		return nil
	}
	switch name {
	case ToolResultSize:
		return x.results
	case ToolsListSize:
		return x.lists
	}
	return nil
}

// Series is one attribute set of a histogram, found once and recorded to many times
// (Record without building the set's key each time).
type Series struct {
	h *histogram
	p *point
}

// Series returns the series of attrs, nil when no metrics are exported (a nil
// *Series records nothing).
func (x *Exporter) Series(attrs []Attr) *Series {
	if x.cfg.MetricsURL == "" {
		return nil
	}
	return &Series{h: x.ops, p: x.ops.pointOf(attrs)}
}

// Record adds one operation's duration to the series.
func (s *Series) Record(d time.Duration) { s.Add(d.Seconds()) }

// Add adds one value to the series (a SizeSeries': bytes).
func (s *Series) Add(v float64) {
	if s == nil {
		return
	}
	s.h.mu.Lock()
	s.p.add(v, s.h.bounds)
	s.h.mu.Unlock()
}

// Stats says what became of the spans submitted so far.
func (x *Exporter) Stats() Stats {
	return Stats{Exported: x.exported.Load(), Dropped: x.dropped.Load(), Rejected: x.rejected.Load()}
}

// Dropped counts n spans that were never submitted (the proxy's exit came before its
// bookkeeping made them), why saying so; nothing when no traces are sent.
func (x *Exporter) Dropped(n int, why string) {
	if x.cfg.TracesURL == "" {
		return
	}
	x.drop(n, why)
}

func (x *Exporter) drop(n int, why string) {
	if n <= 0 {
		return
	}
	x.dropped.Add(uint64(n))
	x.setError(why)
	if !x.warned.Swap(true) {
		x.log.Warn("OpenTelemetry: spans dropped; the host is not affected, and the count is kept", "why", why, "spans", n)
	}
}

// setError keeps why spans were last dropped or not sent, for the state file, and
// starts the state writer if it is not running.
func (x *Exporter) setError(why string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.lastErr, x.lastErrAt = why, time.Now()
	if x.statePath == "" || x.stateOn || x.closing {
		return
	}
	x.stateOn = true
	x.stateWG.Add(1)
	go x.stateLoop()
}

// stateLoop writes the state file every StateEvery while the counts change, until
// Close. It runs only once something was dropped: a healthy exporter has no timer
// of its own for it.
func (x *Exporter) stateLoop() {
	defer x.stateWG.Done()
	t := time.NewTicker(StateEvery)
	defer t.Stop()
	var last State
	for {
		st := x.state(true)
		if st.Exported != last.Exported || st.Dropped != last.Dropped || st.Rejected != last.Rejected || st.LastAt != last.LastAt {
			x.writeState(st)
			last = st
		}
		select {
		case <-x.stop:
			return
		case <-t.C:
		}
	}
}

// state is the exporter's State of the moment.
func (x *Exporter) state(running bool) State {
	st := x.Stats()
	x.mu.Lock()
	why, at := x.lastErr, x.lastErrAt
	x.mu.Unlock()
	return State{Server: x.server, PID: os.Getpid(), Running: running, Written: time.Now(),
		Exported: st.Exported, Dropped: st.Dropped, Rejected: st.Rejected, LastError: why, LastAt: at}
}

func (x *Exporter) writeState(st State) {
	if err := WriteState(x.statePath, st); err != nil && !x.stateWarned.Swap(true) {
		x.log.Warn("OpenTelemetry: the state bir-proxy status reads cannot be written", "err", err)
	}
}

func (x *Exporter) signal() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// Close records the session's duration and sends what is queued, bounded by ctx (the
// proxy gives it at most 1 s); what it could not send is counted as dropped.
func (x *Exporter) Close(ctx context.Context) Stats {
	x.mu.Lock()
	if x.closing {
		x.mu.Unlock()
		<-x.done
		return x.Stats()
	}
	x.closing = true
	session := x.session
	x.mu.Unlock()
	if x.cfg.MetricsURL != "" {
		x.sessions.record(session, time.Since(x.created).Seconds())
	}
	close(x.stop)
	x.stopCancel()
	select {
	case <-x.done:
	case <-ctx.Done():
		x.cancel()
		<-x.done
	}
	x.cancel()
	x.stopCancel()
	x.stateWG.Wait()
	if x.statePath != "" {
		x.writeState(x.state(false))
	}
	st := x.Stats()
	if st.Dropped > 0 || st.Rejected > 0 {
		x.log.Warn("OpenTelemetry: not every span reached the collector", "exported", st.Exported, "dropped", st.Dropped, "rejected", st.Rejected)
	}
	return st
}

func (x *Exporter) run() {
	defer close(x.done)
	tick := time.NewTicker(x.delay)
	defer tick.Stop()
	var metricsC <-chan time.Time
	if x.cfg.MetricsURL != "" {
		mt := time.NewTicker(x.cfg.MetricInterval)
		defer mt.Stop()
		metricsC = mt.C
	}
	var pending *batch // a batch whose tries Close cut: the exit's flush sends it
	for {
		timed := false
		select {
		case <-x.stop:
			x.final(pending)
			return
		case <-x.wake:
		case <-tick.C:
			timed = true
		case <-metricsC:
			x.exportMetrics()
			continue
		}
		for x.ctx.Err() == nil && pending == nil {
			if wait := time.Until(x.retryAt); wait > 0 {
				break // the collector asked for quiet; the ticker comes back
			}
			b := x.take(timed)
			if b == nil {
				break
			}
			if !x.send(b) {
				pending = b // Close started; x.stop is closed
				break
			}
			x.recycle(b)
		}
	}
}

// take removes the next batch from the queue: a full one, or with flush whatever is
// there; nil when there is none.
func (x *Exporter) take(flush bool) *batch {
	x.mu.Lock()
	defer x.mu.Unlock()
	var b *batch
	switch {
	case len(x.ready) > 0:
		b = x.ready[0]
		n := copy(x.ready, x.ready[1:])
		x.ready[n] = nil
		x.ready = x.ready[:n]
	case flush && x.cur != nil && x.cur.n > 0:
		b, x.cur = x.cur, nil
	default:
		return nil
	}
	x.queued -= b.n
	return b
}

// recycle takes back a batch that was sent (or dropped).
func (x *Exporter) recycle(b *batch) {
	clear(b.spans)
	clear(b.attrs)
	b.n, b.enc, b.spans, b.attrs = 0, b.enc[:0], b.spans[:0], b.attrs[:0]
	if cap(b.attrs) > 64*x.bsize { // a batch of huge spans: its room goes
		b.attrs = nil
	}
	if cap(b.enc) > 4<<20 {
		b.enc = nil
	}
	x.mu.Lock()
	if len(x.spare) < maxSpare {
		x.spare = append(x.spare, b)
	}
	x.mu.Unlock()
}

// final is the exit's flush: one try for each batch queued, until Close's bound ends
// it (x.ctx cancelled); then the metrics.
func (x *Exporter) final(pending *batch) {
	if pending != nil && !x.send(pending) {
		x.drop(pending.n, "the collector did not take them before exit")
	}
	for x.ctx.Err() == nil {
		b := x.take(true)
		if b == nil {
			break
		}
		if !x.send(b) {
			x.drop(b.n, "the collector did not take them before exit")
		}
	}
	x.mu.Lock()
	left := x.queued
	x.cur, x.ready, x.spare, x.queued = nil, nil, nil, 0
	x.mu.Unlock()
	x.drop(left, "the exit's flush ran out of time")
	x.exportMetrics()
}

// send exports one batch, trying it again up to twice after a retryable answer;
// true means done with it (taken, or refused or given up for good and counted),
// false that Close started before it was taken and it may be sent again (once).
func (x *Exporter) send(b *batch) bool {
	n := b.n
	x.mu.Lock()
	res := x.res
	x.mu.Unlock()
	var tail []byte // sent after x.buf
	if x.traces.Protocol == ProtoJSON {
		x.buf = appendTracesJSON(x.buf[:0], res, x.version, b.spans)
	} else {
		// The head, then the spans as Submit encoded them: not copied again.
		x.buf, tail = appendTracesHead(x.buf[:0], res, x.version, len(b.enc)), b.enc
	}
	code, body, retryAfter, err := x.post(x.cfg.TracesURL, x.traces, x.buf, tail, x.retrying)
	x.shrink()
	if errors.Is(err, errStopping) {
		return false
	}
	switch {
	case err == nil && code/100 == 2:
		rejected, msg, _ := partialSuccess(body, x.traces.Protocol == ProtoJSON, "rejectedSpans")
		rejected = max(0, min(rejected, int64(n)))
		x.rejected.Add(uint64(rejected))
		x.exported.Add(uint64(int64(n) - rejected))
		if rejected > 0 && msg != "" {
			x.log.Debug("OpenTelemetry: the collector rejected spans", "spans", rejected, "message", msg)
		}
		x.failures = 0
		return true
	case err == nil && retryable(code), err != nil && x.ctx.Err() == nil:
		x.noteRetryable(code, err)
		if x.stopping.Err() != nil {
			return false // the exit's flush tries it once more
		}
		// Given up after its tries: nothing more is sent for one more step of the
		// backoff (the batch after it would likely meet the same answer).
		x.retryAt = time.Now().Add(pace.Next(x.failures, retryAfter))
		x.failures++
		x.drop(n, "the collector kept answering that it cannot take them now")
		return true
	default:
		if err == nil {
			err = fmt.Errorf("HTTP %d", code)
		}
		x.drop(n, "the collector refused them: "+err.Error())
		return true
	}
}

func (x *Exporter) logOnce(msg string, err error) {
	if !x.warned.Swap(true) {
		x.log.Warn(msg, "err", err)
	}
}

// shrink lets a buffer grown by a huge batch go.
func (x *Exporter) shrink() {
	if cap(x.buf) > 4<<20 {
		x.buf = nil
	}
}

// noteRetryable says a retryable failure (an answer code, or err): once on stderr for
// an unreachable collector, and in the state file.
func (x *Exporter) noteRetryable(code int, err error) {
	if err != nil {
		x.logOnce("OpenTelemetry: the collector cannot be reached; spans wait, and are dropped past the queue", err)
		x.setError(err.Error())
	} else {
		x.setError(fmt.Sprintf("the collector answered HTTP %d; spans wait, and are dropped past the queue", code))
	}
}

// newRetrying is the client of the traces' exports: x.client, each try bounded by the
// traces' timeout, a batch tried again up to retries times after a retryable answer
// (retryable: 429, 502, 503, 504, no answer) with pace's waits, the last answer
// returned as it is. Its own log is off: the exporter says what matters.
func (x *Exporter) newRetrying() *retryablehttp.Client {
	hc := *x.client
	hc.Timeout = x.traces.Timeout // each try's, not the whole batch's with its waits
	return &retryablehttp.Client{
		HTTPClient:   &hc,
		RetryMax:     retries,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
		CheckRetry: func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			switch {
			case ctx.Err() != nil:
				return false, context.Cause(ctx)
			case x.stopping.Err() != nil:
				return false, nil // Close started: the exit's flush takes over
			case err == nil && !retryable(resp.StatusCode):
				return false, nil
			}
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			x.noteRetryable(code, err)
			return true, nil
		},
		Backoff: func(_, _ time.Duration, _ int, resp *http.Response) time.Duration {
			wait := pace.Next(x.failures, backoff.FromResponse(resp))
			x.failures++
			x.log.Debug("OpenTelemetry: export to be tried again", "after", wait)
			// Close may start during the wait: it cuts it (see post).
			x.sleeping.Store(true)
			if x.stopping.Err() != nil {
				x.interrupt(errStopping)
			}
			return wait
		},
		PrepareRetry: func(*http.Request) error {
			x.sleeping.Store(false)
			return nil
		},
	}
}

func (x *Exporter) exportMetrics() {
	if x.cfg.MetricsURL == "" || x.ctx.Err() != nil {
		return
	}
	now := time.Now()
	var ms []metric
	for _, h := range []*histogram{x.ops, x.sessions, x.results, x.lists} {
		if m := h.snapshot(now); m != nil {
			ms = append(ms, *m)
		}
	}
	if len(ms) == 0 {
		return
	}
	x.mu.Lock()
	res := x.res
	x.mu.Unlock()
	var body []byte
	if x.metrics.Protocol == ProtoJSON {
		body = appendMetricsJSON(nil, res, x.version, ms)
	} else {
		body = appendMetricsProto(nil, res, x.version, ms)
	}
	if code, _, _, err := x.post(x.cfg.MetricsURL, x.metrics, body, nil, nil); err != nil || code/100 != 2 {
		if err == nil {
			err = fmt.Errorf("HTTP %d", code)
		}
		x.logOnce("OpenTelemetry: metrics not exported", err)
	}
}

// retryable is the OTLP/HTTP specification's list of answers worth sending again.
func retryable(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusBadGateway ||
		code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// post sends body followed by tail to u with sig's protocol, headers and timeout,
// and reads at most maxResponse of the answer. With rc the request is rc's, tried
// again as it says (the traces); without, it is tried once (the metrics: the next
// interval's export carries the same cumulative values).
func (x *Exporter) post(u string, sig Signal, body, tail []byte, rc *retryablehttp.Client) (code int, resp []byte, retryAfter time.Duration, err error) {
	var r *http.Response
	if rc == nil {
		ctx, cancel := context.WithTimeout(x.ctx, sig.Timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			return 0, nil, 0, fmt.Errorf("making the export request: %w", err)
		}
		x.setHeaders(req.Header, sig)
		r, err = x.client.Do(req)
		if err != nil {
			return 0, nil, 0, fmt.Errorf("exporting to %s: %w", redacted(u), err)
		}
	} else {
		// Each try bounded by rc's timeout; a wait between two cut when Close starts.
		ctx, cancel := context.WithCancelCause(x.ctx)
		defer cancel(nil)
		x.interrupt = cancel
		x.sleeping.Store(false)
		stop := context.AfterFunc(x.stopping, func() {
			if x.sleeping.Load() {
				cancel(errStopping)
			}
		})
		defer stop()
		// Two parts, the length known (twoParts.Len), read again for each try and
		// for a redirect; the spans are not copied into one buffer.
		req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, u,
			retryablehttp.ReaderFunc(func() (io.Reader, error) { return &twoParts{body, tail}, nil }))
		if err != nil {
			return 0, nil, 0, fmt.Errorf("making the export request: %w", err)
		}
		x.setHeaders(req.Header, sig)
		r, err = rc.Do(req)
		if context.Cause(ctx) == errStopping {
			if r != nil {
				r.Body.Close()
			}
			return 0, nil, 0, errStopping
		}
		if err != nil {
			return 0, nil, 0, fmt.Errorf("exporting to %s: %w", redacted(u), err)
		}
	}
	defer r.Body.Close()
	resp, err = io.ReadAll(io.LimitReader(r.Body, maxResponse))
	if err != nil && !errors.Is(err, context.Canceled) {
		err = nil // the status is what matters; a broken body is not a failed export
	}
	return r.StatusCode, resp, backoff.FromResponse(r), nil
}

func (x *Exporter) setHeaders(h http.Header, sig Signal) {
	if sig.Protocol == ProtoJSON {
		h.Set("Content-Type", "application/json")
	} else {
		h.Set("Content-Type", "application/x-protobuf")
	}
	h.Set("User-Agent", "bir-proxy/"+x.version)
	for _, kv := range sig.Headers {
		h.Set(kv[0], kv[1])
	}
}

// twoParts reads a then b; Len is what is left, which tells retryablehttp the
// request's length.
type twoParts struct{ a, b []byte }

func (t *twoParts) Len() int { return len(t.a) + len(t.b) }

// Its WriteTo writes each as it is (io.MultiReader's copies them through a 32 KiB
// buffer it allocates for each request).

func (t *twoParts) Read(p []byte) (int, error) {
	if len(t.a) == 0 && len(t.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, t.a)
	t.a = t.a[n:]
	m := copy(p[n:], t.b)
	t.b = t.b[m:]
	return n + m, nil
}

func (t *twoParts) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for _, p := range []*[]byte{&t.a, &t.b} {
		n, err := w.Write(*p)
		total += int64(n)
		*p = (*p)[n:]
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "the collector"
	}
	return p.Redacted()
}

// newClient is the HTTP client of the exports: it follows a redirect only within the
// origin of the endpoint it was sent to (the headers, which may carry an API key, go
// nowhere else), in a chain of at most 3 requests, and reads answers with capped
// headers. The environment's proxy is honoured (a collector is on the network).
func newClient(timeout time.Duration) *http.Client {
	return httpclient.New(httpclient.Options{
		Standard:               true,
		Proxy:                  httpclient.FromEnv,
		Redirects:              httpclient.SameOrigin,
		MaxHops:                3,
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConns:           2,
		WriteBufferSize:        64 << 10, // a batch in a few writes, not 4 KiB ones
		ResponseHeaderTimeout:  timeout,
	})
}
