//go:build unix

package main

import (
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// hostStdio returns the host's ends of the session, choosing how the proxy waits on
// them by what was measured (docs/PERFORMANCE.md):
//
//   - on one CPU, stdin and stdout go in non-blocking mode, on the runtime's poller: a
//     goroutine parked in a blocking read there costs a thread handoff per message
//     (≈290 µs a round trip against ≈70 µs through the poller);
//   - with two CPUs or more they stay blocking: each pump's thread sleeps in read and
//     wakes straight into its goroutine, which measured ≈20% faster per round trip than
//     a wakeup through the poller.
//
// BIR_BLOCKING_STDIO=1 or 0 forces one mode, for measuring. restore puts the
// descriptors back in blocking mode: the flag belongs to the open file description,
// which the host or a shell may share, and a program reading it after us would get
// EAGAIN.
func hostStdio(log *slog.Logger) (in io.Reader, out io.Writer, restore func()) {
	blocking := runtime.NumCPU() >= 2
	if v, err := strconv.ParseBool(os.Getenv("BIR_BLOCKING_STDIO")); err == nil {
		blocking = v
	}
	if blocking {
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
		// The *os.File closes fd 0/1 when it is collected; until the proxy is done
		// with them it must stay reachable, whoever else still holds it.
		runtime.KeepAlive(f)
	}
}
