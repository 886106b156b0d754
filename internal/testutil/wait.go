package testutil

import (
	"context"
	"os"
	"testing"
	"time"
)

// Guard bounds every wait in a test, so a broken test fails with a message instead of
// hanging until go test's own timeout. It is far above anything a passing run needs,
// even on two loaded cores under the race detector; it is not a performance bound.
const Guard = 2 * time.Minute

// Context returns a context that ends after Guard or when the test's cleanups are
// done, whichever is first. Unlike tb.Context, it is still live in a cleanup.
func Context(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Guard)
	tb.Cleanup(cancel)
	return ctx
}

// Recv returns the next value on ch, failing tb if none comes within Guard. what
// names the awaited event for the failure message.
func Recv[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	t := time.NewTimer(Guard)
	defer t.Stop()
	select {
	case v := <-ch:
		return v
	case <-t.C:
		tb.Fatalf("waited %v for %s", Guard, what)
		panic("unreachable")
	}
}

// Eventually waits until cond holds, failing tb after Guard. It is for what a test
// can only see by looking (a file another process writes); where there is an event
// to wait on, wait on that instead. cond is looked at every few milliseconds.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(Guard)
	for pace := time.Millisecond; !cond(); pace = min(2*pace, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("waited %v for %s", Guard, what)
		}
		time.Sleep(pace)
	}
}

// InCI reports whether the tests run in CI (CI set, as CI services do, and not to
// false): there a test whose prerequisite is missing fails instead of skipping.
func InCI() bool {
	ci := os.Getenv("CI")
	return ci != "" && ci != "false" && ci != "0"
}
