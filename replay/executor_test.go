package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
	"github.com/bir-dev/bir-proxy/relay"
)

func waitCtx(t *testing.T) context.Context { return testutil.Context(t) }

// fakeUpstream answers tools/call the way rawserver does: "hang" waits for its
// context, anything else is answered at once. It keeps every request it was given.
type fakeUpstream struct {
	mu      sync.Mutex
	calls   []relay.Request
	running int
	most    int
	release chan struct{} // closed by free: every hang, now and later, is answered
	once    sync.Once
	changed chan struct{}
}

func (f *fakeUpstream) free() { f.once.Do(func() { close(f.release) }) }

func newFakeUpstream() *fakeUpstream {
	return &fakeUpstream{release: make(chan struct{}), changed: make(chan struct{})}
}

func (f *fakeUpstream) note(d int, req *relay.Request) {
	f.mu.Lock()
	if req != nil {
		f.calls = append(f.calls, *req)
	}
	f.running += d
	f.most = max(f.most, f.running)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *fakeUpstream) Call(ctx context.Context, req relay.Request) ([]byte, error) {
	f.note(+1, &req)
	defer f.note(-1, nil)
	if req.Sent != nil {
		req.Sent()
	}
	if gjson.GetBytes(req.Params, "name").String() == "hang" {
		select {
		case <-ctx.Done():
			// As relay.Call reports it.
			if cause := context.Cause(ctx); cause != ctx.Err() {
				return nil, fmt.Errorf("waiting: %w: %w", ctx.Err(), cause)
			}
			return nil, fmt.Errorf("waiting: %w", ctx.Err())
		case <-f.release:
		}
	}
	return []byte(`{"jsonrpc":"2.0","id":"bir:x:1","result":{"content":[{"type":"text","text":` + string(gjson.GetBytes(req.Params, "arguments").Raw) + `}]}}`), nil
}

// wait waits until cond holds for the calls made so far.
func (f *fakeUpstream) wait(t *testing.T, what string, cond func(calls []relay.Request, running int) bool) {
	t.Helper()
	ctx := waitCtx(t)
	for {
		f.mu.Lock()
		ok, changed := cond(f.calls, f.running), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %s", what)
		}
	}
}

type harness struct {
	rec  *recordertest.Server
	rem  *recorder.Remote
	up   *fakeUpstream
	gate *Gate
	ex   *Executor
	logs *testutil.SyncBuffer
}

func start(t *testing.T, tune tuning) *harness {
	t.Helper()
	rec := recordertest.Start(t)
	logs := &testutil.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rep, err := recorder.Open(t.Context(), recorder.Config{
		Endpoint: &recorder.Endpoint{URL: rec.URL(), Token: rec.Token(), Source: "test"},
		Server:   "unit", StateDir: t.TempDir(), Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{rec: rec, rem: rep.Remote(), up: newFakeUpstream(), gate: NewGate(nil), logs: logs}
	h.ex = Start(Config{Recorder: h.rem, Upstream: h.up, Gate: h.gate, Server: "unit", PID: 1, Logger: log, tuning: tune})
	t.Cleanup(func() {
		h.up.free()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		h.ex.Close(ctx)
		rep.Close(ctx)
		if t.Failed() {
			t.Logf("log:\n%s", logs.String())
		}
	})
	return h
}

func (h *harness) ready() {
	host(h.gate, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
}

func (h *harness) dispatch(ds ...recordertest.Dispatch) { h.rec.Dispatch(h.rem.ProxyID(), ds...) }

// handed waits until the recorder has handed out n dispatches.
func (h *harness) handed(t *testing.T, n int) {
	t.Helper()
	if _, err := h.rec.Wait(waitCtx(t), func(v recordertest.Snapshot) bool { return len(v.Handed) >= n }); err != nil {
		t.Fatal(err)
	}
}

func d(id, tool string) recordertest.Dispatch {
	return recordertest.Dispatch{DispatchID: id, Tool: tool, Arguments: json.RawMessage(`{"id":"` + id + `"}`)}
}

// outcomes waits for a result of each id and returns the outcomes.
func (h *harness) outcomes(t *testing.T, ids ...string) map[string]string {
	t.Helper()
	snap, err := h.rec.Wait(waitCtx(t), func(v recordertest.Snapshot) bool {
		n := 0
		for _, r := range v.Results {
			for _, id := range ids {
				if r.DispatchID == id {
					n++
				}
			}
		}
		return n >= len(ids)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range snap.Results {
		if _, dup := out[r.DispatchID]; dup {
			t.Fatalf("%s posted twice", r.DispatchID)
		}
		out[r.DispatchID] = r.Outcome
	}
	return out
}

// TestAtMostFourInArrivalOrder: dispatches wait for readiness, then run in arrival
// order, never more than maxInFlight at once.
func TestAtMostFourInArrivalOrder(t *testing.T) {
	h := start(t, tuning{})
	var ids []string
	for i := range 10 {
		ids = append(ids, fmt.Sprintf("d%d", i))
		h.dispatch(d(ids[i], "hang"))
	}
	ctx := waitCtx(t)
	if _, err := h.rec.Wait(ctx, func(v recordertest.Snapshot) bool { return len(v.Handed) == 10 }); err != nil {
		t.Fatal(err)
	}
	h.up.mu.Lock()
	early := len(h.up.calls)
	h.up.mu.Unlock()
	if early != 0 {
		t.Fatalf("%d dispatches ran before the upstream was ready", early)
	}
	h.ready()
	h.up.wait(t, "four running", func(c []relay.Request, running int) bool { return running == maxInFlight })
	h.rec.Cancel(h.rem.ProxyID(), "d1")
	h.up.wait(t, "the fifth to start", func(c []relay.Request, _ int) bool { return len(c) == 5 })
	h.up.free()
	got := h.outcomes(t, ids...)
	if got["d1"] != "cancelled" {
		t.Fatalf("d1: %s", got["d1"])
	}
	h.up.mu.Lock()
	defer h.up.mu.Unlock()
	if h.up.most > maxInFlight {
		t.Fatalf("%d dispatches ran at once", h.up.most)
	}
	for i, c := range h.up.calls {
		if c.Origin != fmt.Sprintf("d%d", i) || c.Method != "tools/call" {
			t.Fatalf("call %d is %s %s: not in arrival order", i, c.Method, c.Origin)
		}
		if !strings.Contains(string(c.Params), `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`) {
			t.Fatalf("stateless-era dispatch without the host's _meta: %s", c.Params)
		}
	}
}

// TestQueuedDispatchesEnd: a dispatch still waiting times out at its deadline, is
// stranded by a lost upstream, or is cancelled by the recorder — each posted, none
// sent.
func TestQueuedDispatchesEnd(t *testing.T) {
	h := start(t, tuning{})
	timed := d("timed", "echo")
	timed.TimeoutMs = 50
	h.dispatch(timed, d("cancelled", "echo"), d("stranded", "echo"))
	h.handed(t, 3)
	if got := h.outcomes(t, "timed")["timed"]; got != "timeout" {
		t.Fatalf("timed: %s", got)
	}
	h.rec.Cancel(h.rem.ProxyID(), "cancelled", "never-heard-of")
	if got := h.outcomes(t, "cancelled")["cancelled"]; got != "cancelled" {
		t.Fatalf("cancelled: %s", got)
	}
	h.gate.UpstreamLost(time.Now())
	if got := h.outcomes(t, "stranded")["stranded"]; got != "upstream_lost" {
		t.Fatalf("stranded: %s", got)
	}
	h.up.mu.Lock()
	defer h.up.mu.Unlock()
	if len(h.up.calls) != 0 {
		t.Fatalf("%d dispatches were sent", len(h.up.calls))
	}
}

// TestStopCancelsEverything: Stop posts every running and queued dispatch cancelled,
// and a running one's context says the proxy is exiting.
func TestStopCancelsEverything(t *testing.T) {
	h := start(t, tuning{})
	h.ready()
	for i := range 6 {
		h.dispatch(d(fmt.Sprintf("s%d", i), "hang"))
	}
	h.up.wait(t, "four running", func(_ []relay.Request, running int) bool { return running == maxInFlight })
	// Handed out is not yet received: Stop cuts the poll in flight (docs/replay.md), and
	// an answer cut before it was read whole never reached the proxy. The next poll
	// being held says the last answer was read and taken by the scheduler.
	if _, err := h.rec.Wait(waitCtx(t), func(v recordertest.Snapshot) bool { return len(v.Handed) >= 6 && v.Polling > 0 }); err != nil {
		t.Fatal(err)
	}
	h.ex.Stop()
	got := h.outcomes(t, "s0", "s1", "s2", "s3", "s4", "s5")
	for id, o := range got {
		if o != "cancelled" {
			t.Fatalf("%s: %s", id, o)
		}
	}
}

// TestQueueIsBounded: past maxQueued, a new dispatch is refused (posted rpc_error, busy)
// rather than held.
func TestQueueIsBounded(t *testing.T) {
	h := start(t, tuning{maxQueued: 2})
	h.dispatch(d("q1", "echo"), d("q2", "echo"), d("q3", "echo"))
	if got := h.outcomes(t, "q3")["q3"]; got != "rpc_error" {
		t.Fatalf("q3: %s", got)
	}
	h.ready()
	got := h.outcomes(t, "q1", "q2")
	if got["q1"] != "ok" || got["q2"] != "ok" {
		t.Fatalf("%v", got)
	}
}

// TestRepeatedDispatchRunsOnce: a dispatchId handed out again while it runs is not
// run twice.
func TestRepeatedDispatchRunsOnce(t *testing.T) {
	h := start(t, tuning{})
	h.ready()
	h.dispatch(d("r", "hang"))
	h.up.wait(t, "it to run", func(c []relay.Request, _ int) bool { return len(c) == 1 })
	h.dispatch(d("r", "hang"))
	h.handed(t, 2)
	h.dispatch(d("marker", "echo"))
	h.outcomes(t, "marker")
	h.up.mu.Lock()
	n := len(h.up.calls)
	h.up.mu.Unlock()
	if n != 2 { // r once, marker once
		t.Fatalf("%d calls", n)
	}
}

// TestResultGivenUpOnce: a result the recorder keeps refusing is retried with backoff
// for giveUp, then dropped with one log line; the attempts stay a handful.
func TestResultGivenUpOnce(t *testing.T) {
	h := start(t, tuning{giveUp: 2 * time.Second, backoffBase: 20 * time.Millisecond, backoffCap: 400 * time.Millisecond})
	h.dispatch(d("lost1", "echo"), d("lost2", "echo"))
	ctx := waitCtx(t)
	if _, err := h.rec.Wait(ctx, func(v recordertest.Snapshot) bool { return len(v.Handed) == 2 }); err != nil {
		t.Fatal(err)
	}
	// They run only once the recorder fails, so no result can be posted before.
	h.rec.Fail(500)
	h.ready()
	for !strings.Contains(h.logs.String(), "gave up posting dispatch results") {
		select {
		case <-ctx.Done():
			t.Fatalf("never gave up:\n%s", h.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The second result, a moment younger, is given up in the same outage: counted,
	// and said in one line at the end, not one each.
	h.ex.Close(ctx)
	if n := strings.Count(h.logs.String(), "gave up posting dispatch results"); n != 1 {
		t.Fatalf("%d give-up lines, want one:\n%s", n, h.logs.String())
	}
	if n := strings.Count(h.logs.String(), "gave up posting"); n > 2 {
		t.Fatalf("%d lines about giving up, want at most two:\n%s", n, h.logs.String())
	}
	attempts := 0
	for _, r := range h.rec.Requests() {
		if r.Path == "/proxy/result" {
			attempts++
		}
	}
	// Full jitter from 20 ms to a 400 ms cap over 2 s: about ten, never a spin.
	if attempts > 40 {
		t.Fatalf("%d result attempts in 2 s", attempts)
	}
	t.Logf("%d attempts before giving up", attempts)
}

// TestBackoffBound: over a minute of failures in a row, full jitter from 250 ms
// doubling to 30 s makes about ten attempts; even the unluckiest of many runs stays
// at a few dozen.
func TestBackoffBound(t *testing.T) {
	worst, total := 0, 0
	const runs = 20000
	for range runs {
		b := newPacer(tuning{backoffBase: 250 * time.Millisecond, backoffCap: 30 * time.Second})
		n := 1
		for elapsed := b.next(0); elapsed < time.Minute; elapsed += b.next(0) {
			n++
		}
		worst = max(worst, n)
		total += n
	}
	t.Logf("attempts in a minute: mean %.1f, worst of %d runs %d", float64(total)/runs, runs, worst)
	if worst > 36 {
		t.Fatalf("%d attempts in a minute", worst)
	}
	b := newPacer(tuning{backoffBase: time.Second, backoffCap: 30 * time.Second})
	for range 3 {
		if w := b.next(10 * time.Second); w < 10*time.Second {
			t.Fatalf("Retry-After not honoured: %s", w)
		}
	}
	if w := b.next(time.Hour); w != 30*time.Second {
		t.Fatalf("Retry-After not clamped to the cap: %s", w)
	}
}

// pacedRecorder is a Recorder for a synctest bubble that hands out nothing: it holds
// each poll for the waitMs the poll asks, or for hold when that is set (a recorder
// that answers polls early), and counts the polls.
type pacedRecorder struct {
	polls atomic.Int64
	hold  atomic.Int64 // a time.Duration; 0: as long as waitMs asks
}

func (r *pacedRecorder) ProxyID() string                                    { return "p" }
func (r *pacedRecorder) Reregister() uint64                                 { return 0 }
func (r *pacedRecorder) WaitRegistered(ctx context.Context, _ uint64) error { return ctx.Err() }
func (r *pacedRecorder) Post(ctx context.Context, path string, body []byte, _ int64) (recorder.Answer, error) {
	if path != "/proxy/poll" {
		return recorder.Answer{Status: 200}, nil
	}
	r.polls.Add(1)
	hold := time.Duration(r.hold.Load())
	if hold == 0 {
		hold = time.Duration(gjson.GetBytes(body, "waitMs").Int()) * time.Millisecond
	}
	select {
	case <-time.After(hold):
		return recorder.Answer{Status: 200, Body: []byte(`{"dispatches":[]}`)}, nil
	case <-ctx.Done():
		return recorder.Answer{}, ctx.Err()
	}
}

// TestPollsArePaced: idle, the executor makes one poll per waitMs; a recorder that
// answers polls at once gets them paced by the backoff, not a spin. In fake time: the
// counts are of exactly 2 s, whatever the machine's load.
func TestPollsArePaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &pacedRecorder{}
		ex := Start(Config{Recorder: rec, Upstream: newFakeUpstream(), Gate: NewGate(nil), Logger: slog.New(slog.DiscardHandler),
			tuning: tuning{wait: 400 * time.Millisecond, backoffBase: 100 * time.Millisecond, backoffCap: 200 * time.Millisecond}})
		defer ex.Close(context.Background()) // on a failure too: the bubble must end empty
		time.Sleep(2*time.Second - time.Millisecond)
		synctest.Wait()
		// Polls at 0, 0.4, ... 1.6 s.
		if n := rec.polls.Load(); n != 5 {
			t.Fatalf("%d polls in 2 s with waitMs 400, want 5", n)
		}
		// Answered after 1 ms, far less than a tenth of waitMs: the loop would spin
		// at one poll a millisecond if nothing paced it.
		rec.hold.Store(int64(time.Millisecond))
		time.Sleep(time.Second) // the poll held for waitMs ends
		synctest.Wait()
		before := rec.polls.Load()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		// Backoff of [0, 100..200 ms]: about twenty, never thousands.
		if n := rec.polls.Load() - before; n < 5 || n > 60 {
			t.Fatalf("%d polls in 2 s from a recorder that answers at once, want about 20", n)
		}
	})
}
