package replay

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/relay"
)

// metaPrefix starts the _meta keys a stateless-era request carries for the protocol
// (version, client info, capabilities); a dispatch copies those, and no other.
const metaPrefix = "io.modelcontextprotocol/"

// Gate learns, from the host's own traffic, when the upstream is ready for a request
// the host did not send (SPEC §4), and what protocol fields such a request must carry
// in the stateless era. It is a relay.Interceptor that wraps the one the relay would
// otherwise be given and passes every call through unchanged: the relay learns nothing
// of dispatches, and the Gate nothing of what the inner Interceptor does.
//
//   - Session era: ready once the host's initialize has been answered with a result
//     and the host's notifications/initialized has been handed to the upstream.
//   - Stateless era (2026-07-28): ready once a host request carrying
//     _meta["io.modelcontextprotocol/protocolVersion"] has been handed to the upstream
//     — for a server/discover, once it was answered with a result (a session-era
//     server answers it with an error, and the host then initializes). Its
//     io.modelcontextprotocol/* _meta members are kept for every dispatch.
//
// Until then it reads each host message (and each upstream answer while one it waits
// for is due) with the lexer, allocating nothing but the copy of the _meta it keeps;
// afterwards it costs one atomic load per message. After the upstream is replaced it
// stays ready: re-handshaking a new server before it takes writes is the replacer's
// job (upstream.ReplacedError), and the stateless era has no handshake.
type Gate struct {
	inner   relay.Interceptor
	in      relay.Capabilities // inner's, asked once (none without inner)
	ready   atomic.Bool
	readyCh chan struct{} // closed when ready is set

	mu sync.Mutex // the state below, which only matters until ready
	// pending is what the host message FromHost last saw makes true once Forwarded
	// says it reached the upstream (FromHost and Forwarded run on the host pump).
	pending     pendingKind
	session     bool   // the host sent initialize: the session era
	initKey     string // IDKey of the host's initialize, awaiting its answer
	initAnswer  bool   // it was answered with a result
	initialized bool   // notifications/initialized was handed to the upstream
	discoverKey string // IDKey of a server/discover awaiting its answer
	meta        []byte // the host's io.modelcontextprotocol/* _meta members, as an object

	lostMu sync.Mutex
	lostCh chan struct{} // closed (and replaced) each time the upstream is lost

	// seq orders the upstream's losses against the executor's Stop: lostSeq is its
	// value at the last loss (0: none), so the executor can tell a server that went
	// away on its own from one stopped because the proxy is exiting.
	seq     atomic.Uint64
	lostSeq atomic.Uint64
}

type pendingKind uint8

const (
	pendNone        pendingKind = 0
	pendInitialized pendingKind = 1 << iota // notifications/initialized
	pendStateless                           // a stateless-era request other than server/discover
)

// NewGate wraps inner (which may be nil).
func NewGate(inner relay.Interceptor) *Gate {
	g := &Gate{inner: inner, readyCh: make(chan struct{}), lostCh: make(chan struct{})}
	if inner != nil {
		g.in = inner.Capabilities()
	}
	return g
}

// Ready is closed once the upstream is ready for dispatches.
func (g *Gate) Ready() <-chan struct{} { return g.readyCh }

// Meta is the _meta object every dispatch carries: the host's protocol fields in the
// stateless era, nil in the session era. Read it only after Ready is closed.
func (g *Gate) Meta() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.session {
		return nil
	}
	return g.meta
}

// lost returns a channel closed the next time the upstream is lost.
func (g *Gate) lost() <-chan struct{} {
	g.lostMu.Lock()
	defer g.lostMu.Unlock()
	return g.lostCh
}

// FromHost implements relay.Interceptor; before readiness it also watches the
// handshake in what is forwarded (after the inner Interceptor's edit).
func (g *Gate) FromHost(msg []byte, readAt time.Time) []byte {
	out := msg
	if g.inner != nil {
		out = g.inner.FromHost(msg, readAt)
	}
	if !g.ready.Load() {
		g.watchHost(out)
	}
	return out
}

// FromHostLexed implements relay.LexedInterceptor: the relay's lex of the message goes
// on to the inner Interceptor, which without it lexed every host message a second time
// whenever replay was on (with every recorder).
func (g *Gate) FromHostLexed(msg []byte, lx *jsonlex.Line, readAt time.Time) []byte {
	out := msg
	if g.inner != nil {
		if in := g.in.Lexed; in != nil {
			out = in.FromHostLexed(msg, lx, readAt)
		} else {
			out = g.inner.FromHost(msg, readAt)
			lx.Lex(out) // lx must describe what is returned; the inner edit did not move it
		}
	}
	if !g.ready.Load() {
		g.watchHost(out)
	}
	return out
}

// Forwarded implements relay.Interceptor; what the last host message promised comes
// true here, once it is on its way to the upstream (a dispatch written after this
// follows it on the wire: framing.Writer keeps the order of held and written lines).
func (g *Gate) Forwarded(sentAt time.Time) {
	if g.inner != nil {
		g.inner.Forwarded(sentAt)
	}
	if g.ready.Load() {
		return
	}
	g.mu.Lock()
	p := g.pending
	g.pending = pendNone
	if p&pendInitialized != 0 {
		g.initialized = true
	}
	open := p&pendStateless != 0 && !g.session || g.session && g.initAnswer && g.initialized
	g.mu.Unlock()
	if open {
		g.open()
	}
}

// FromProxy implements relay.Interceptor.
func (g *Gate) FromProxy(msg []byte, own relay.Own, sentAt time.Time) []byte {
	if g.inner != nil {
		return g.inner.FromProxy(msg, own, sentAt)
	}
	return msg
}

// FromUpstream implements relay.Interceptor; before readiness it looks for the answer
// to the host's initialize or server/discover.
func (g *Gate) FromUpstream(msg []byte, readAt time.Time) {
	if g.inner != nil {
		g.inner.FromUpstream(msg, readAt)
	}
	g.afterUpstream(msg)
}

// afterUpstream is what the Gate itself does with an upstream message.
func (g *Gate) afterUpstream(msg []byte) {
	if g.ready.Load() {
		return
	}
	g.mu.Lock()
	waiting := g.initKey != "" || g.discoverKey != ""
	g.mu.Unlock()
	if waiting {
		g.watchUpstream(msg)
	}
}

// FromUpstreamLexed implements relay.LexedUpstreamInterceptor, passing the upstream's
// lex on to the inner Interceptor.
func (g *Gate) FromUpstreamLexed(msg []byte, lx *jsonlex.Line, readAt time.Time) {
	if g.inner != nil {
		if in := g.in.LexedUpstream; in != nil {
			in.FromUpstreamLexed(msg, lx, readAt)
		} else {
			g.inner.FromUpstream(msg, readAt)
		}
	}
	g.afterUpstream(msg)
}

// AnswerWanted implements relay.ResultStreamingInterceptor. Until the Gate is
// ready every answer goes whole (the one it waits for is the handshake's); after,
// as the inner Interceptor wants.
func (g *Gate) AnswerWanted(id []byte) (want, whole bool) {
	if rs := g.in.ResultStreaming; rs != nil && g.ready.Load() {
		return rs.AnswerWanted(id)
	}
	return true, true
}

// FromUpstreamStreamed implements relay.ResultStreamingInterceptor (asked only once
// AnswerWanted said so: the Gate is ready, and has nothing to watch for).
func (g *Gate) FromUpstreamStreamed(standIn []byte, res relay.StreamedResult, readAt time.Time) {
	if rs := g.in.ResultStreaming; rs != nil {
		rs.FromUpstreamStreamed(standIn, res, readAt)
	}
}

// ToProxy implements relay.Interceptor.
func (g *Gate) ToProxy(msg []byte, readAt time.Time) {
	if g.inner != nil {
		g.inner.ToProxy(msg, readAt)
	}
}

// UpstreamLost implements relay.Interceptor, and tells the executor: dispatches still
// waiting to be sent go nowhere now.
func (g *Gate) UpstreamLost(at time.Time) {
	if g.inner != nil {
		g.inner.UpstreamLost(at)
	}
	g.lostDispatches()
}

// lostDispatches tells the executor the server went away: dispatches still waiting to
// be sent go nowhere now.
func (g *Gate) lostDispatches() {
	g.lostSeq.Store(g.seq.Add(1))
	g.lostMu.Lock()
	close(g.lostCh)
	g.lostCh = make(chan struct{})
	g.lostMu.Unlock()
}

func (g *Gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ready.Load() {
		return
	}
	g.ready.Store(true)
	close(g.readyCh)
}

func (g *Gate) watchHost(msg []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) {
		if f.Method == nil {
			return
		}
		switch {
		case jsonlex.KeyIs(f.Method, "initialize"):
			if f.ID != nil {
				// The session era, whatever was seen before (a server/discover probe
				// that a session-era server refused).
				g.session = true
				g.initKey, g.initAnswer = jsonlex.IDKey(f.ID), false
				g.discoverKey = ""
			}
		case jsonlex.KeyIs(f.Method, "notifications/initialized"):
			if f.ID == nil {
				g.pending |= pendInitialized
			}
		case f.ID != nil && !g.session:
			meta := jsonlex.Get(f.Params, "_meta")
			if jsonlex.Get(meta, metaPrefix+"protocolVersion") == nil {
				return // not a stateless-era request (a ping before initialize, say)
			}
			if g.meta == nil {
				g.meta = protocolMeta(meta)
			}
			if jsonlex.KeyIs(f.Method, "server/discover") {
				g.discoverKey = jsonlex.IDKey(f.ID)
			} else {
				g.pending |= pendStateless
			}
		}
	})
}

func (g *Gate) watchUpstream(msg []byte) {
	open := false
	g.mu.Lock()
	jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) {
		if !f.IsResponse() {
			return
		}
		k, _ := jsonlex.IDKeyBytes(f.ID)
		switch {
		case g.initKey != "" && keyIs(k, f.ID, g.initKey):
			g.initKey = ""
			// An error answer (an unsupported version) leaves the host to try again.
			g.initAnswer = f.Result != nil
			open = g.initAnswer && g.initialized
		case g.discoverKey != "" && keyIs(k, f.ID, g.discoverKey):
			g.discoverKey = ""
			open = f.Result != nil && !g.session
		}
	})
	g.mu.Unlock()
	if open {
		g.open()
	}
}

// keyIs compares an id with a stored IDKey, building the key only for the rare ids
// whose key is not spelled in place (k nil).
func keyIs(k, raw []byte, want string) bool {
	if k != nil || len(raw) == 0 {
		return string(k) == want
	}
	return jsonlex.IDKey(raw) == want
}

// protocolMeta copies the members of the _meta object whose decoded key starts with
// metaPrefix, as raw bytes in their order, into an object of their own. Others
// (a progressToken, a trace id) belong to that one request, not to the session.
func protocolMeta(meta []byte) []byte {
	out := []byte{'{'}
	_, ok := jsonlex.EachMember(meta, jsonlex.SkipSpace(meta, 0), func(m jsonlex.Member) bool {
		key := meta[m.Key.Start:m.Key.End]
		name := string(key[1 : len(key)-1])
		if bytes.IndexByte(key, '\\') >= 0 {
			name, _ = jsonlex.DecodeString(key)
		}
		if strings.HasPrefix(name, metaPrefix) {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, key...)
			out = append(out, ':')
			out = append(out, meta[m.Value.Start:m.Value.End]...)
		}
		return true
	})
	if !ok {
		return []byte(`{}`)
	}
	return append(out, '}')
}
