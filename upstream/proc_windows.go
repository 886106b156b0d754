package upstream

import (
	"os"
	"os/exec"
)

type signal int

const (
	sigTerm signal = iota
	sigKill
)

func setProcAttr(*exec.Cmd) {}

func enlargePipe(*os.File) {}

// signalGroup on Windows can only kill: there is no SIGTERM to ask with, so the gentle
// steps of the stop sequence are stdin closing and the grace period before it.
func signalGroup(cmd *exec.Cmd, sig signal) {
	if cmd.Process == nil || sig != sigKill {
		return
	}
	_ = cmd.Process.Kill()
}

func signalOf(*os.ProcessState) (int, bool) { return 0, false }

func signalName(int) string { return "" }
