package upstream

import "errors"

// Holder is a Conn that keeps the host's messages while no server can take them (the
// server behind it died and the next one is not up yet) and delivers them, in order,
// to the next server, rather than failing the writes: a host with calls in flight
// against a server that crashes would otherwise see every call it sent in the few
// milliseconds of a restart fail.
type Holder interface {
	// Held returns the messages accepted and not yet written to any server, oldest
	// first. The reader asks while it settles a ReplacedError, with no write under
	// way: the requests in them were not received by the server that went away, so
	// they are not its losses; they are answered by the next server, or reported
	// later in an UndeliveredError.
	Held() [][]byte
}

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
