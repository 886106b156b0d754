package replay

import (
	"time"

	"github.com/bir-dev/bir-proxy/relay"
)

// The relay learns what interception can do from the optional interfaces its value
// implements. The Gate stands in front of the interceptor, so it must expose what the
// interceptor exposes: it did not pass on relay.KeyedInterceptor, and with a recorder
// (the Gate is there only then) a 64 MB host call was read whole instead of streamed
// to the server, +129 MB of the proxy's memory (TestLongHostCallStreamsWithARecorder).
// Each optional interface is forwarded with a fallback that is right for an inner
// value without it, except KeyedInterceptor, whose presence itself says the relay may
// stream host calls: it is on the value Interceptor returns only when the inner one
// has it.

var (
	_ relay.Passive                    = (*Gate)(nil)
	_ relay.Brief                      = (*Gate)(nil)
	_ relay.KeyedInterceptor           = keyedGate{}
	_ relay.StreamingInterceptor       = keyedGate{}
	_ relay.LexedInterceptor           = keyedGate{}
	_ relay.ResultStreamingInterceptor = keyedGate{}
)

// Interceptor is the Gate as the relay is to be given it: exposing the optional
// interfaces of the interceptor it wraps.
func (g *Gate) Interceptor() relay.Interceptor {
	if _, ok := g.inner.(relay.KeyedInterceptor); ok {
		return keyedGate{g}
	}
	return g
}

// Passive implements relay.Passive as the inner interceptor says. The Gate itself reads
// no time, and keeps nothing of a message past its call but a copy of what it learns.
func (g *Gate) Passive() bool {
	p, ok := g.inner.(relay.Passive)
	return ok && p.Passive()
}

// KeepsBriefly implements relay.Brief as the inner interceptor says.
func (g *Gate) KeepsBriefly() bool {
	b, ok := g.inner.(relay.Brief)
	return ok && b.KeepsBriefly()
}

// keyedGate is a Gate in front of a relay.KeyedInterceptor.
type keyedGate struct{ *Gate }

// CorrelationKey implements relay.KeyedInterceptor: the inner interceptor's key.
func (k keyedGate) CorrelationKey() string {
	return k.inner.(relay.KeyedInterceptor).CorrelationKey()
}

// StreamsArgs implements relay.StreamingInterceptor: as the inner interceptor says
// (no, for one that cannot take a call without its arguments).
func (k keyedGate) StreamsArgs() bool {
	s, ok := k.inner.(relay.StreamingInterceptor)
	return ok && s.StreamsArgs()
}

// FromHostStreamed implements relay.StreamingInterceptor (asked only when StreamsArgs
// said so). The stand-in keeps the call's _meta, which is what the Gate watches a
// stateless-era call for before it is ready.
func (k keyedGate) FromHostStreamed(standIn []byte, args relay.StreamedArgs, readAt time.Time) {
	k.inner.(relay.StreamingInterceptor).FromHostStreamed(standIn, args, readAt)
	if !k.ready.Load() {
		k.watchHost(standIn)
	}
}
