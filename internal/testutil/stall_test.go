package testutil

import (
	"testing"
	"time"
)

// The watch's own check: a gap it recorded counts only where it overlaps the span
// asked about (a watch with no heartbeat, so that this machine's own stalls do not
// add to the one put in).
func TestStallWatchCountsOverlapOnly(t *testing.T) {
	t0 := time.Now()
	w := &StallWatch{gaps: [][2]time.Time{{t0.Add(time.Second), t0.Add(3 * time.Second)}}}
	for _, c := range []struct {
		from, to time.Duration
		want     time.Duration
	}{
		{0, time.Second, 0},
		{0, 2 * time.Second, time.Second},
		{1500 * time.Millisecond, 2500 * time.Millisecond, time.Second},
		{2 * time.Second, 10 * time.Second, time.Second},
		{0, 10 * time.Second, 2 * time.Second},
	} {
		if got := w.Stalled(t0.Add(c.from), t0.Add(c.to)); got != c.want {
			t.Errorf("Stalled(+%s, +%s) = %s, want %s", c.from, c.to, got, c.want)
		}
	}
}
