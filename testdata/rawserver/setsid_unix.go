//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// setsid makes cmd leave our session and process group, as a detached spawn does.
func setsid(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }
