package upstream

import "errors"

// UndeliveredError is what Read returns when messages a Holder accepted will reach no
// server after all (none came back in time, or the session is down): the reader
// answers each request in them, as it answers a failed Write. The Conn goes on; the
// next Read reads on.
type UndeliveredError struct {
	Msgs   [][]byte
	Reason string
}

func (e *UndeliveredError) Error() string {
	return "messages that reached no server: " + e.Reason
}

// IsUndelivered reports whether err says held messages reached no server.
func IsUndelivered(err error) (*UndeliveredError, bool) {
	var ue *UndeliveredError
	ok := errors.As(err, &ue)
	return ue, ok
}
