package upstream

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Era is the protocol era a host speaks (see ../shared/notes/mcp-eras.md).
type Era int

const (
	// EraUnknown: the host has not said yet (nothing answered so far).
	EraUnknown Era = iota
	// EraSession: the host's initialize was answered; the session has state (the
	// negotiated version and capabilities, a log level, subscriptions) that a new
	// server must be given again.
	EraSession
	// EraStateless: no initialize; every request carries the protocol fields in
	// params._meta (2026-07-28). A new server needs no handshake.
	EraStateless
)

func (e Era) String() string {
	switch e {
	case EraSession:
		return "session"
	case EraStateless:
		return "stateless"
	default:
		return "unknown"
	}
}

// setupScanMax is the size past which FromHost does not look at a host message. None of
// the messages Setup remembers comes near it (an initialize, a setLevel, a subscribe),
// and a 50 MB tools/call must not be lexed once more on the host's path for nothing.
const setupScanMax = 64 << 10

// maxSetupAwaited bounds the setup requests awaiting an answer that Setup holds (each
// up to setupScanMax): a server that never answers them, or a host that cancels them
// without the server saying anything, would otherwise have Setup hold every one for
// the rest of the session. Past it, the oldest is forgotten: it set nothing up.
const maxSetupAwaited = 128

// metaProtocolVersion is the params._meta key by which a stateless-era request says
// its protocol version.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// Setup remembers what a host set up on an MCP session, from the messages it writes and
// the server's answers to them, so that a new server — a revived child process, a
// re-initialized HTTP session after a 404 — can be brought to the same state without
// the host noticing (SPEC §7). It knows no transport: the caller shows it every message
// the host sends (FromHost, before or as it is written) and every message the server
// sends (FromServer), and when the server is replaced asks for the messages that
// re-establish the session (Rehandshake), which it then sends with its own transport.
//
// What it keeps, each only once the server answered the request with a result (a
// request that failed, or that was lost with its server, set nothing up):
//   - the host's initialize request, its exact bytes, and from the answer the
//     negotiated protocolVersion, the server's capabilities and serverInfo;
//   - the host's notifications/initialized, its exact bytes;
//   - the last logging/setLevel;
//   - every resources/subscribe not since undone by a resources/unsubscribe, by uri,
//     in the order first subscribed;
//   - the tools array of the last tools/list answer the host got for its first page
//     (no cursor), so that a caller can tell whether a new server's tools differ;
//   - the host's subscriptions/listen streams still open (Listens);
//   - whether the host speaks the stateless era (no initialize; a request carrying
//     params._meta["io.modelcontextprotocol/protocolVersion"], or a server/discover
//     that got a result).
//
// A request the host cancels (notifications/cancelled) is forgotten, as is the oldest
// awaited past maxSetupAwaited: neither sets anything up, even if answered later.
//
// Setup is safe for concurrent use: FromHost may run on several writers' goroutines and
// FromServer on the reader's. FromServer costs an atomic load while no request it
// cares about awaits an answer, which is almost always.
type Setup struct {
	// waiting is len(pending), readable without the lock.
	waiting atomic.Int64
	// eraKnown: the host initialized or spoke the stateless era, so a request's _meta
	// need not be looked at (every tools/call would otherwise take the lock).
	eraKnown atomic.Bool

	mu      sync.Mutex
	pending map[string]asked // host requests Setup awaits the answer to, by jsonlex.IDKey
	order   []awaited        // pending's keys, oldest first (and some since answered)
	seq     uint64           // the last asked's asked.seq

	initReq     []byte // the answered initialize request, as the host wrote it
	initialized []byte // the host's notifications/initialized, as it wrote it
	version     string // protocolVersion of the initialize answer
	caps        []byte // capabilities of the initialize answer, raw
	serverInfo  []byte // serverInfo of the initialize answer, raw
	setLevel    []byte // the last answered logging/setLevel, as the host wrote it
	subs        []subscription
	tools       []byte // tools of the last first-page tools/list answer, raw
	stateless   bool

	listens Listens
}

type subscription struct {
	uri string
	req []byte // the host's resources/subscribe, as it wrote it
}

type askKind int

const (
	askInitialize askKind = iota
	askSetLevel
	askSubscribe
	askUnsubscribe
	askToolsList
	askDiscover
)

// asked is a host request awaiting its answer: what it would set up once answered.
type asked struct {
	kind askKind
	seq  uint64 // when it was first asked: which entry of order is its
	msg  []byte // the request object, copied (the caller's buffer is not ours to keep)
	uri  string // resources/(un)subscribe
}

// awaited is an entry of Setup.order: a key, and the seq of the request it was
// appended for. A key answered (or cancelled) and asked again is appended again: its
// first entry is stale, and must neither evict nor keep the newer request.
type awaited struct {
	key string
	seq uint64
}

// current says o is the entry of the request pending under its key now. Called with mu.
func (s *Setup) current(o awaited) bool {
	a, ok := s.pending[o.key]
	return ok && a.seq == o.seq
}

// NewSetup returns an empty Setup.
func NewSetup() *Setup {
	return &Setup{pending: make(map[string]asked)}
}

// FromHost looks at a message the host sends to the server (a line: one message or a
// batch). It must see the message before the server can answer it, so before or while
// it is written, never after.
func (s *Setup) FromHost(msg []byte) {
	if len(msg) > setupScanMax {
		return
	}
	jsonlex.EachRPC(msg, s.fromHost)
}

// FromHostLexed is FromHost of a message the caller has already lexed into lx (the
// relay lexes each host message once, for every reader of it on the host's path).
func (s *Setup) FromHostLexed(msg []byte, lx *jsonlex.Line) {
	if len(msg) > setupScanMax {
		return
	}
	for i, objs := 0, lx.RPC(); i < len(objs); i++ {
		o := &objs[i]
		if o.Method.End == 0 {
			continue // a response to a server request: sets nothing up
		}
		m := hostMethodOf(msg[o.Method.Start:o.Method.End])
		if m == methodOther && (o.ID.End == 0 || s.eraKnown.Load()) {
			// What fromHost would do with it is nothing: a notification, or a
			// request once the era is known (every tools/call, without building
			// its Fields).
			continue
		}
		s.fromHostAs(m, o.Bytes(msg), o.Fields(msg))
	}
}

// fromHost looks at one object of a host message, with its JSON-RPC members f.
func (s *Setup) fromHost(obj []byte, f jsonlex.Fields) {
	if f.Method == nil {
		return // a response to a server request: sets nothing up
	}
	s.fromHostAs(hostMethodOf(f.Method), obj, f)
}

// fromHostAs is fromHost of an object whose method is m (hostMethodOf).
func (s *Setup) fromHostAs(m hostMethod, obj []byte, f jsonlex.Fields) {
	switch {
	case m == methodInitialized:
		if f.ID == nil {
			s.mu.Lock()
			s.initialized = bytes.Clone(obj)
			s.mu.Unlock()
		}
		return
	case m == methodCancelled:
		if f.ID == nil {
			s.forget(f.Params)
			s.listens.cancelled(f.Params)
		}
		return
	case f.ID == nil:
		return // any other notification
	case m == methodListen:
		s.noteMeta(f.Params)
		s.listens.opened(f.ID, obj)
	case m == methodInitialize:
		s.ask(f.ID, asked{kind: askInitialize, msg: bytes.Clone(obj)})
	case m == methodSetLevel:
		s.ask(f.ID, asked{kind: askSetLevel, msg: bytes.Clone(obj)})
	case m == methodSubscribe:
		s.ask(f.ID, asked{kind: askSubscribe, msg: bytes.Clone(obj), uri: jsonlex.StringOf(jsonlex.Get(f.Params, "uri"))})
	case m == methodUnsubscribe:
		s.ask(f.ID, asked{kind: askUnsubscribe, uri: jsonlex.StringOf(jsonlex.Get(f.Params, "uri"))})
	case m == methodToolsList:
		// Only the first page: a paged list is the host's to reassemble, and the
		// first page differing is enough to say the list changed.
		if jsonlex.Get(f.Params, "cursor") == nil {
			s.ask(f.ID, asked{kind: askToolsList})
		}
	case m == methodDiscover:
		s.ask(f.ID, asked{kind: askDiscover})
	default:
		s.noteMeta(f.Params)
	}
}

// hostMethod is which of the methods Setup looks at a host message's method is.
type hostMethod uint8

const (
	methodOther hostMethod = iota
	methodInitialized
	methodCancelled
	methodInitialize
	methodSetLevel
	methodSubscribe
	methodUnsubscribe
	methodToolsList
	methodDiscover
	methodListen
)

// hostMethodOf says which method the raw method value m names: what testing it with
// jsonlex.KeyIs against each name in turn says, in one switch. KeyIs matches a
// literal of a name's plain length by its bytes inside the quotes, and a longer one
// only through a backslash (an escape is longer than what it decodes to): so a value
// without a backslash is one of them only by its bytes inside the quotes.
func hostMethodOf(m []byte) hostMethod {
	if len(m) >= 2 {
		switch string(m[1 : len(m)-1]) {
		case "notifications/initialized":
			return methodInitialized
		case "notifications/cancelled":
			return methodCancelled
		case "initialize":
			return methodInitialize
		case "logging/setLevel":
			return methodSetLevel
		case "resources/subscribe":
			return methodSubscribe
		case "resources/unsubscribe":
			return methodUnsubscribe
		case "tools/list":
			return methodToolsList
		case "server/discover":
			return methodDiscover
		case "subscriptions/listen":
			return methodListen
		}
	}
	if bytes.IndexByte(m, '\\') < 0 {
		return methodOther
	}
	return hostMethodSpelled(m)
}

// hostMethodSpelled is hostMethodOf by KeyIs of each name, in the order Setup tests
// them: a method spelled with escapes (and the reference hostMethodOf is held to).
func hostMethodSpelled(m []byte) hostMethod {
	switch {
	case jsonlex.KeyIs(m, "notifications/initialized"):
		return methodInitialized
	case jsonlex.KeyIs(m, "notifications/cancelled"):
		return methodCancelled
	case jsonlex.KeyIs(m, "initialize"):
		return methodInitialize
	case jsonlex.KeyIs(m, "logging/setLevel"):
		return methodSetLevel
	case jsonlex.KeyIs(m, "resources/subscribe"):
		return methodSubscribe
	case jsonlex.KeyIs(m, "resources/unsubscribe"):
		return methodUnsubscribe
	case jsonlex.KeyIs(m, "tools/list"):
		return methodToolsList
	case jsonlex.KeyIs(m, "server/discover"):
		return methodDiscover
	case jsonlex.KeyIs(m, "subscriptions/listen"):
		return methodListen
	}
	return methodOther
}

// noteMeta marks the host stateless when a request carries the stateless era's
// protocol field, unless the host initialized a session.
func (s *Setup) noteMeta(params []byte) {
	if s.eraKnown.Load() || params == nil {
		return
	}
	if jsonlex.Get(jsonlex.Get(params, "_meta"), metaProtocolVersion) != nil {
		s.mu.Lock()
		if s.initReq == nil {
			s.stateless = true
		}
		s.mu.Unlock()
		s.eraKnown.Store(true)
	}
}

func (s *Setup) ask(id []byte, a asked) {
	k := jsonlex.IDKey(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, dup := s.pending[k]; dup {
		a.seq = old.seq // where it is in order
		s.pending[k] = a
		return
	}
	for len(s.pending) >= maxSetupAwaited {
		// The oldest still pending goes (order may also hold entries of requests
		// since answered, or cancelled: some of a key asked again since).
		old := s.order[0]
		s.order[0] = awaited{}
		s.order = s.order[1:]
		if s.current(old) {
			delete(s.pending, old.key)
			s.waiting.Add(-1)
		}
	}
	if len(s.order) >= 2*maxSetupAwaited {
		// Stale entries are dropped, so that order stays within twice the bound.
		kept := s.order[:0]
		for _, o := range s.order {
			if s.current(o) {
				kept = append(kept, o)
			}
		}
		clear(s.order[len(kept):])
		s.order = kept
	}
	s.seq++
	a.seq = s.seq
	s.order = append(s.order, awaited{key: k, seq: a.seq})
	s.pending[k] = a
	s.waiting.Add(1)
}

// forget drops the request whose id is the raw requestId of a host's
// notifications/cancelled: the server need not answer it, and an answer that still
// came would be to a request the host gave up on.
func (s *Setup) forget(params []byte) {
	if s.waiting.Load() == 0 {
		return
	}
	id := jsonlex.Get(params, "requestId")
	if len(id) == 0 {
		return
	}
	k := jsonlex.IDKey(id)
	s.mu.Lock()
	if _, ok := s.pending[k]; ok {
		delete(s.pending, k)
		s.waiting.Add(-1)
	}
	s.mu.Unlock()
}

// FromServer looks at a message the server sends (a line: one message or a batch), in
// the order they come.
func (s *Setup) FromServer(msg []byte) {
	if s.waiting.Load() == 0 {
		return
	}
	jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) {
		if !f.IsResponse() {
			return
		}
		k := jsonlex.IDKey(f.ID)
		s.mu.Lock()
		defer s.mu.Unlock()
		a, ok := s.pending[k]
		if !ok {
			return
		}
		delete(s.pending, k)
		s.waiting.Add(-1)
		if f.Result == nil || f.Error != nil {
			return // refused: it set nothing up
		}
		s.answered(a, f.Result)
	})
}

// answered applies what request a set up, now that its result came. Called with mu.
func (s *Setup) answered(a asked, result []byte) {
	switch a.kind {
	case askInitialize:
		s.initReq = a.msg
		s.version = jsonlex.StringOf(jsonlex.Get(result, "protocolVersion"))
		s.caps = bytes.Clone(jsonlex.Get(result, "capabilities"))
		s.serverInfo = bytes.Clone(jsonlex.Get(result, "serverInfo"))
		s.stateless = false
		s.eraKnown.Store(true)
	case askSetLevel:
		s.setLevel = a.msg
	case askSubscribe:
		for i := range s.subs {
			if s.subs[i].uri == a.uri {
				s.subs[i].req = a.msg // the latest request for a uri is the one replayed
				return
			}
		}
		s.subs = append(s.subs, subscription{uri: a.uri, req: a.msg})
	case askUnsubscribe:
		for i := range s.subs {
			if s.subs[i].uri == a.uri {
				s.subs = append(s.subs[:i], s.subs[i+1:]...)
				return
			}
		}
	case askToolsList:
		s.tools = bytes.Clone(jsonlex.Get(result, "tools"))
	case askDiscover:
		if s.initReq == nil {
			s.stateless = true
			s.eraKnown.Store(true)
		}
	}
}

// Lost says the server went away: the requests awaiting its answer will never get one
// (their writer answered them with errors), so they set nothing up.
func (s *Setup) Lost() {
	s.mu.Lock()
	clear(s.pending)
	clear(s.order)
	s.order = s.order[:0]
	s.waiting.Store(0)
	s.mu.Unlock()
}

// Era is the era the host speaks, as far as its messages have said.
func (s *Setup) Era() Era {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.initReq != nil:
		return EraSession
	case s.stateless:
		return EraStateless
	default:
		return EraUnknown
	}
}

// ProtocolVersion is the version the server's initialize answer negotiated ("" before).
func (s *Setup) ProtocolVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Capabilities is the raw capabilities object of the server's initialize answer: what
// the host was told the server can do (nil before).
func (s *Setup) Capabilities() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps
}

// ToolsListChanged reports whether the host was told the server's tool list may
// change (capabilities.tools.listChanged is true), so that it listens for
// notifications/tools/list_changed.
func (s *Setup) ToolsListChanged() bool {
	return string(jsonlex.Get(jsonlex.Get(s.Capabilities(), "tools"), "listChanged")) == "true"
}

// Tools is the raw tools array of the last first-page tools/list answer the host got
// (nil when it never listed them).
func (s *Setup) Tools() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

// Rehandshake is what brings a new server to the state the host set up on the old one.
// The caller sends Initialize, waits for its answer (matching InitializeID), checks it
// with CheckInitialize, and only then sends After, in order. Answers to every request
// here are the caller's: the host never sent them and must never see their answers.
type Rehandshake struct {
	// Initialize is the host's initialize request with its bytes unchanged but for the
	// id; nil when there is no session to re-establish (the stateless era, or a host
	// whose initialize was never answered).
	Initialize   []byte
	InitializeID []byte // the raw id given to Initialize
	// After is the host's notifications/initialized as it sent it (when it did), then
	// its last logging/setLevel and each live resources/subscribe, as it sent them but
	// for their ids.
	After [][]byte
	// AfterIDs are the raw ids of the requests in After.
	AfterIDs [][]byte
}

// Rehandshake builds the messages that bring a new server to the state the host set
// up. newID returns a fresh raw JSON id (a JSON string, quotes included) from the
// caller's own namespace for each request, one no host request uses.
func (s *Setup) Rehandshake(newID func() []byte) Rehandshake {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rh Rehandshake
	if s.initReq == nil {
		return rh
	}
	rh.InitializeID = newID()
	rh.Initialize = withID(s.initReq, rh.InitializeID)
	if s.initialized != nil {
		rh.After = append(rh.After, s.initialized)
	}
	restore := func(req []byte) {
		id := newID()
		rh.After = append(rh.After, withID(req, id))
		rh.AfterIDs = append(rh.AfterIDs, id)
	}
	if s.setLevel != nil {
		restore(s.setLevel)
	}
	for _, sub := range s.subs {
		restore(sub.req)
	}
	return rh
}

// InitAnswer is what a new server's initialize answer said.
type InitAnswer struct {
	ProtocolVersion string
	Capabilities    []byte // raw
	ServerInfo      []byte // raw
}

// VersionMismatchError says a new server negotiated a different protocol version than
// the old one did with the host: carrying on would speak to the host in one version
// and to the server in another.
type VersionMismatchError struct {
	Negotiated, Offered string
}

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("the new server speaks protocol version %q, not the %q the host negotiated", e.Offered, e.Negotiated)
}

// CheckInitialize reads a new server's answer to Rehandshake's Initialize: an error
// answer, or a result with a protocolVersion other than the one the host negotiated
// (a *VersionMismatchError), means the session cannot go on with this server.
func (s *Setup) CheckInitialize(answer []byte) (InitAnswer, error) {
	f, ok := jsonlex.TopFields(answer)
	if !ok || !f.IsResponse() {
		return InitAnswer{}, fmt.Errorf("checking the answer to initialize: not a JSON-RPC response: %.200s", answer)
	}
	if f.Error != nil || f.Result == nil {
		msg := jsonlex.StringOf(jsonlex.Get(f.Error, "message"))
		if msg == "" {
			msg = string(f.Error)
		}
		return InitAnswer{}, fmt.Errorf("the server refused initialize: %.200s", msg)
	}
	a := InitAnswer{
		ProtocolVersion: jsonlex.StringOf(jsonlex.Get(f.Result, "protocolVersion")),
		Capabilities:    bytes.Clone(jsonlex.Get(f.Result, "capabilities")),
		ServerInfo:      bytes.Clone(jsonlex.Get(f.Result, "serverInfo")),
	}
	if want := s.ProtocolVersion(); a.ProtocolVersion != want {
		return a, &VersionMismatchError{Negotiated: want, Offered: a.ProtocolVersion}
	}
	return a, nil
}

// withID returns the object msg with the value of every top-level "id" member replaced
// by id, every other byte as it was (key order, spacing, unknown members: a server
// sees the host's request, not a re-encoding of it). Every, not the last: of duplicate
// ids a server may act on either, and neither may be the host's.
func withID(msg, id []byte) []byte {
	ms, _, ok := jsonlex.Members(msg, jsonlex.SkipSpace(msg, 0))
	if !ok {
		return nil // not reached: msg is an object EachRPC could follow
	}
	out := make([]byte, 0, len(msg)+len(id))
	last := 0
	for _, m := range ms {
		if jsonlex.KeyIs(msg[m.Key.Start:m.Key.End], "id") {
			out = append(out, msg[last:m.Value.Start]...)
			out = append(out, id...)
			last = m.Value.End
		}
	}
	return append(out, msg[last:]...)
}

// Listens are the host's subscriptions/listen streams still open.
func (s *Setup) Listens() *Listens { return &s.listens }

// Awaiting reports whether some request that sets the session up still waits for
// its answer (FromServer must see that answer whole: a Streamer's reader asks).
func (s *Setup) Awaiting() bool { return s.waiting.Load() > 0 }
