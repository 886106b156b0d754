//go:build unix && !linux

package recorder

import "golang.org/x/sys/unix"

// peekSocket is recv(fd, b, MSG_PEEK|MSG_DONTWAIT): nil when there were bytes or
// the peer's end, the error otherwise.
func peekSocket(fd uintptr, b []byte) error {
	_, _, err := unix.Recvfrom(int(fd), b, unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err
}
