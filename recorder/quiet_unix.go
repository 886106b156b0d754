//go:build unix

package recorder

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peeker looks at an idle connection's socket without taking anything from it. Made
// once per connection, so that a look allocates nothing.
type peeker struct {
	rc  syscall.RawConn
	fn  func(fd uintptr) bool // p.look, as a func made once
	ok  bool
	buf [1]byte
}

func newPeeker(nc net.Conn) *peeker {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &peeker{rc: rc}
	p.fn = p.look
	return p
}

// quiet reports whether the connection has nothing to read and is still open: one
// non-blocking peek at the socket (MSG_PEEK|MSG_DONTWAIT). A read with a deadline
// already passed would not do: Go fails it before it looks at the socket.
func (p *peeker) quiet() bool {
	if p == nil {
		return true
	}
	p.ok = false
	if err := p.rc.Read(p.fn); err != nil {
		return false
	}
	return p.ok
}

func (p *peeker) look(fd uintptr) bool {
	for {
		err := peekSocket(fd, p.buf[:])
		if err == unix.EINTR {
			continue
		}
		// Nothing there and open; anything else is bytes waiting, the recorder's end
		// of the connection (0 bytes), or an error.
		p.ok = err == unix.EAGAIN || err == unix.EWOULDBLOCK
		return true
	}
}
