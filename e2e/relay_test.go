package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// The test binary doubles as two stand-ins for the proxy, so the suite's own
// sensitivity can be proven without it: started as the helper "relay" (see
// testutil.HelperCommand), TestMain runs a relay instead of the tests.
//   - "relay copy COMMAND...": starts the server command and copies bytes both ways,
//     nothing else.
//   - "relay corrupt COMMAND...": the same, except that the first occurrence of
//     $BIR_E2E_CORRUPT_FROM in what the server writes becomes $BIR_E2E_CORRUPT_TO.
const (
	relayFromEnv = "BIR_E2E_CORRUPT_FROM"
	relayToEnv   = "BIR_E2E_CORRUPT_TO"
)

// TestMain runs the tests (failing a run that leaks a goroutine) or a stand-in relay.
func TestMain(m *testing.M) {
	testutil.MainWithHelpers(m, map[string]func([]string) int{"relay": relayMain})
}

func relayMain(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "e2e relay: usage: relay copy|corrupt COMMAND [ARGS...]")
		return 2
	}
	if err := runRelay(args[0], args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "e2e relay: %v\n", err)
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		return 1
	}
	return 0
}

// relay returns the launch that puts a stand-in relay in front of the server.
func (s *suite) relay(t *testing.T, mode string, callIDs bool, env ...string) launch {
	argv := testutil.HelperCommand(t, "relay", mode).Args
	return launch{
		mode:    "relay-" + mode,
		wrap:    func(scenario) []string { return argv },
		env:     append([]string{testutil.HelperEnv("relay")}, env...),
		callIDs: callIDs,
	}
}

func runRelay(mode string, command []string) error {
	var from, to []byte
	switch mode {
	case "copy":
	case "corrupt":
		from, to = []byte(os.Getenv(relayFromEnv)), []byte(os.Getenv(relayToEnv))
		if len(from) == 0 {
			return fmt.Errorf("%s is empty", relayFromEnv)
		}
	default:
		return fmt.Errorf("unknown relay mode %q", mode)
	}
	child := exec.Command(command[0], command[1:]...)
	// The server must see the environment it would see without the relay, or the
	// env-printing tools would tell the runs apart.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BIR_E2E_") {
			child.Env = append(child.Env, kv)
		}
	}
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return err
	}
	go func() {
		_, _ = io.Copy(stdin, os.Stdin)
		stdin.Close()
	}()
	if from == nil {
		_, err = io.Copy(os.Stdout, stdout)
	} else {
		err = copyCorrupting(os.Stdout, stdout, from, to)
	}
	if werr := child.Wait(); werr != nil {
		return werr
	}
	return err
}

// copyCorrupting copies line by line and changes the first occurrence of from.
func copyCorrupting(dst io.Writer, src io.Reader, from, to []byte) error {
	r := bufio.NewReaderSize(src, 1<<16)
	done := false
	for {
		line, err := r.ReadBytes('\n')
		if !done && bytes.Contains(line, from) {
			line = bytes.Replace(line, from, to, 1)
			done = true
		}
		if _, werr := dst.Write(line); werr != nil {
			return werr
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
