package upstream

import (
	"errors"
	"io"
)

// EndedError is what Read returns when the server behind the Conn went away for good
// before it served the session (it exited before answering anything), and the host
// is to be told why: hosts show a server's stderr to almost nobody, and "Connection
// closed" is no clue. The reader answers every request in flight with Reason, answers
// each request the host sends from then on the same way, and ends the session once
// the host has had its answers. Read returns io.EOF after it.
type EndedError struct {
	// Reason names the server and the cause: its exit status and last stderr lines,
	// or the exec error of a command that could not be started.
	Reason string
}

func (e *EndedError) Error() string { return e.Reason }

// IsEnded reports whether err says the server ended before serving the session.
func IsEnded(err error) (*EndedError, bool) {
	var ee *EndedError
	ok := errors.As(err, &ee)
	return ee, ok
}

// NoServer is the Conn of a server that could not be started at all: its Read says
// so once (an EndedError with Reason), then ends; its writes fail with Reason; its
// exit status is Code (127 for a command not found, 126 otherwise, as a shell's).
type NoServer struct {
	Reason string
	Code   int

	said bool // Read: touched by the reading goroutine only
}

// Read returns the EndedError once, then io.EOF.
func (n *NoServer) Read() ([]byte, error) {
	if !n.said {
		n.said = true
		return nil, &EndedError{Reason: n.Reason}
	}
	return nil, io.EOF
}

// Write fails: there is no server.
func (n *NoServer) Write([]byte) error { return errors.New(n.Reason) }

// Close ends nothing: nothing was started.
func (n *NoServer) Close() error { return nil }

// Capabilities: a NoServer only has an exit status.
func (n *NoServer) Capabilities() Capabilities { return Capabilities{Exiter: n} }

// ExitCode is Code.
func (n *NoServer) ExitCode() int { return n.Code }
