package replay

import (
	"time"

	"github.com/bir-dev/bir-proxy/relay"
)

// The relay learns what interception can do from the Capabilities of the value it is
// given. The Gate stands in front of the interceptor, so it must expose what the
// interceptor exposes: when it was asked with type assertions it did not pass on
// relay.KeyedInterceptor, and with a recorder (the Gate is there only then) a 64 MB
// host call was read whole instead of streamed to the server, +129 MB of the proxy's
// memory (TestLongHostCallStreamsWithARecorder). Each capability is the Gate's own,
// with a fallback that is right for an inner value without it, except Keyed, whose
// presence itself says the relay may stream host calls: the Gate has it only when the
// inner interceptor has.

// Capabilities implements relay.Interceptor: the inner interceptor's, each through the
// Gate (which watches the handshake and the dispatches' fate), its clock and keeping
// of messages as the inner one says. The Gate itself reads no time, and keeps nothing
// of a message past its call but a copy of what it learns.
func (g *Gate) Capabilities() relay.Capabilities {
	in := g.in
	caps := relay.Capabilities{
		Lexed: g, LexedUpstream: g, Sparing: g, ResultStreaming: g, Timeout: g,
		Passive: in.Passive, KeepsBriefly: in.KeepsBriefly,
	}
	if in.Keyed != nil {
		caps.Keyed = in.Keyed
		if in.Streaming != nil {
			caps.Streaming = streamingGate{g, in.Streaming}
		}
	}
	return caps
}

// streamingGate is a Gate in front of a relay.StreamingInterceptor.
type streamingGate struct {
	*Gate
	inner relay.StreamingInterceptor
}

// StreamsArgs implements relay.StreamingInterceptor: as the inner interceptor says
// (no, for one that cannot take a call without its arguments).
func (s streamingGate) StreamsArgs() bool { return s.inner.StreamsArgs() }

// FromHostStreamed implements relay.StreamingInterceptor (asked only when StreamsArgs
// said so). The stand-in keeps the call's _meta, which is what the Gate watches a
// stateless-era call for before it is ready.
func (s streamingGate) FromHostStreamed(standIn []byte, args relay.StreamedArgs, readAt time.Time) {
	s.inner.FromHostStreamed(standIn, args, readAt)
	if !s.ready.Load() {
		s.watchHost(standIn)
	}
}
