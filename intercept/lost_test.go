package intercept

import (
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// TestLostSparingCostsAStepACall: a server replaced with n host calls in flight, the
// upstream holding back m of them for the next one (UpstreamLostSparing), ends the
// others. Each call's key was looked for through the m spared, in the tracker and
// in the span hook: n·m steps. With 16,000 in flight, sparing half of them must cost
// about what sparing one does (the same maps, the same caches), not thousands of
// steps a call more. (The spans' share: telemetry/mcpspans' test of the same name.)
func TestLostSparingCostsAStepACall(t *testing.T) {
	const n = 16_000
	var hosts []event
	var half []string
	var lx jsonlex.Line
	for i := range n {
		id := strconv.Itoa(i)
		msg := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"t","arguments":{"_bir_call_id":"c-` + id + `"}}}`)
		lx.Lex(msg)
		out, sc := stripLexed(msg, DefaultCorrelationKey, &lx, true)
		hosts = append(hosts, event{kind: evHost, msg: out, scan: sc, top: spansOf(&lx.Objs[0])})
		if i%2 == 1 {
			half = append(half, jsonlex.IDKey([]byte(id)))
		}
	}
	lost := func(spared []string) time.Duration {
		best := time.Duration(1 << 62)
		for range 3 {
			var interested atomic.Int64
			var parked atomic.Bool
			tr := newTracker(&countSink{}, DefaultReportCap, &interested, slog.New(slog.DiscardHandler))
			tr.later, tr.parked = func() {}, &parked
			now := time.Now()
			for _, ev := range hosts {
				ev.at = now
				tr.handle(ev)
			}
			ev := event{kind: evLost, at: now, spared: spared}
			began := time.Now()
			tr.handle(ev)
			best = min(best, time.Since(began))
			if left := len(tr.calls); left != len(spared) {
				t.Fatalf("%d calls left, want the %d spared", left, len(spared))
			}
		}
		return best
	}
	one, many := lost(half[:1]), lost(half)
	t.Logf("%d calls lost in %v sparing one, in %v sparing %d", n, one, many, len(half))
	// The same work or less (the spared are not ended), give or take a loaded
	// machine's noise (2x seen); the scan made it 150x.
	if many > 10*one {
		t.Errorf("sparing %d of %d calls took %v, %.1fx sparing one (%v)", len(half), n, many, float64(many)/float64(one), one)
	}
}
