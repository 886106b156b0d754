//go:build unix

package upstream

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

type signal = syscall.Signal

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// signalGroup signals the server's whole process group. MCP servers are often launchers
// (npx, uvx, docker, sh -c) whose real work happens in a grandchild; signalling only the
// launcher would leave that grandchild running.
func signalGroup(cmd *exec.Cmd, sig signal) {
	if cmd.Process == nil {
		return
	}
	err := syscall.Kill(-cmd.Process.Pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		// Not a group leader after all (it called setsid): the process alone, then.
		_ = cmd.Process.Signal(sig)
	}
}

func signalOf(st *os.ProcessState) (int, bool) {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return int(ws.Signal()), true
}

func signalName(sig int) string { return syscall.Signal(sig).String() }
