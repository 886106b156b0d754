package report

import "encoding/json"

// Outcomes of a call, as the recorder names them (SPEC §5).
const (
	OutcomeOK            = "ok"
	OutcomeToolError     = "tool_error"
	OutcomeRPCError      = "rpc_error"
	OutcomeCancelled     = "cancelled"
	OutcomeUpstreamLost  = "upstream_lost"
	OutcomeInputRequired = "input_required"
	OutcomeTimeout       = "timeout"
	// OutcomeTaskUnfinished is a task the session ended before the host saw it end
	// (SPEC §3.5).
	OutcomeTaskUnfinished = "task_unfinished"
)

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
	// Submit takes one report. The bytes of its raw fields (Result, Error) may be
	// the caller's scratch, reused for the next report: a Sink that keeps them after
	// Submit returns copies them (recorder.Reporter encodes the report at once).
	Submit(Step)
	// Learned is called when the upstream's initialize result or first tools/list
	// result has passed by; a recorder-backed sink registers again with them.
	Learned(ServerFacts)
}
