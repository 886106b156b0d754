package testutil

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CheckGoroutines waits up to wait for every goroutine except the caller's and those
// that belong to the runtime or the testing package to end, and returns an error
// showing the stacks of those still there. A goroutine that has done its work may
// still be on its last instructions, so the leftovers are looked at again until the
// wait is over (goleak does the same); a leaked one is blocked for good.
func CheckGoroutines(wait time.Duration) error {
	left := waitGoroutines(wait, func(string) bool { return true })
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("%d goroutine(s) outlived the tests by %v:\n\n%s", len(left), wait, strings.Join(left, "\n\n"))
}

// NoGoroutines fails tb if, within a few seconds, goroutines running any of funcs
// (substrings of a stack, such as "recorder.(*Reporter).commitLoop") are still there:
// for a test that checks that a Close ended what it owned.
func NoGoroutines(tb testing.TB, funcs ...string) {
	tb.Helper()
	noGoroutines(tb, 5*time.Second, funcs)
}

func noGoroutines(tb testing.TB, wait time.Duration, funcs []string) {
	tb.Helper()
	left := waitGoroutines(wait, func(stack string) bool {
		for _, f := range funcs {
			if strings.Contains(stack, f) {
				return true
			}
		}
		return false
	})
	if len(left) > 0 {
		tb.Errorf("%d goroutine(s) still running %v after %v:\n\n%s", len(left), funcs, wait, strings.Join(left, "\n\n"))
	}
}

func waitGoroutines(wait time.Duration, match func(stack string) bool) []string {
	deadline := time.Now().Add(wait)
	for pace := time.Millisecond; ; pace = min(2*pace, 100*time.Millisecond) {
		left := goroutines(match)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(pace)
	}
}

// goroutines returns the stacks of the goroutines that match, leaving out the caller's
// and the expected ones.
func goroutines(match func(stack string) bool) []string {
	self := goroutineID(stacks(false))
	var out []string
	for _, g := range strings.Split(stacks(true), "\n\n") {
		g = strings.TrimSpace(g)
		if g == "" || goroutineID(g) == self || expected(g) || !match(g) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func stacks(all bool) string {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, all)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// goroutineID reads N from a stack's first line, "goroutine N [state]:".
func goroutineID(stack string) int {
	rest, ok := strings.CutPrefix(stack, "goroutine ")
	if !ok {
		return -1
	}
	end := strings.IndexByte(rest, ' ')
	if end < 0 {
		return -1
	}
	id, err := strconv.Atoi(rest[:end])
	if err != nil {
		return -1
	}
	return id
}

// expectedFuncs start the functions of goroutines that are no test's doing: the
// testing package's own, and the signal watcher os/signal starts once for good.
var expectedFuncs = []string{
	"testing.",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
}

// expected reports whether any frame of stack (not its "created by" line) is in a
// function of expectedFuncs.
func expected(stack string) bool {
	lines := strings.Split(stack, "\n")
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "created by ") {
			continue
		}
		for _, f := range expectedFuncs {
			if strings.HasPrefix(l, f) {
				return true
			}
		}
	}
	return false
}
