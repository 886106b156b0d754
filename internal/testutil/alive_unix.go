//go:build unix

package testutil

import (
	"errors"
	"syscall"
)

// Alive reports whether a process with this pid exists (a zombie counts:
// it has exited but not been reaped).
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
