// Package recorder delivers step reports to the local recorder (SPEC §5): discovery,
// registration, posting, and the on-disk spool that makes sure nothing is lost.
package recorder

import (
	"encoding/json"
	"time"
)

// Outcomes of a call, as the recorder names them (SPEC §5).
const (
	OutcomeOK            = "ok"
	OutcomeToolError     = "tool_error"
	OutcomeRPCError      = "rpc_error"
	OutcomeCancelled     = "cancelled"
	OutcomeUpstreamLost  = "upstream_lost"
	OutcomeInputRequired = "input_required"
	OutcomeTimeout       = "timeout"
)

// Step is one step report: one tools/call, from the host's line being read to its end.
// Field names and null-ness are the recorder's contract (SPEC §5), so every pointer
// field without omitempty is deliberately sent as null rather than left out.
type Step struct {
	ProxyID string `json:"proxyId"`
	Server  string `json:"server"`
	// Seq is assigned by the sink when the report is submitted, so it counts submitted
	// reports of one proxyId from 1 with no gaps whatever the order calls ended in.
	Seq uint64 `json:"seq"`

	CallID *string `json:"callId"`
	Tool   string  `json:"tool"`

	Args            json.RawMessage `json:"args"`
	ArgsFingerprint string          `json:"argsFingerprint"`
	ArgsClipped     bool            `json:"argsClipped"`

	ReceivedAt time.Time `json:"receivedAt"`
	StartedAt  time.Time `json:"startedAt"`
	EndedAt    time.Time `json:"endedAt"`
	DurationMs float64   `json:"durationMs"`

	Outcome       string          `json:"outcome"`
	Result        json.RawMessage `json:"result,omitempty"`
	ResultClipped bool            `json:"resultClipped"`
	Error         json.RawMessage `json:"error,omitempty"`

	DispatchID *string `json:"dispatchId"`
}

// ServerFacts is what the proxy learns about its upstream from messages passing by on
// their way to the host (it never asks for them itself); the recorder gets them in a
// fresh register call.
type ServerFacts struct {
	ServerInfo      json.RawMessage // initialize result's serverInfo, raw
	ProtocolVersion string
	Tools           []string // names from the first tools/list result
}

// Sink receives finished reports. Submit must never block on the network or the disk:
// it is called from the proxy's bookkeeping goroutine, which the host path feeds.
type Sink interface {
	Submit(Step)
	// Learned is called when the upstream's initialize result or first tools/list
	// result has passed by; a recorder-backed sink registers again with them.
	Learned(ServerFacts)
}
