//go:build unix

package recorder

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// quiet reports whether an idle connection has nothing to read and is still open:
// one non-blocking peek at the socket (MSG_PEEK|MSG_DONTWAIT), which takes nothing
// from it. A read with a deadline already passed would not do: Go fails it before it
// looks at the socket.
func quiet(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		for {
			n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN || err == unix.EWOULDBLOCK:
				ok = true // nothing there, and open
			default:
				ok = false // bytes waiting (n > 0), the recorder's end (n == 0), or an error
				_ = n
			}
			return true
		}
	})
	return ok && err == nil
}
