package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// leaky says it runs, then blocks until stop is closed: the goroutine a test forgot
// to end.
func leaky(running chan<- struct{}, stop <-chan struct{}) {
	close(running)
	<-stop
}

// startLeaky starts leaky and returns, with the channel that ends it, once leaky runs:
// before that its stack does not name it yet.
func startLeaky(t *testing.T) chan struct{} {
	stop, running := make(chan struct{}), make(chan struct{})
	go leaky(running, stop)
	Recv(t, running, "the leaky goroutine to start")
	return stop
}

// TestCheckGoroutinesSeesALeak proves the checker every TestMain relies on finds a
// goroutine left running, names it, and lets it go once it ended; a checker that
// passed everything would make every package's leak check prove nothing.
func TestCheckGoroutinesSeesALeak(t *testing.T) {
	if err := CheckGoroutines(leakWait); err != nil {
		t.Fatalf("before any leak: %v", err)
	}
	stop := startLeaky(t)
	err := CheckGoroutines(50 * time.Millisecond)
	close(stop)
	if err == nil {
		t.Fatal("a goroutine blocked for good went unnoticed")
	}
	if !strings.Contains(err.Error(), "testutil.leaky(") || !strings.Contains(err.Error(), "1 goroutine(s)") {
		t.Fatalf("the leak was noticed, but the report does not show its stack:\n%v", err)
	}
	if err := CheckGoroutines(leakWait); err != nil {
		t.Fatalf("a goroutine that ended still counts as leaked: %v", err)
	}

	t.Run("NoGoroutines", func(t *testing.T) {
		stop := startLeaky(t)
		var rec recordingTB
		rec.TB = t
		noGoroutines(&rec, 50*time.Millisecond, []string{"testutil.leaky("})
		close(stop)
		if !rec.failed || !strings.Contains(rec.msg, "testutil.leaky(") {
			t.Fatalf("NoGoroutines did not fail on a running leaky goroutine: failed %v, %q", rec.failed, rec.msg)
		}
		NoGoroutines(t, "testutil.leaky(") // and passes once it is gone
	})
}

// recordingTB records an Errorf instead of failing the test.
type recordingTB struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
}

const leakRunEnv = "BIR_TESTUTIL_LEAKY_RUN"

// TestMainFailsALeakyRun runs this test binary again with only this test, which then
// leaves a goroutine behind and passes: Main must fail that run and show the
// goroutine's stack.
func TestMainFailsALeakyRun(t *testing.T) {
	if os.Getenv(leakRunEnv) == "1" {
		leakWait = 100 * time.Millisecond
		startLeaky(t)
		return
	}
	cmd := exec.CommandContext(Context(t), os.Args[0], "-test.run=^TestMainFailsALeakyRun$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), leakRunEnv+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("a run whose test leaked a goroutine ended with %v, want exit status 1:\n%s", err, out)
	}
	for _, want := range []string{"--- PASS: TestMainFailsALeakyRun", "FAIL: 1 goroutine(s) outlived the tests", "testutil.leaky("} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the leaky run's output lacks %q:\n%s", want, out)
		}
	}
}
