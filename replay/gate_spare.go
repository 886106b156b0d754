package replay

import (
	"time"

	"github.com/bir-dev/bir-proxy/relay"
)

var _ relay.SparingInterceptor = (*Gate)(nil)

// UpstreamLostSparing implements relay.SparingInterceptor: UpstreamLost, except that
// the inner interceptor keeps the host's calls the upstream held back from the server
// that went away (a Gate that dropped it would have them reported lost, then answered).
func (g *Gate) UpstreamLostSparing(at time.Time, spared [][]byte) {
	if sp := g.in.Sparing; sp != nil {
		sp.UpstreamLostSparing(at, spared)
		g.lostDispatches()
		return
	}
	g.UpstreamLost(at)
}
