package replay

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bir-dev/bir-proxy/recorder"

	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// TestTimeoutMsIsClamped: timeoutMs 1e300 overflowed time.Duration to a
// negative wait, so the dispatch timed out the moment it arrived. SPEC §4 clamps
// timeoutMs to [1, 3,600,000]: past the range it is an hour, below it a millisecond;
// a value that is not a number refuses the dispatch; null is no timeout.
func TestTimeoutMsIsClamped(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		raw  string
		want time.Duration // -1: refused
	}{
		{"1e300", time.Hour},
		{"1e400", time.Hour}, // past float64: +Inf
		{strconv.Itoa(math.MaxInt64), time.Hour},
		{"3600000", time.Hour},
		{"3600001", time.Hour},
		{"250", 250 * time.Millisecond},
		{"1.5", 1500 * time.Microsecond},
		{"1", time.Millisecond},
		{"0.5", time.Millisecond},
		{"0", time.Millisecond},
		{"-5", time.Millisecond},
		{"-1e400", time.Millisecond},
		{"null", 0},
		{`"5"`, -1},
		{"true", -1},
		{"[5]", -1},
	} {
		body := `{"dispatches":[{"dispatchId":"d","tool":"echo","arguments":{},"timeoutMs":` + c.raw + `}]}`
		a, ok := parsePoll([]byte(body), now, 10)
		if !ok || len(a.dispatches) != 1 {
			t.Fatalf("timeoutMs %s: the answer was not read (%v, %d dispatches)", c.raw, ok, len(a.dispatches))
		}
		d := a.dispatches[0]
		switch {
		case c.want < 0:
			if d.refused == "" {
				t.Errorf("timeoutMs %s: not refused (timeout %v)", c.raw, d.timeout)
			}
		case d.refused != "":
			t.Errorf("timeoutMs %s: refused: %s", c.raw, d.refused)
		case d.timeout != c.want:
			t.Errorf("timeoutMs %s: timeout %v, want %v", c.raw, d.timeout, c.want)
		case c.want == 0 && !d.deadline.IsZero():
			t.Errorf("timeoutMs %s: a deadline %v", c.raw, d.deadline)
		case c.want > 0 && !d.deadline.Equal(now.Add(c.want)):
			t.Errorf("timeoutMs %s: deadline %v, want %v", c.raw, d.deadline, now.Add(c.want))
		}
	}
}

// TestHugeTimeoutMsRuns: a dispatch with a timeoutMs far past the range runs
// and is answered, instead of being posted timeout at once (the overflowed deadline
// was already past when it arrived).
func TestHugeTimeoutMsRuns(t *testing.T) {
	h := start(t, tuning{})
	h.ready()
	h.dispatch(recordertest.Dispatch{DispatchID: "huge", Tool: "echo", Arguments: []byte(`{}`), TimeoutMs: math.MaxInt})
	if got := h.outcomes(t, "huge")["huge"]; got != "ok" {
		t.Fatalf("huge: %s, want ok", got)
	}
}

// bubbleRecorder is a Recorder for a synctest bubble: its first poll brings body,
// later ones are held until their context ends; results go to the results channel.
type bubbleRecorder struct {
	body    []byte
	polled  atomic.Bool
	results chan []byte
}

func (r *bubbleRecorder) ProxyID() string                                    { return "p" }
func (r *bubbleRecorder) Reregister() uint64                                 { return 0 }
func (r *bubbleRecorder) WaitRegistered(ctx context.Context, _ uint64) error { return ctx.Err() }
func (r *bubbleRecorder) Post(ctx context.Context, path string, body []byte, _ int64) (recorder.Answer, error) {
	switch path {
	case "/proxy/poll":
		if !r.polled.Swap(true) {
			return recorder.Answer{Status: 200, Body: r.body}, nil
		}
		<-ctx.Done()
		return recorder.Answer{}, ctx.Err()
	case "/proxy/result":
		r.results <- body
	}
	return recorder.Answer{Status: 200}, nil
}

// TestHugeTimeoutMsWaitsTheMaximum: in fake time, a dispatch with timeoutMs
// 1e300 that cannot run (the upstream never becomes ready) times out after exactly
// the clamp's hour, not at once.
func TestHugeTimeoutMsWaitsTheMaximum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &bubbleRecorder{
			body:    []byte(`{"dispatches":[{"dispatchId":"huge","tool":"echo","arguments":{},"timeoutMs":1e300}]}`),
			results: make(chan []byte, 1),
		}
		ex := Start(Config{Recorder: rec, Upstream: newFakeUpstream(), Gate: NewGate(nil),
			Logger: slog.New(slog.DiscardHandler)})
		defer ex.Close(context.Background()) // on a failure too: the bubble must end empty
		start := time.Now()
		time.Sleep(maxTimeout - time.Millisecond)
		synctest.Wait()
		select {
		case r := <-rec.results:
			t.Fatalf("a result after %v, before the hour: %s", time.Since(start), r)
		default:
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		select {
		case r := <-rec.results:
			if !strings.Contains(string(r), `"outcome":"timeout"`) {
				t.Fatalf("after the hour: %s", r)
			}
		default:
			t.Fatal("no result after the hour")
		}
	})
}

// TestCallParamsAreOneLine: the tools/call params a dispatch becomes are one
// compact line, the host's _meta included (a bare carriage return between its tokens
// is valid on the host's line, and relay.Call refuses any line break).
func TestCallParamsAreOneLine(t *testing.T) {
	a, ok := parsePoll([]byte("{\"dispatches\":[{\"dispatchId\":\"d\",\"tool\":\"t\\n\",\"arguments\":{ \"a\" :\r\n[1,\t2] }}]}"), time.Now(), 10)
	if !ok || len(a.dispatches) != 1 || a.dispatches[0].refused != "" {
		t.Fatalf("%v %+v", ok, a.dispatches)
	}
	got := string(callParams(a.dispatches[0], []byte("{\"io.modelcontextprotocol/protocolVersion\":\r\"2026-07-28\"}")))
	want := `{"name":"t\n","arguments":{"a":[1,2]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`
	if got != want {
		t.Fatalf("params\n%s\nwant\n%s", got, want)
	}
}
