package backoff

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

func TestStep(t *testing.T) {
	for _, c := range []struct {
		p        Policy
		failures int
		want     time.Duration
	}{
		// Recorder delivery: 500 ms doubling to 30 s.
		{Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second}, 0, 500 * time.Millisecond},
		{Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second}, 3, 4 * time.Second},
		{Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second}, 6, 30 * time.Second},
		{Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second}, 1 << 40, 30 * time.Second},
		// The exporter: 1 s doubling to 32 s.
		{Policy{Base: time.Second, Cap: 32 * time.Second}, 5, 32 * time.Second},
		{Policy{Base: time.Second, Cap: 32 * time.Second}, 4, 16 * time.Second},
		// A stream's reconnection: 1 s growing by half to 30 s.
		{Policy{Base: time.Second, Cap: 30 * time.Second, Factor: 1.5}, 2, 2250 * time.Millisecond},
		{Policy{Base: time.Second, Cap: 30 * time.Second, Factor: 1.5}, 9, 30 * time.Second},
		// A base past the cap, or none: the cap.
		{Policy{Base: time.Minute, Cap: time.Second}, 0, time.Second},
		{Policy{Cap: time.Second}, 0, time.Second},
		// No overflow however large the cap.
		{Policy{Base: time.Nanosecond, Cap: 1<<63 - 1}, 200, 1<<63 - 1},
	} {
		if got := c.p.Step(c.failures); got != c.want {
			t.Errorf("%+v.Step(%d) = %v, want %v", c.p, c.failures, got, c.want)
		}
	}
}

func TestNextJitter(t *testing.T) {
	p := Policy{Base: 250 * time.Millisecond, Cap: 30 * time.Second}
	for _, c := range []struct {
		j      Jitter
		lo, hi time.Duration // of the wait at the cap
	}{{Full, 0, 30 * time.Second}, {Half, 15 * time.Second, 30 * time.Second}, {None, 30 * time.Second, 30 * time.Second}} {
		p.Jitter = c.j
		seen := map[time.Duration]bool{}
		for range 200 {
			w := p.Next(40, 0)
			if w < c.lo || w > c.hi {
				t.Fatalf("jitter %d: %v outside [%v, %v]", c.j, w, c.lo, c.hi)
			}
			seen[w] = true
		}
		if spread := len(seen) > 1; spread != (c.j != None) {
			t.Errorf("jitter %d: %d distinct waits in 200", c.j, len(seen))
		}
	}
}

func TestNextRetryAfter(t *testing.T) {
	p := Policy{Base: time.Second, Cap: 30 * time.Second, Jitter: None}
	for _, c := range []struct {
		p          Policy
		retryAfter time.Duration
		want       time.Duration
	}{
		{p, 7 * time.Second, 7 * time.Second},    // honoured
		{p, 10 * time.Minute, 30 * time.Second},  // up to the cap
		{p, 500 * time.Millisecond, time.Second}, // never shortens the wait
		{Policy{Base: time.Second, Cap: 32 * time.Second, Jitter: None, MaxRetryAfter: time.Minute}, 1e9 * time.Second, time.Minute}, // its own bound
	} {
		if got := c.p.Next(0, c.retryAfter); got != c.want {
			t.Errorf("%+v.Next(0, %v) = %v, want %v", c.p, c.retryAfter, got, c.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"3": 3 * time.Second, "0": 0, "-1": 0, "x": 0, "": 0, " 3": 0, "3.5": 0,
		"1000000000":          24 * time.Hour, // a hostile peer's 10^9 s
		"9999999999999999999": 0,              // not an int: unreadable
		now.Add(5 * time.Second).Format(http.TimeFormat):           5 * time.Second,
		now.Add(-5 * time.Second).Format(http.TimeFormat):          0,
		now.Add(1e6 * time.Hour).Format(http.TimeFormat):           24 * time.Hour,
		"Thu, 01 Jan 2026 00:00:05 GMT" + string(make([]byte, 64)): 0,
	} {
		if got := RetryAfter(v, now); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"3", "0", "-1", "1000000000", "Thu, 01 Jan 2026 00:00:05 GMT", "Thursday, 01-Jan-26 00:00:05 GMT", "Thu Jan  1 00:00:05 2026"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d := RetryAfter(v, now); d < 0 || d > 24*time.Hour {
			t.Fatalf("%q: %v", v, d)
		}
	})
}

// Sleep waits the whole time, or ends with ctx and says so.
func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		start := time.Now()
		if !Sleep(ctx, 3*time.Second) || time.Since(start) != 3*time.Second {
			t.Fatalf("slept %v", time.Since(start))
		}
		ctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(time.Second, cancel)
		start = time.Now()
		if Sleep(ctx, time.Hour) || time.Since(start) != time.Second {
			t.Fatalf("a cancelled sleep: %v", time.Since(start))
		}
		if Sleep(ctx, 0) {
			t.Fatal("no wait on an ended ctx reported as passed")
		}
		if !Sleep(context.Background(), -time.Second) {
			t.Fatal("no wait reported as cut")
		}
	})
}

// A loop paced by Next against a peer down for a minute makes a bounded number of
// attempts, in the clock the bubble fakes.
func TestNextPacesALoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Policy{Base: 250 * time.Millisecond, Cap: 30 * time.Second, Jitter: None}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		attempts := 0
		for failures := 0; ctx.Err() == nil; failures++ {
			attempts++
			Sleep(ctx, p.Next(failures, 0))
		}
		// 0.25+0.5+1+2+4+8+16 = 31.75 s after 7 attempts; the 8th's 30 s wait ends
		// with the minute.
		if attempts != 8 {
			t.Fatalf("%d attempts in a minute", attempts)
		}
	})
}
