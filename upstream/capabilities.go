package upstream

import "github.com/bir-dev/bir-proxy/internal/jsonlex"

// Capabilities is what a Conn can do beyond Read, Write and Close, as one value: each
// field is the Conn itself (or a part of it) when it has that capability, nil when it
// has not. A Conn gives them all from one method, so a decorator (session.Conn) forwards
// one call: an optional interface asked for with a type assertion, as before, was
// dropped silently by a decorator that lacked the method, and the relay took the slow
// path with no test failing. capabilities_test.go holds every Conn here and every
// decorator (revive) to this struct: a decorator exposes each capability its inner Conn
// has.
type Capabilities struct {
	Batcher           Batcher
	Terminator        Terminator
	Exiter            Exiter
	ExitDescriber     ExitDescriber
	Settler           Settler
	Holder            Holder
	LexedWriter       LexedWriter
	LexedReader       LexedReader
	SessionIdentifier SessionIdentifier
	Streamer          Streamer
	LineWriter        LineWriter
	// CopiesWrites: the Conn keeps nothing of a message written to it past the call
	// that wrote it (Write, Batcher's Hold and LexedWriter's WriteLexed): the message
	// is copied, or written out, before the call returns. A relay may then hand it a
	// message lent only for the call (framing.WithLending). A promise about ownership
	// rather than a capability, but a decorator must pass it on all the same.
	CopiesWrites bool
}

// Batcher is a Conn that can coalesce writes under load and say when a read will not
// wait: a stdio pipe, where many small messages leaving in one syscall matter.
type Batcher interface {
	// Hold is Write, except that the message may wait until the next Write. The relay
	// holds a message only when it already has the next one in hand.
	Hold(msg []byte) error
	// Flush writes out what Hold held. A relay that held a message for the next one,
	// and then wrote nothing for that one (a call it refused itself), flushes: the
	// held message would otherwise wait for a write that may never come.
	Flush() error
	// Buffered reports whether Read will return a message without waiting.
	Buffered() bool
}

// Terminator is a Conn that can be stopped at once rather than gently: the proxy's
// answer to being told to stop (SIGINT, SIGTERM). It may cut a Close under way short.
type Terminator interface {
	Terminate()
}

// Exiter is a Conn to a process, which ends with a status the proxy passes on.
type Exiter interface {
	// ExitCode waits for the process to have exited and returns its status: its code,
	// or 128+signal when a signal ended it.
	ExitCode() int
}

// Settler is a Conn that wants to know the moment its reader has settled what a
// replaced server left behind (see ReplacedError), so that writes can go on to the new
// server at once. Without it they fail until the next Read; but a reader answers the
// lost requests before it reads again, and a host that sends its next request the
// moment it has that answer would find the writes still failing.
type Settler interface {
	// Settled is called once per ReplacedError, after the reader has registered every
	// request it will answer itself and before it answers them, while no write is under
	// way. From then on writes reach (or wait for) the new server.
	Settled()
}

// ExitDescriber is a Conn to a process that can say how it ended, for the error
// answers and the log line of a revival.
type ExitDescriber interface {
	// ExitReason waits for the process to have exited and says how, in words:
	// "exited with status 1", "was killed by signal 9 (killed)".
	ExitReason() string
	// StderrTail returns up to n of the last lines the process wrote to stderr.
	StderrTail(n int) []string
	// Exited reports, without waiting, whether the process has exited.
	Exited() bool
}

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

// LexedWriter is an upstream that reads a host message it is given from the relay's
// lex of it (session.Conn: its record of the handshake).
type LexedWriter interface {
	// WriteLexed is Write of msg, or Hold when hold is set (Batcher); lx
	// describes msg and is valid only during the call.
	WriteLexed(msg []byte, lx *jsonlex.Line, hold bool) error
}

// LexedReader is an upstream that lexes each message it returns (it checks every
// server line is a message, and the check is a lex: Process, session.Conn).
// The upstream pump then reads that lex instead of lexing the message again.
type LexedReader interface {
	// ReadLexed is Read, leaving lx describing the message returned. lx is the
	// relay's; the upstream must not keep it past the call.
	ReadLexed(lx *jsonlex.Line) ([]byte, error)
}

// SessionIdentifier is a Conn over HTTP whose server names the session
// (Mcp-Session-Id): tracing's mcp.session.id. SessionID is "" while there is none
// (before initialize is answered, the stateless era) and is safe to call from any
// goroutine.
type SessionIdentifier interface {
	SessionID() string
}
