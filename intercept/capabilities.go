package intercept

import "github.com/bir-dev/bir-proxy/relay"

// Capabilities says what the relay may ask of interception beyond relay.Interceptor:
// all of it, the clock and the keeping of messages as Passive and KeepsBriefly say.
func (ic *Interceptor) Capabilities() relay.Capabilities {
	return relay.Capabilities{
		Lexed: ic, LexedUpstream: ic, Sparing: ic, Keyed: ic, Streaming: ic,
		ResultStreaming: ic, Timeout: ic,
		Passive: ic.Passive(), KeepsBriefly: ic.KeepsBriefly(),
	}
}
