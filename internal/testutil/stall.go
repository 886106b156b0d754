package testutil

import (
	"sync"
	"testing"
	"time"
)

// StallWatch notices when the test's own process stops running for a while (a GC
// of a neighbour test's 100 MB buffers, the machine's other load): a goroutine that
// wakes every few milliseconds keeps the gaps it saw. A latency check subtracts
// them, so what it measures is the program under test, not the test's process
// being descheduled while it waited for an answer.
type StallWatch struct {
	mu   sync.Mutex
	gaps [][2]time.Time // the heartbeat's gaps over stallGap, oldest first
	stop chan struct{}
	done chan struct{}
}

const (
	heartbeat = 5 * time.Millisecond
	stallGap  = 50 * time.Millisecond
)

// WatchStalls starts a StallWatch that ends with the test.
func WatchStalls(t testing.TB) *StallWatch {
	w := &StallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(heartbeat)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-w.stop:
				return
			case now := <-tick.C:
				now = time.Now() // the tick's time is when it was due, not when it ran
				if now.Sub(last) > stallGap {
					w.mu.Lock()
					w.gaps = append(w.gaps, [2]time.Time{last, now})
					w.mu.Unlock()
				}
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(w.stop); <-w.done })
	return w
}

// Stalled is how much of [from, to] the test's process was seen not running.
func (w *StallWatch) Stalled(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var d time.Duration
	for _, g := range w.gaps {
		start, end := g[0], g[1]
		if start.Before(from) {
			start = from
		}
		if end.After(to) {
			end = to
		}
		if end.After(start) {
			d += end.Sub(start)
		}
	}
	return d
}
