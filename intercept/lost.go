package intercept

import (
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/relay"
)

var _ relay.SparingInterceptor = (*Interceptor)(nil)

// UpstreamLostSparing is UpstreamLost for every call in flight but the host's calls
// whose raw ids are in spared: the upstream held those back from the server that went
// away, and the next server answers them (relay.SparingInterceptor).
func (ic *Interceptor) UpstreamLostSparing(at time.Time, spared [][]byte) {
	if ic.q == nil {
		return
	}
	keys := make([]string, len(spared))
	for i, id := range spared {
		keys[i] = jsonlex.IDKey(id)
	}
	ic.q.push(event{kind: evLost, at: at, spared: keys}, true)
}

// isSpared reports whether the call of key k outlives the server lost in ev.
func isSpared(ev *event, k string) bool {
	for _, s := range ev.spared {
		if s == k {
			return true
		}
	}
	return false
}
