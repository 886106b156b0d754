package recorder

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// peekSocket is recv(fd, b, MSG_PEEK|MSG_DONTWAIT): nil when there were bytes or
// the peer's end, the errno otherwise. The raw call, because unix.Recvfrom allocates
// the sender's address on every call, and this is made before every reuse of a
// connection.
func peekSocket(fd uintptr, b []byte) error {
	_, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
