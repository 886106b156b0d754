//go:build unix && !linux

package upstream

import (
	"os"
	"os/exec"
	"syscall"
)

func setProcAttr(cmd *exec.Cmd) {
	// Its own group, so the stop sequence reaches the server's own children. There is
	// no parent-death signal here: a proxy killed by SIGKILL leaves the server to
	// notice its stdin closing.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func enlargePipe(*os.File) {}
