package upstream

import (
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// OwnIDs makes the ids of the proxy's own requests: the relay's calls (replay
// dispatches), a revived server's re-handshake and a remote session's. One namespace
// (a prefix no host uses, "bir:<proxyId>:") and one counter for all of them, so the
// relay, which sees every answer that nobody below it took, can tell a late answer to
// a request that was given up on (issued, retired) from one to a request the proxy
// never sent (a bug, or a server making ids up): the first is expected, the second is
// logged. Neither is ever shown to the host. Safe for concurrent use.
type OwnIDs struct {
	prefix string
	n      atomic.Uint64
}

// DefaultIDPrefix is the namespace of OwnIDs made without one (tests, tools).
const DefaultIDPrefix = "bir:"

// NewOwnIDs returns the maker of ids starting with prefix (DefaultIDPrefix when "").
func NewOwnIDs(prefix string) *OwnIDs {
	if prefix == "" {
		prefix = DefaultIDPrefix
	}
	return &OwnIDs{prefix: prefix}
}

// Prefix is the namespace every id starts with.
func (o *OwnIDs) Prefix() string { return o.prefix }

// Next returns a new id, decoded: prefix and a number never given out before.
func (o *OwnIDs) Next() string {
	return o.prefix + strconv.FormatUint(o.n.Add(1), 10)
}

// NextRaw is Next as a raw JSON string, quotes included.
func (o *OwnIDs) NextRaw() []byte { return jsonlex.AppendString(nil, o.Next()) }

// Mine reports whether the decoded id s is in the namespace.
func (o *OwnIDs) Mine(s string) bool {
	return len(s) > len(o.prefix) && strings.HasPrefix(s, o.prefix)
}

// Issued reports whether the decoded id s is one Next gave out.
func (o *OwnIDs) Issued(s string) bool {
	if !o.Mine(s) {
		return false
	}
	rest := s[len(o.prefix):]
	if rest == "" || rest[0] == '0' {
		return false // Next never spells a number so
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return err == nil && n <= o.n.Load()
}
