package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// helperEnv names the helper a test binary started by HelperCommand runs instead of
// its tests.
const helperEnv = "BIR_TEST_HELPER"

// helperFlag keeps a binary that was not built with MainWithHelpers (and so ignores
// helperEnv) from running every test again in the child.
const helperFlag = "-test.run=^$"

// MainWithHelpers is the TestMain of a test binary that doubles as helper processes:
// started by HelperCommand(tb, name, args...), it runs helpers[name](args) instead of
// the tests and exits with its status. The helper's environment no longer names it, so
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
	os.Exit(m.Run())
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
