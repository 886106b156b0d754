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

// UnansweredError is what Read returns when the server will never answer the requests
// with these raw ids, though the session goes on: the HTTP request that carried them
// failed (a 5xx, a refused credential, a connection cut before the answer), or a
// transport's own limit ended them. The reader answers each one still in flight with
// Reason, which names the server and what happened; the Conn has forgotten them, and
// drops an answer the server may still send. The next Read reads on.
type UnansweredError struct {
	IDs    [][]byte
	Reason string
}

func (e *UnansweredError) Error() string {
	return "requests the server will not answer: " + e.Reason
}

// IsUnanswered reports whether err says requests will go unanswered.
func IsUnanswered(err error) (*UnansweredError, bool) {
	var ue *UnansweredError
	ok := errors.As(err, &ue)
	return ue, ok
}
