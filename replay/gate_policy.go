package replay

import (
	"time"

	"github.com/bir-dev/bir-proxy/relay"
)

var _ relay.TimeoutInterceptor = (*Gate)(nil)

// CallTimedOut implements relay.TimeoutInterceptor for the interceptor the Gate
// wraps: a host's call past its --call-timeout is reported as a timeout.
func (g *Gate) CallTimedOut(answer []byte, at time.Time) {
	if ti := g.in.Timeout; ti != nil {
		ti.CallTimedOut(answer, at)
		return
	}
	g.FromUpstream(answer, at)
}
