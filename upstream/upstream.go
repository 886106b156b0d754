// Package upstream connects the proxy to the real MCP server. Every transport (a child
// process on stdio, Process; a server over HTTP, Remote: Streamable HTTP, both eras, or
// the legacy HTTP+SSE transport) is the same thing to the relay: a pipe of whole
// JSON-RPC messages, so a crashed server or an expired session can be replaced behind
// the relay without the host noticing.
package upstream

import (
	"bytes"
	"context"
	"errors"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Conn is a message pipe to one MCP server: whole messages in, whole messages out, as
// raw bytes never re-encoded. Every transport (a stdio child, a revived child, an HTTP
// session) is one of these, so the relay never learns which it has.
//
// The concurrency contract, which every implementation keeps and the relay relies on:
//   - Read is called from one goroutine at a time. Write may be called from several at
//     once (the host pump and the proxy's own requests) and keeps each message whole:
//     messages from different writers never interleave.
//   - Write never waits for the server's answer. It returns once the message is on its
//     way (in a pipe, or handed to a request already under way); a transport whose
//     requests answer only when the tool finishes (an HTTP POST) must write
//     asynchronously, or every host request queues behind the slowest tool.
//   - Close may be called at any time, from any goroutine, more than once. It unblocks
//     a Read or Write in progress (they return errors, or io.EOF from Read), ends the
//     session the gentle way for the transport, and releases everything it holds:
//     after it returns nothing it started is still running.
//   - Read returns io.EOF once the server has gone for good and every message it sent
//     has been returned. Read also says, in order with the server's messages, what
//     happened to the session, with one of these errors, after which the next Read
//     reads on. The reader (the relay) settles each: it answers the host, tells
//     interception, marks stale ids and retires its own calls. A Conn never makes up
//     an answer for the host itself.
//   - *ReplacedError: the server went away and was (or is being) replaced; every
//     request written to it will go unanswered.
//   - *UnansweredError: these requests will never be answered (an HTTP request
//     failed), though the server stays.
//   - *UndeliveredError: these messages, held while no server could take them,
//     reached none.
//   - *EndedError: the server ended before serving the session, and no other comes.
//
// What a transport can do beyond these it says in one value, Capabilities
// (capabilities.go), which a decorator passes on whole.
type Conn interface {
	Read() ([]byte, error)
	Write(msg []byte) error
	Close() error
	Capabilities() Capabilities
}

// Dialer makes a Conn: the first one at start, and the next one whenever the server
// behind a Conn must be replaced (a revived child, a re-initialized HTTP session).
type Dialer interface {
	Dial(ctx context.Context) (Conn, error)
}

// ReplacedError is what Read returns when the server behind the Conn went away and
// was (or is being) replaced, while the session goes on. Every message the old server
// sent has been returned before it. Requests written to the old server will never be
// answered by it: the reader answers them itself (the relay does, with an error for
// each id). From the moment Read returns it until Read is called again, Write fails
// (a message written then reaches no server, and its writer answers it); writes after
// that reach the new server. So the reader decides when the new session begins: after
// it has settled what was lost. A Conn that is also a Settler is told that moment
// directly (see Settler).
type ReplacedError struct {
	// Reason says why the old server went away, for the host's error answers and the
	// log: "server github exited with status 1", with the last lines it printed.
	Reason string
}

func (e *ReplacedError) Error() string { return "the server was replaced: " + e.Reason }

// IsReplaced reports whether err says the server was replaced, returning the detail.
func IsReplaced(err error) (*ReplacedError, bool) {
	var re *ReplacedError
	ok := errors.As(err, &re)
	return re, ok
}

// smallLine is the size below which a line from the server is fully validated before
// it may reach the host. Above it validation would cost as much as relaying the bytes
// (a 64 MB tool result), so only the shape of its ends is checked.
const smallLine = 1 << 20

// IsMessage reports whether line can be a JSON-RPC message (an object, or a batch
// array). A server that prints a banner or a log line to stdout breaks hosts, which
// abort on a parse error; such lines are shown on stderr instead.
func IsMessage(line []byte) bool {
	// Only JSON's whitespace: the line is forwarded untrimmed, and a "\v" or a U+00A0
	// around it (which bytes.TrimSpace took away) is a parse error for the host.
	line = bytes.Trim(line, " \t\r\n")
	if len(line) < 2 {
		return false
	}
	first, last := line[0], line[len(line)-1]
	if !(first == '{' && last == '}') && !(first == '[' && last == ']') {
		return false
	}
	if len(line) <= smallLine {
		// jsonlex.Valid, not gjson.ValidBytes: gjson's validator recurses once per
		// level, so a peer's line of nested brackets could overflow the stack (a fatal
		// error no recover catches: the proxy gone with the host's session).
		return jsonlex.Valid(line)
	}
	rest := bytes.TrimLeft(line[1:], " \t\r")
	return shape{first: first, second: rest[0], last: last}.ok()
}
