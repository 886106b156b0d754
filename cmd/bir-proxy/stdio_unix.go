//go:build unix

package main

import (
	"io"
	"log/slog"
	"os"

	"golang.org/x/sys/unix"
)

// hostStdio returns the host's ends of the session with stdin and stdout in
// non-blocking mode, so reads and writes park on the runtime's poller instead of
// holding an OS thread in a blocking syscall. On one CPU a blocking stdin costs a thread
// handoff per message (hundreds of µs); through the poller the proxy stays near the
// floor (docs/PERFORMANCE.md has the measurements). BIR_BLOCKING_STDIO=1 keeps the
// blocking mode, for comparison.
//
// restore puts the descriptors back in blocking mode: the flag belongs to the open file
// description, which the host or a shell may share, and a program reading it after us
// would get EAGAIN.
func hostStdio(log *slog.Logger) (in io.Reader, out io.Writer, restore func()) {
	if os.Getenv("BIR_BLOCKING_STDIO") == "1" {
		return os.Stdin, os.Stdout, func() {}
	}
	in, restoreIn := pollable(0, "stdin", log)
	out, restoreOut := pollable(1, "stdout", log)
	return in, out, func() { restoreOut(); restoreIn() }
}

func pollable(fd int, name string, log *slog.Logger) (*os.File, func()) {
	// A terminal (or /dev/null) is a character device shared with the user's shell;
	// leave it alone: nobody relays MCP over a terminal in earnest.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFCHR {
		return os.NewFile(uintptr(fd), name), func() {}
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return os.NewFile(uintptr(fd), name), func() {}
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		log.Debug("could not make host stdio non-blocking", "fd", name, "err", err)
		return os.NewFile(uintptr(fd), name), func() {}
	}
	// os.NewFile sees the non-blocking flag and registers the descriptor with the
	// runtime poller.
	f := os.NewFile(uintptr(fd), name)
	return f, func() {
		if flags&unix.O_NONBLOCK == 0 {
			_ = unix.SetNonblock(fd, false)
		}
	}
}
