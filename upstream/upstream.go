// Package upstream connects the proxy to the real MCP server. Every transport (a child
// process on stdio today; Streamable HTTP and legacy SSE later) is the same thing to the
// relay: a pipe of whole JSON-RPC messages, so a crashed server can be replaced behind
// the relay without the host noticing.
package upstream

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// Conn is a message pipe to one MCP server: whole messages in, whole messages out, as
// raw bytes never re-encoded. Read is called from one goroutine; Write may be called
// from several (the relay's host pump and the proxy's own requests) and must keep each
// message whole.
type Conn interface {
	// Read returns the next message from the server, or io.EOF once the server has
	// gone and every message it sent has been returned.
	Read() ([]byte, error)
	// Write sends one message to the server, after any held ones.
	Write(msg []byte) error
	// Hold is Write, except that the message may wait until the next Write. The relay
	// holds a message only when Buffered says the next one is already in hand.
	Hold(msg []byte) error
	// Buffered reports whether Read will return a message without waiting.
	Buffered() bool
	// Close ends the session the gentle way for the transport and releases everything
	// it holds; after Close returns, nothing it started is still running.
	Close() error
}

// smallLine is the size below which a line from the server is fully validated before
// it may reach the host. Above it validation would cost as much as relaying the bytes
// (a 64 MB tool result), so only the shape of its ends is checked.
const smallLine = 1 << 20

// IsMessage reports whether line can be a JSON-RPC message (an object, or a batch
// array). A server that prints a banner or a log line to stdout breaks hosts, which
// abort on a parse error; such lines are shown on stderr instead.
func IsMessage(line []byte) bool {
	line = bytes.TrimSpace(line)
	if len(line) < 2 {
		return false
	}
	first, last := line[0], line[len(line)-1]
	if !(first == '{' && last == '}') && !(first == '[' && last == ']') {
		return false
	}
	if len(line) <= smallLine {
		return gjson.ValidBytes(line)
	}
	// "[INFO] server ready]" has the right ends; a JSON array's next token does not
	// start with a letter other than those of true/false/null.
	if first == '[' {
		rest := bytes.TrimLeft(line[1:], " \t\r")
		switch c := rest[0]; {
		case c == '{' || c == '[' || c == '"' || c == ']' || c == '-' || (c >= '0' && c <= '9'):
		case c == 't' || c == 'f' || c == 'n':
		default:
			return false
		}
	} else {
		rest := bytes.TrimLeft(line[1:], " \t\r")
		if rest[0] != '"' && rest[0] != '}' {
			return false
		}
	}
	return true
}
