package intercept

import (
	"bytes"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/redact"
)

// Cassette is what records the host's tool calls for `bir-proxy verify`
// (cassette.Writer). Bookkeeping calls it, on its own goroutine, never on the host's
// path; it must not wait. The byte slices it is given are views, valid only during
// the call.
type Cassette interface {
	// HostRequest: the params of the host's initialize and server/discover, and of each
	// of its tools/call (whose _meta says the stateless era).
	HostRequest(method string, params []byte)
	// ServerResult: the server's result to the host's initialize, server/discover and
	// tools/list.
	ServerResult(method string, result []byte)
	// Call: one of the host's tools/call, ended.
	Call(cassette.Recorded)
	// Missed: one of the host's tools/call, ended, whose answer bookkeeping could not
	// keep (its queue was over budget): counted as not recorded.
	Missed()
}

// cassetteHook is bookkeeping's side of a Cassette.
type cassetteHook struct {
	c      Cassette
	redact bool // --cassette-redact: record the arguments redacted
	red    redact.Redactor
}

// rawCall is what a call in flight keeps for the cassette: its arguments as forwarded
// (a copy: describeArgs lets the message go).
type rawCall struct {
	tool string // decoded, not redacted: verify calls it by this name
	args []byte
}

// maxCassetteArgs bounds the redacted rendering of one call's arguments.
const maxCassetteArgs = 64 << 20

// seen is told a host tools/call as bookkeeping first sees it.
func (h *cassetteHook) seen(c *call, params, name, args []byte) {
	h.c.HostRequest("tools/call", params)
	c.cass = &rawCall{tool: jsonlex.StringOf(name), args: bytes.Clone(args)}
}

// handshake is told a host request of the handshake.
func (h *cassetteHook) handshake(method string, params []byte) {
	if method == "initialize" || method == "server/discover" {
		h.c.HostRequest(method, params)
	}
}

// shedResult starts the result bookkeeping puts in place of one it could not keep
// (intercept.shed): such a call is not a record of what the server said.
var shedResult = []byte(`{"_bir":"not recorded`)

func (h *cassetteHook) ended(c *call, endedAt time.Time, outcome string, result, rpcErr []byte) {
	if c.cass == nil {
		return
	}
	if bytes.HasPrefix(result, shedResult) {
		// Its answer is gone: the call went missing from the cassette unsaid, not
		// even counted among the calls dropped.
		c.cass = nil
		h.c.Missed()
		return
	}
	r := cassette.Recorded{
		Tool:      c.cass.tool,
		Arguments: c.cass.args,
		Outcome:   outcome,
		Result:    result,
		Error:     rpcErr,
		StartedAt: c.startedAt,
		Duration:  endedAt.Sub(c.startedAt),
	}
	if h.redact && r.Arguments != nil {
		out, clipped := h.red.Report(r.Arguments, maxCassetteArgs)
		keys := cassette.RedactedPaths(out)
		if clipped || len(keys) > 0 {
			r.Redacted, r.RedactedKeys = true, keys
		}
		r.Arguments = out
	}
	c.cass = nil
	h.c.Call(r)
}
