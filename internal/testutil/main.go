package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// helperEnv names the helper a test binary started by HelperCommand runs instead of
// its tests.
const helperEnv = "BIR_TEST_HELPER"

// helperFlag keeps a binary that was not built with MainWithHelpers (and so ignores
// helperEnv) from running every test again in the child.
const helperFlag = "-test.run=^$"

// Main is a package's TestMain: it runs the tests, then fails the run if any goroutine
// they started is still there (CheckGoroutines). Every package's tests use it.
func Main(m *testing.M) { MainWithHelpers(m, nil) }

// MainWithHelpers is Main for a test binary that doubles as helper processes: started
// by HelperCommand(tb, name, args...), it runs helpers[name](args) instead of the tests
// and exits with its status. The helper's environment no longer names it, so
// processes it starts are not helpers too.
func MainWithHelpers(m *testing.M, helpers map[string]func(args []string) int) {
	if name, ok := os.LookupEnv(helperEnv); ok {
		os.Unsetenv(helperEnv)
		h := helpers[name]
		if h == nil {
			fmt.Fprintf(os.Stderr, "testutil: this test binary has no helper %q\n", name)
			os.Exit(2)
		}
		args := os.Args[1:]
		if len(args) > 0 && args[0] == helperFlag {
			args = args[1:]
		}
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		os.Exit(h(args))
	}
	os.Exit(runAndCheck(m))
}

// leakWait is how long the goroutines left after the tests get to end before they
// count as leaked; a leaked goroutine is blocked for good, so only a failing run
// waits this long.
var leakWait = 10 * time.Second

func runAndCheck(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if err := CheckGoroutines(leakWait); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	return 0
}

// HelperCommand returns a command that runs this test binary as the helper process
// name with args (see MainWithHelpers).
func HelperCommand(tb testing.TB, name string, args ...string) *exec.Cmd {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatalf("testutil: finding the test binary: %v", err)
	}
	cmd := exec.Command(exe, append([]string{helperFlag, "--"}, args...)...)
	cmd.Env = append(os.Environ(), HelperEnv(name))
	return cmd
}

// HelperEnv is the environment entry that makes this test binary run helper name, for
// a command line built by something other than HelperCommand (HelperCommand's Args,
// started by another program).
func HelperEnv(name string) string { return helperEnv + "=" + name }
