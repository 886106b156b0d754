// Package cassette is bir-proxy's record of a server's tool calls, for `bir-proxy
// verify`: JSON lines, a header (how the server was started, the host's handshake,
// the server's answers to it and its tools) and then one line per tools/call with the
// arguments exactly as they were sent upstream and the result or error exactly as the
// server sent it. The format is an interface: docs/cassette.md.
//
// Arguments, results and errors are embedded as raw JSON, never decoded and encoded
// again; the only change ever made to their bytes is that a raw CR or LF between tokens
// (JSON whitespace, never inside a string) becomes a space, since a line is a record.
package cassette

import (
	"encoding/json"
	"time"
)

// Version is the format version this package writes and the only one it reads.
const Version = 1

// magic is the header member that names the format, its value the version.
const magic = "bir-cassette"

// Eras, as the header names them.
const (
	EraSession   = "session"
	EraStateless = "stateless"
	EraUnknown   = "unknown"
)

// Header is a cassette's first line.
type Header struct {
	Version int    `json:"bir-cassette"`
	Server  string `json:"server"`
	// How the server was started: Command (redacted by redact.CommandLine) or URL
	// (redact.URL; headers and tokens are never recorded).
	Command    []string  `json:"command,omitempty"`
	URL        string    `json:"url,omitempty"`
	RecordedAt time.Time `json:"recordedAt"`
	// Era is the host's protocol era: "session" (it sent initialize), "stateless"
	// (2026-07-28: no initialize, protocol fields in every request's params._meta) or
	// "unknown" (it said neither before its first call).
	Era string `json:"era"`
	// ProtocolVersion is the version negotiated (session era) or the one the host's
	// requests carried (stateless era).
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Initialize is the params of the host's initialize request, as it sent them;
	// Initialized says the server answered it (the host then sends
	// notifications/initialized, which verify sends after it too).
	Initialize       json.RawMessage `json:"initialize,omitempty"`
	Initialized      bool            `json:"initialized,omitempty"`
	InitializeResult json.RawMessage `json:"initializeResult,omitempty"`
	// Meta is, in the stateless era, the params._meta of the host's first request
	// carrying io.modelcontextprotocol/protocolVersion; DiscoverResult is the server's
	// answer to the host's server/discover, when it sent one.
	Meta           json.RawMessage `json:"meta,omitempty"`
	DiscoverResult json.RawMessage `json:"discoverResult,omitempty"`
	// Tools is the tools the server listed (tools/list, every page the host asked for
	// before its first call, the last listing of a name winning), each tool object as
	// the server sent it: schemas and annotations included. Absent: never listed.
	Tools json.RawMessage `json:"tools,omitempty"`
	// Dropped is set in a rewritten cassette (verify --update) from the file it
	// replaces; a recording says its drops in a last "end" line instead.
	Dropped int64 `json:"dropped,omitempty"`
}

// Call is one tools/call.
type Call struct {
	Seq  int64  `json:"seq"`
	Tool string `json:"tool"`
	// Arguments are params.arguments as sent upstream (the correlation key removed);
	// absent when the request had none.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Redacted says Arguments were redacted (--cassette-redact) and RedactedKeys
	// where: the call cannot be replayed.
	Redacted     bool     `json:"redacted,omitempty"`
	RedactedKeys []string `json:"redactedKeys,omitempty"`
	// Outcome is the step report's (report.Outcome*): ok, tool_error, rpc_error,
	// input_required, cancelled, timeout, upstream_lost.
	Outcome string `json:"outcome"`
	// Result or Error as the server sent them (neither for a call that got no answer).
	Result     json.RawMessage `json:"result,omitempty"`
	Error      json.RawMessage `json:"error,omitempty"`
	StartedAt  time.Time       `json:"startedAt"`
	DurationMs float64         `json:"durationMs"`
	// TooLarge, when set, is the bytes of the call's arguments, result and error,
	// past what a cassette keeps of one call (WriterOptions.MaxCallBytes): the call is
	// recorded without them (no arguments, result or error), and cannot be replayed.
	TooLarge int64 `json:"tooLarge,omitempty"`
}

// Duration is the call's DurationMs as a time.Duration.
func (c *Call) Duration() time.Duration {
	return time.Duration(c.DurationMs * float64(time.Millisecond))
}

// End is an optional last line: what the writer could not record.
type End struct {
	End     bool  `json:"end"`
	Calls   int64 `json:"calls"`
	Dropped int64 `json:"dropped,omitempty"`
}
