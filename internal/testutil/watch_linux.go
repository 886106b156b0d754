package testutil

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// WaitExit waits until the process pid has exited, whoever its parent is,
// or ctx ends. It is for processes a test did not start itself, such as the
// upstream a proxy started or that upstream's children. A pid that no longer
// exists counts as exited.
func WaitExit(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("watching pid %d: %w", pid, err)
	}
	defer unix.Close(fd)
	for {
		// The pidfd turns readable when the process exits; the short poll
		// timeout only bounds how late a cancelled ctx is noticed.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 50)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("watching pid %d: %w", pid, err)
		}
		if n > 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for pid %d to exit: %w", pid, err)
		}
	}
}
