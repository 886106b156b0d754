package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/httpclient"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/redact"
)

// Transports of a remote upstream (--transport).
const (
	TransportAuto = "auto" // Streamable HTTP, falling back to HTTP+SSE as the spec says
	TransportHTTP = "http" // Streamable HTTP only (both eras)
	TransportSSE  = "sse"  // the 2024-11-05 HTTP+SSE transport only
)

const (
	// DefaultConnectTimeout bounds reaching the server (TCP, TLS, a proxy's CONNECT).
	// Nothing else has a time limit: a tool call or an event stream may run for hours.
	DefaultConnectTimeout = 10 * time.Second
	// deleteTimeout bounds the DELETE that ends a session at exit: a server that
	// accepts the connection and never answers must not hold the proxy's exit.
	deleteTimeout = 2 * time.Second
	// outQueue is how many host messages may wait for the sender; past it Write waits,
	// as a full pipe would.
	outQueue = 256
	// errorBodyCap is how much of a refused request's body is read to explain it.
	errorBodyCap = 1 << 20
	// readyWait bounds how long the host's next messages wait for the GET stream to
	// open after notifications/initialized. A server that is slow to answer the GET
	// only costs that much once; one that answers it at once costs nothing.
	readyWait = 2 * time.Second
	// ownAnswerWait bounds each request of a re-handshake.
	ownAnswerWait = 30 * time.Second
)

// Remote is how to reach an MCP server over HTTP: the Dialer of a remote upstream.
type Remote struct {
	URL       string
	Transport string // TransportAuto ("" too), TransportHTTP or TransportSSE
	// Header is sent with every request (Authorization, API keys). Its values are
	// secrets: they never appear in a log line or an error.
	Header http.Header
	// Name is the server's name in logs and in the errors the host gets.
	Name string
	// Logger gets the connection's log lines. It is expected to name the server
	// already (the proxy's logger does); nil means slog.Default() with server=Name.
	Logger *slog.Logger
	// Stderr gets event data that is not a JSON-RPC message, as "[name] data" (as a
	// stdio server's stray stdout lines are); nil means os.Stderr.
	Stderr io.Writer
	// MaxMessage caps one message from the server (0: 256 MiB, framing's default).
	MaxMessage int
	// ConnectTimeout bounds each connection attempt (0: DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// CloseGrace is how long Close lets requests under way finish before it ends
	// them (0: DefaultInputGrace, the stdio server's grace).
	CloseGrace time.Duration
	// Client, when set, is used as is (tests); otherwise NewHTTPClient(ConnectTimeout).
	Client *http.Client
	// Settled, when set, is called once the transport is known: TransportHTTP or
	// TransportSSE. A forced transport is known at once (Dial calls it); auto is known
	// when the first POST is answered, before the answer reaches Read. It must not
	// wait (it runs on the connection's sender).
	Settled func(transport string)
	// Auth, when set, gives each request its Authorization header and is told of the
	// 401s and 403s (OAuth). An Authorization in Header wins: Auth is then not used.
	Auth Authorizer
}

// Authorizer gives a remote upstream's requests their credentials: the OAuth client
// (package oauth) is one.
type Authorizer interface {
	// Header is the Authorization value for a request now ("" for none). It may
	// refresh a token first (one round trip); it never waits for a person.
	Header(ctx context.Context) (string, error)
	// Refused is told that a request sent with the Authorization value sent was
	// answered status (401 or 403) with these WWW-Authenticate values. retry says the
	// request should be sent again (a 401 means the server did not act on it; a 403
	// insufficient_scope, that it refused before acting). It may wait, within its own
	// bound, for a sign-in; err says what the user must do when there is none.
	Refused(ctx context.Context, status int, challenges []string, sent string) (retry bool, err error)
}

// maxAuthRetries bounds how often one message is sent again after a 401 or 403: a
// new token, then a step-up, and no more (a server that keeps refusing must not make
// the proxy loop).
const maxAuthRetries = 2

// NewHTTPClient is the client of a remote upstream: HTTPS_PROXY/HTTP_PROXY/NO_PROXY
// honoured (the recorder's own client ignores them: it is on loopback), a connect
// timeout, keep-alive connections enough for many calls in flight, and no overall
// timeout (http.Client.Timeout would cut a long tool call or an event stream).
// It never retries on its own: an MCP POST may have run a tool (see roundTrip).
func NewHTTPClient(connectTimeout time.Duration) *http.Client {
	if connectTimeout <= 0 {
		connectTimeout = DefaultConnectTimeout
	}
	return httpclient.New(httpclient.Options{
		Standard:            true, // HTTP/2 attempted, Expect-Continue 1 s, idle connections closed after 90 s
		Proxy:               httpclient.FromEnv,
		Redirects:           httpclient.Follow, // a remoteConn replaces it with checkRedirect
		DialTimeout:         connectTimeout,
		KeepAlive:           30 * time.Second,
		TLSHandshakeTimeout: connectTimeout,
		IdleConnTimeout:     90 * time.Second,
		// The default of 2 idle connections per host would close and redial most
		// connections under 32 calls in flight.
		MaxIdleConns:        128,
		MaxIdleConnsPerHost: 64,
	})
}

// Dial returns a connection to the server: one session, which ends (Read returns a
// *SessionEndedError) when the server says it is gone. It does not touch the network:
// the first host message makes the first request, so a server that is down when the
// host starts costs the host an error answer per request, not a dead proxy. Each Dial
// starts afresh; the connections of one Sessions share what outlives a session.
func (r Remote) Dial(ctx context.Context) (Conn, error) {
	d, err := r.Sessions()
	if err != nil {
		return nil, err
	}
	return d.Dial(ctx)
}

// Sessions returns the Dialer of r's sessions, one connection each, for the session
// room (session.Conn) to replace one that ended: they share the HTTP client, the credentials
// seen (scrubbed from every text), the transport auto settled on (Settled is called
// once) and the record of sessions whose GET stream the server refused at once.
func (r Remote) Sessions() (Dialer, error) {
	sh, err := newRemoteShared(r)
	if err != nil {
		return nil, err
	}
	return sh, nil
}

// Dial returns a new session's connection (Dialer).
func (sh *remoteShared) Dial(context.Context) (Conn, error) {
	return newRemote(sh), nil
}

// mode is the transport a remoteConn settled on.
type mode int

const (
	modeUndecided  mode = iota // auto, before the first answer
	modeStreamable             // Streamable HTTP
	modeLegacy                 // HTTP+SSE (2024-11-05)
)

// remoteShared is what the sessions of one remote server share (Remote.Sessions): the
// settings, the client, the credentials, the transport auto settled on, and the
// lines said once. It is the Dialer of their connections.
type remoteShared struct {
	name     string
	url      *url.URL
	shownURL string // the URL with credentials and query secrets redacted
	client   *http.Client
	header   http.Header
	log      *slog.Logger
	stderr   io.Writer
	scrub    *scrubber  // every secret value → [REDACTED], for any text we emit
	auth     Authorizer // nil: no OAuth (none given, or --header Authorization)
	max      int
	forced   string // "", TransportHTTP or TransportSSE
	settled  func(string)
	grace    time.Duration
	host     string // the Host of every request
	connect  time.Duration

	// decided is the transport auto settled on (a mode), for the next sessions.
	decided atomic.Int32
	// authSaid: the 401/403 line was written. redirectSaid: the line about a redirect
	// not followed was written (once, as every request of a moved server would say it).
	authSaid, redirectSaid atomic.Bool
	// gets is the record of sessions whose GET stream got a 404 at once (getLost).
	gets getLosses
}

// remoteConn is a Conn to one session of a server over HTTP. Writes go to one sender
// goroutine, which starts each POST in the order the host wrote them (the next starts
// once the previous one's bytes are on the wire) and never waits for an answer,
// except where the server needs it: after initialize (servers refuse a request sent
// before the initialize answer) and after notifications/initialized (until the GET
// stream is open, or server-initiated requests sent in between are lost). Each answer
// is read by the request's own goroutine and handed to Read as each message completes.
//
// A network failure, a refused request or a stream that ends without an answer is
// answered by the connection itself: Read returns a JSON-RPC error with the request's
// id, naming the server and the cause. That, rather than an error from Write, is the
// one way failures reach the host, because most of them happen after Write returned
// (a POST is asynchronous), and so that Write never waits for a connection attempt.
//
// The connection ends with its session, as a child's stdout ends with the child
// (end.go): a 404 for its session id, or the end of its HTTP+SSE event stream. Read
// then returns a *SessionEndedError carrying the host's messages the session refused
// unrun, and Write fails as on a closed pipe; the session room (package session)
// holds them and dials the next session. Each message goes to the transport the connection settled
// on (mode): http (streamableHTTP, streamable.go) or sse (legacySSE, sse.go).
type remoteConn struct {
	*remoteShared

	ctx    context.Context // ends every request and stream: Close's last step
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine started
	reqs   sync.WaitGroup // requests under way (the part of wg Close waits for gently)

	out        chan *outMsg
	closing    chan struct{} // closed when Close starts: Write refuses
	senderDone chan struct{}
	hurry      chan struct{} // Terminate: no grace
	hurryOnce  sync.Once
	closeOnce  sync.Once
	finished   chan struct{} // everything has ended; Read returns io.EOF once inbox is empty
	inbox      chan inItem   // the server's messages, and what happened to the session, in order
	// shut is closed by Close as it ends everything: what waits to put a message in
	// inbox gives up. Not at the session's end (ctx): an answer read before it is
	// still the host's (Read drains the inbox until the end is over), or a call that
	// ran would be answered as lost, and run again by a host that retries.
	shut chan struct{}
	// bodies bounds the answer bodies being read or waiting in inbox, together, by
	// the cap (readBodyIn): N calls answered at once cost the cap, not N caps.
	bodies *budget
	// setup follows the host's listen streams, which a stream the server drops is
	// POSTed again for (relisten.go).
	setup   *Setup
	started time.Time
	end     sessionEnd // the session's end (end.go)
	// seq numbers the messages the sender takes, then those the end drains from out
	// (never both at once): the refused ones keep the host's order.
	seq uint64

	mu      sync.Mutex
	mode    mode
	pending map[string]*pendingReq // requests awaiting an answer, by jsonlex.IDKey
	// failed are the keys of the requests the connection answered itself (fail): a
	// late answer from the server to one is dropped, or the host would get two.
	failed map[string]bool
	sess   session // Streamable HTTP session state
	// http and sse are the two transports; the mode says which one is used.
	http *streamableHTTP
	sse  *legacySSE
}

// pendingReq is a request sent to the server, not yet answered.
type pendingReq struct {
	id     []byte // raw, as the host sent it
	method string
	// abort ends the request's HTTP exchange: closing its response stream is how a
	// stateless-era (2026-07-28) client cancels.
	abort     context.CancelFunc
	done      chan struct{} // closed when the exchange abort ends has ended
	conn      net.Conn      // the connection it went out on (stateless era)
	stateless bool
	msg       *outMsg // the message it went in: its exchange, for a cancel to end
}

// outMsg is one message on its way to the server, and what was read from it.
type outMsg struct {
	raw       []byte
	ids       [][]byte // the ids of the requests in it (a batch may hold several)
	method    string   // "" for a response or a batch
	params    []byte
	isRequest bool
	// stateless-era request metadata (params._meta): the protocol version to send as
	// a header, when the message carries one.
	version string
	// authTries counts the sends again after a 401/403 (maxAuthRetries).
	authTries int
	// ex is the exchange under way, for a cancel to end it (session era).
	ex exchangeHandle
	// relistens counts the POSTs of a listen stream in a row since its last
	// acknowledgment (relisten).
	relistens int
	// seq orders the messages the session refused (SessionEndedError.Msgs).
	seq uint64
	// sent: its requests were registered pending (guarded by the connection's mu):
	// one no longer pending was answered or cancelled, and is not carried.
	sent bool
}

// cancelGrace is how long a session-era request the host cancelled keeps its response
// stream: the server may still send a last message for it (it is dropped: the host no
// longer waits), then the stream is closed. The TypeScript SDK's server never answers
// an aborted request and keeps its stream open, so without this every cancel kept a
// connection (a file descriptor) and a goroutine for as long as the session lasted.
const cancelGrace = 2 * time.Second

// exchangeHandle is how a session-era exchange is ended from outside: the connection
// the request went out on until the answer's headers came, then the answer's body.
// Each message has its own (no lock shared between requests in flight).
type exchangeHandle struct {
	mu      sync.Mutex
	conn    net.Conn
	body    io.Closer
	aborted bool
}

// setConn notes the connection the request went out on.
func (h *exchangeHandle) setConn(conn net.Conn) {
	h.mu.Lock()
	h.conn = conn
	h.mu.Unlock()
}

// setBody notes the answer's body (the connection is the body's from then on); an
// exchange aborted before its answer came has the body closed at once.
func (h *exchangeHandle) setBody(body io.Closer) {
	h.mu.Lock()
	h.conn, h.body = nil, body
	aborted := h.aborted
	h.mu.Unlock()
	if aborted {
		body.Close()
	}
}

// ended forgets the exchange (it is over: its connection may serve another request).
func (h *exchangeHandle) ended() {
	h.mu.Lock()
	h.conn, h.body = nil, nil
	h.mu.Unlock()
}

// renew makes the handle fit a new exchange of its request (sent again on a new
// session): an abort of the old one must not end it.
func (h *exchangeHandle) renew() {
	h.mu.Lock()
	h.conn, h.body, h.aborted = nil, nil, false
	h.mu.Unlock()
}

// abort ends the exchange: closing the body ends its read (over HTTP/2, by resetting
// the stream); before the answer's headers, closing the connection ends the wait for
// them (an HTTP/2 connection is shared and stays: its body is closed when it comes).
func (h *exchangeHandle) abort() {
	h.mu.Lock()
	h.aborted = true
	conn, body := h.conn, h.body
	h.mu.Unlock()
	switch {
	case body != nil:
		body.Close()
	case conn != nil && !isHTTP2(conn):
		conn.Close()
	}
}

func newRemoteShared(r Remote) (*remoteShared, error) {
	u, err := url.Parse(r.URL)
	if err != nil && strings.Contains(r.URL, "@") {
		// Nothing of the URL: url.Parse's error quotes it (cut at a '#'), and its
		// detail a piece of it ("invalid port \":pa\""): a password's, when it holds
		// a '/', '?' or '#' unescaped, which redact.URL cannot parse out either.
		return nil, errors.New("the server URL is not a URL (a password in it must have its '/', '?', '#' and '@' percent-encoded)")
	}
	if err != nil {
		return nil, fmt.Errorf("the server URL is not a URL: %w", redactErr(err, r.URL))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the server URL %s is not an http:// or https:// URL", redact.URL(r.URL))
	}
	sh := &remoteShared{
		name:     r.Name,
		url:      u,
		shownURL: redact.URL(r.URL),
		client:   r.Client,
		header:   r.Header.Clone(),
		log:      r.Logger,
		stderr:   r.Stderr,
		max:      r.MaxMessage,
		grace:    r.CloseGrace,
		settled:  r.Settled,
		connect:  r.ConnectTimeout,
	}
	switch r.Transport {
	case "", TransportAuto:
	case TransportHTTP:
		sh.forced = TransportHTTP
		sh.decided.Store(int32(modeStreamable))
	case TransportSSE:
		sh.forced = TransportSSE
		sh.decided.Store(int32(modeLegacy))
	default:
		return nil, fmt.Errorf("unknown transport %q: want auto, http or sse", r.Transport)
	}
	if sh.client == nil {
		sh.client = NewHTTPClient(r.ConnectTimeout)
	}
	if sh.log == nil {
		sh.log = slog.Default().With("server", sh.name)
	}
	if sh.stderr == nil {
		sh.stderr = os.Stderr
	}
	if sh.max <= 0 {
		sh.max = 256 << 20
	}
	if sh.grace <= 0 {
		sh.grace = DefaultInputGrace
	}
	sh.host = hostOf(u, sh.header)
	if r.Auth != nil && sh.header.Get("Authorization") == "" {
		sh.auth = r.Auth
	}
	sh.scrub = newScrubber(u, sh.header, sh.auth)
	// A copy (the caller's client, shared with the OAuth client, keeps its own
	// policy) that follows no redirect off the server's origin: net/http would send
	// the --header values, Mcp-Session-Id and a POST's body (the tool's arguments) to
	// wherever a 307 or 308 points, another host or port included.
	cl := *sh.client
	cl.CheckRedirect = sh.checkRedirect
	sh.client = &cl
	if sh.forced != "" {
		sh.settle(sh.forced)
	}
	return sh, nil
}

func newRemote(sh *remoteShared) *remoteConn {
	c := &remoteConn{
		remoteShared: sh,
		out:          make(chan *outMsg, outQueue),
		closing:      make(chan struct{}),
		senderDone:   make(chan struct{}),
		hurry:        make(chan struct{}),
		finished:     make(chan struct{}),
		shut:         make(chan struct{}),
		inbox:        make(chan inItem, 64),
		pending:      make(map[string]*pendingReq),
		setup:        NewSetup(),
		started:      time.Now(),
		mode:         mode(sh.decided.Load()),
	}
	c.bodies = newBudget(c.max)
	c.end.init()
	c.sess.ready = closedChan()
	c.http = &streamableHTTP{c: c}
	c.sse = &legacySSE{c: c, connectTimeout: sh.connect}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.http.pool = exchangePool{work: make(chan func()), wg: &c.wg, ctx: c.ctx}
	c.wg.Add(1)
	go c.sendLoop()
	return c
}

// settle says which transport the sessions use (Remote.Settled).
func (sh *remoteShared) settle(transport string) {
	if sh.settled != nil {
		sh.settled(transport)
	}
}

// maxRedirects bounds the same-origin redirects followed for one request (net/http's
// own limit).
const maxRedirects = 10

// checkRedirect is the remote client's redirect policy. The MCP transports define no
// redirect, so one is followed only where it cannot move a credential: to the URL's
// own origin (scheme, host and port), keeping the method (a 303, or a 301/302 of a
// POST, would turn the message into a GET without its body). Any other is not
// followed: its response is the answer, and the host is told where it pointed.
func (sh *remoteShared) checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0]
	if len(via) < maxRedirects && req.Method == first.Method && sameOrigin(req.URL, sh.url) {
		return nil
	}
	where := sh.scrub.Replace(redact.URL(req.URL.String()))
	if sh.redirectSaid.CompareAndSwap(false, true) {
		sh.log.Warn("the server redirected a request elsewhere; not following it (the credentials would go there)",
			"method", first.Method, "location", where)
	} else {
		sh.log.Debug("not following a redirect", "method", first.Method, "location", where)
	}
	return http.ErrUseLastResponse
}

// sameOrigin reports whether a and b have one origin: scheme, host and port (the
// scheme's default port when none is written).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && portOf(a) == portOf(b)
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// redirected is why a request answered with a redirect that was not followed failed.
func (c *remoteConn) redirected(resp *http.Response) string {
	code := resp.StatusCode
	where := "(no Location)"
	if loc, err := resp.Location(); err == nil {
		where = redact.URL(loc.String())
	}
	return fmt.Sprintf("HTTP %d %s to %s: not followed (bir-proxy follows a redirect only to the server URL's own origin, "+
		"keeping the method, so that no credential goes elsewhere); if that is the server's URL, give it as --url", code, http.StatusText(code), where)
}

// scrubber replaces every secret the connection knows wherever it appears: the last
// line of defence for text that reaches a log, the host or the journal, such as a
// server's error body that quotes the request. The fixed secrets are known at start
// (header values, the URL's password, query values under secret names); the OAuth
// credentials change as they are refreshed, so each Authorization value the
// connection sends is added as it is first sent (seen), and an Authorizer that holds
// more (a refresh token, a client secret) is asked for its current ones at each use.
type scrubber struct {
	fixed *strings.Replacer
	auth  Authorizer
	sent  atomic.Pointer[sentCreds] // the Authorization values sent, newest last
	mu    sync.Mutex                // serialises the writers of sent
}

// sentCreds is the set of credentials the connection sent, and their replacer.
type sentCreds struct {
	last string   // the newest value seen: the common case costs one comparison
	vals []string // at most maxSentCreds, newest last
	r    *strings.Replacer
}

// maxSentCreds is how many Authorization values are remembered: an answer to a
// request sent with a token before its refresh may still quote the old one.
const maxSentCreds = 8

// SecretHolder is an Authorizer that holds secrets besides the Authorization value its
// Header gives (an OAuth client: its refresh token, its client secret). Secrets returns
// the current ones; the connection scrubs them from every text it passes on.
type SecretHolder interface {
	Secrets() []string
}

func newScrubber(u *url.URL, h http.Header, auth Authorizer) *scrubber {
	var secrets []string
	for _, vs := range h {
		for _, v := range vs {
			secrets = appendSecret(secrets, v)
		}
	}
	if u.User != nil {
		// The password is a secret; the user name only when it looks like one (a
		// token given as the user, https://TOKEN@host): a name like "user" or "agent"
		// scrubbed from every text made a server's "user-agent" "[REDACTED]-agent".
		if p, ok := u.User.Password(); ok {
			secrets = appendSecret(secrets, p)
		}
		if name := u.User.Username(); redact.LooksLikeToken(name) {
			secrets = appendSecret(secrets, name)
		}
	}
	for k, vs := range u.Query() {
		if redact.IsSecretParam(k) {
			for _, v := range vs {
				secrets = appendSecret(secrets, v)
			}
		}
	}
	return &scrubber{fixed: strings.NewReplacer(secrets...), auth: auth}
}

// appendSecret adds the replacement pairs of secret v: v itself, its URL-escaped form,
// and for "Bearer abc" the token alone, which may be quoted too.
func appendSecret(pairs []string, v string) []string {
	add := func(s string) {
		if len(s) >= 4 { // shorter ones would replace ordinary text
			pairs = append(pairs, s, redact.Redacted)
			if e := url.QueryEscape(s); e != s {
				pairs = append(pairs, e, redact.Redacted)
			}
		}
	}
	add(v)
	if _, tok, ok := strings.Cut(v, " "); ok {
		add(strings.TrimSpace(tok))
	}
	return pairs
}

// seen notes an Authorization value sent (on every request: one atomic load and one
// string comparison when it is the last one seen).
func (s *scrubber) seen(v string) {
	if v == "" {
		return
	}
	if cur := s.sent.Load(); cur != nil && cur.last == v {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.sent.Load()
	var vals []string
	if cur != nil {
		if cur.last == v {
			return
		}
		for _, old := range cur.vals {
			if old != v {
				vals = append(vals, old)
			}
		}
	}
	vals = append(vals, v)
	if len(vals) > maxSentCreds {
		vals = vals[len(vals)-maxSentCreds:]
	}
	var pairs []string
	for i := len(vals) - 1; i >= 0; i-- { // the whole "Bearer x" before the token alone
		pairs = appendSecret(pairs, vals[i])
	}
	s.sent.Store(&sentCreds{last: v, vals: vals, r: strings.NewReplacer(pairs...)})
}

// Replace returns text with every secret known now replaced by [REDACTED].
func (s *scrubber) Replace(text string) string {
	text = s.fixed.Replace(text)
	if cur := s.sent.Load(); cur != nil {
		text = cur.r.Replace(text)
	}
	if h, ok := s.auth.(SecretHolder); ok {
		var pairs []string
		for _, v := range h.Secrets() {
			pairs = appendSecret(pairs, v)
		}
		if len(pairs) > 0 {
			text = strings.NewReplacer(pairs...).Replace(text)
		}
	}
	return text
}

// scrubJSON is msg, a JSON-RPC error the server sent with an HTTP error status, with
// the secrets the connection knows replaced: a server that quotes a credential back
// (its Authorization echoed in the message) would otherwise carry it to the host and
// the journal, where the same text made by the proxy is scrubbed. It is the one edit
// besides the id, and only on this path: an answer with a 2xx status is relayed with
// its bytes. ok is false when the edit would leave msg not JSON (a secret holding a
// quote); the caller then says the error as text, which is scrubbed.
func (c *remoteConn) scrubJSON(msg []byte) (out []byte, ok bool) {
	s := c.scrub.Replace(string(msg))
	if s == string(msg) {
		return msg, true
	}
	out = []byte(s)
	return out, jsonlex.Valid(out)
}

// redactErr is err's text with raw (a URL that may hold secrets) redacted.
func redactErr(err error, raw string) error {
	return errors.New(strings.ReplaceAll(err.Error(), raw, redact.URL(raw)))
}

func closedChan() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// Read returns the next message from the server, or an answer the connection made
// for a request the server could not answer.
func (c *remoteConn) Read() ([]byte, error) {
	var it inItem
	select {
	case it = <-c.inbox:
	case <-c.end.over:
		// The session ended and nothing of it runs: what it sent is read first.
		select {
		case it = <-c.inbox:
		default:
			return nil, c.endError()
		}
	case <-c.finished:
		select {
		case it = <-c.inbox:
		default:
			return nil, io.EOF
		}
	}
	if it.said != nil {
		return nil, it.said
	}
	// The relay has it now: one message at a time, past the budget of those still
	// read or waiting.
	c.bodies.give(it.held)
	return it.msg, nil
}

// inItem is one thing Read returns: a message of the server's, or (said) what
// happened to the session, for the reader to settle (see Conn).
type inItem struct {
	msg  []byte
	said error
	held int64 // bytes of c.bodies msg holds: given back as Read returns it
}

// tell puts what happened to the session in the inbox, in order with the server's
// messages.
func (c *remoteConn) tell(said error) {
	select {
	case c.inbox <- inItem{said: said}:
	case <-c.shut:
	}
}

// Capabilities says what a remote connection can do: batch (Buffered), stop at once,
// and name its session. Holding the host's messages while a session is replaced, and
// settling the replacement, are the session room's (package session). It keeps a
// written message (a POST may be retried), so it does not promise CopiesWrites.
func (c *remoteConn) Capabilities() Capabilities {
	return Capabilities{Batcher: c, Terminator: c, SessionIdentifier: c}
}

// SessionID is the server's Mcp-Session-Id for the session now (SessionIdentifier).
func (c *remoteConn) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess.id
}

// Buffered reports whether Read will return a message without waiting. With it (and
// Hold) the connection is a Batcher, so under load the relay writes several answers
// to the host in one system call instead of one each.
func (c *remoteConn) Buffered() bool { return len(c.inbox) > 0 }

// Hold is Write: a POST cannot wait for the next message.
func (c *remoteConn) Hold(msg []byte) error { return c.Write(msg) }

// Flush has nothing to do: Hold held nothing.
func (c *remoteConn) Flush() error { return nil }

var errRemoteClosed = errors.New("the connection to the server is closed")

// Write queues msg for the server. It waits only when outQueue messages are already
// waiting (as a full pipe would), never for an answer. Once the session ended it fails
// as a write to a dead child's pipe does (errSessionOver): the session room holds the
// message for the next session.
func (c *remoteConn) Write(msg []byte) error {
	m := parseOut(msg)
	// Read-locked while it queues: the end waits for every Write under way, then
	// takes what they queued as refused, so none is queued after and lost.
	c.end.writes.RLock()
	defer c.end.writes.RUnlock()
	// The end first: a Write racing the session room's stop of an ended session
	// (its Close) is held for the next session, not failed (errRemoteClosed is no
	// closed pipe).
	if c.ended() {
		return errSessionOver
	}
	select {
	case <-c.closing:
		return errRemoteClosed
	default:
	}
	select {
	case c.out <- m:
		return nil
	case <-c.end.ended:
		return errSessionOver
	case <-c.closing:
		if c.ended() {
			return errSessionOver
		}
		return errRemoteClosed
	}
}

// parseOut reads what the sender needs from a host message (the body is never
// changed).
func parseOut(msg []byte) *outMsg {
	m := &outMsg{raw: msg}
	single := false
	jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) {
		if f.IsRequest() {
			m.ids = append(m.ids, f.ID)
			m.isRequest = true
		}
		if !single {
			single = true
			if f.Method != nil {
				m.method, _ = jsonlex.DecodeString(f.Method)
			}
			m.params = f.Params
		} else {
			m.method, m.params = "", nil // a batch: no one method
		}
	})
	if meta := jsonlex.Get(m.params, "_meta"); meta != nil {
		if v := jsonlex.Get(meta, "io.modelcontextprotocol/protocolVersion"); v != nil {
			m.version, _ = jsonlex.DecodeString(v)
		}
	}
	return m
}

// Close ends the session (SPEC §6, for a server that is not a process): no more
// writes; what was written is sent; requests under way get CloseGrace to be answered;
// the session is deleted (bounded); then everything still running is ended and waited
// for. It returns once nothing it started is running; Read then returns what was
// received and io.EOF.
func (c *remoteConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closing)
		// One deadline for both waits, as a channel that stays closed: a timer's
		// channel delivers once, so when the first wait took it the second waited
		// for every request under way (an initialize the server never answers: the
		// proxy still running 7 s after a 2 s grace).
		expired := make(chan struct{})
		deadline := time.AfterFunc(c.grace, func() { close(expired) })
		defer deadline.Stop()
		select {
		case <-c.senderDone:
		case <-expired:
		case <-c.hurry:
		}
		reqsDone := make(chan struct{})
		go func() { c.reqs.Wait(); close(reqsDone) }()
		select {
		case <-reqsDone:
		case <-expired:
		case <-c.hurry:
		}
		if !c.ended() {
			c.http.endSession() // a session that ended has nothing to delete
		}
		c.cancel()
		close(c.shut)
		c.wg.Wait()
		<-reqsDone
		c.end.wait()
		c.client.CloseIdleConnections()
		close(c.finished)
	})
	<-c.finished
	return nil
}

// Terminate is Close without the grace: the proxy was told to stop.
func (c *remoteConn) Terminate() {
	c.hurryOnce.Do(func() { close(c.hurry) })
	c.Close()
}

func (c *remoteConn) sendLoop() {
	defer c.wg.Done()
	defer close(c.senderDone)
	for {
		select {
		case m := <-c.out:
			c.send(m)
		case <-c.ctx.Done():
			return // the session ended: what is queued is refused (end.go)
		case <-c.closing:
			for {
				select {
				case m := <-c.out:
					c.send(m)
				default:
					return
				}
			}
		}
	}
}

// send sends one host message, in order.
func (c *remoteConn) send(m *outMsg) {
	c.seq++ // numbered here, off the host's path: the order they reach the sender
	m.seq = c.seq
	if m.method == "notifications/cancelled" && c.cancelled(m) {
		return
	}
	// Whatever comes after an initialize waits for its answer (servers refuse a
	// request sent before it).
	if c.ended() || !c.waitReady() {
		if c.refuse(m) {
			return // never sent: the next session gets it
		}
		c.fail(m, "the proxy is stopping")
		return
	}
	c.setup.FromHost(m.raw) // before the write: the answer may come before it returns
	c.mu.Lock()
	for _, id := range m.ids {
		c.pending[jsonlex.IDKey(id)] = &pendingReq{id: id, method: m.method, stateless: m.version != "", msg: m}
	}
	m.sent = true
	if m.method == "initialize" && len(m.ids) == 1 {
		c.sess.gen++
		c.sess.id, c.sess.version = "", ""
		c.sess.initKey = jsonlex.IDKey(m.ids[0])
		c.sess.ready = make(chan struct{})
		if c.sess.stopListen != nil {
			c.sess.stopListen()
			c.sess.stopListen = nil
		}
	}
	if m.version != "" {
		c.sess.statelessVersion = m.version
	}
	md := c.mode
	c.mu.Unlock()
	switch md {
	case modeLegacy:
		c.sse.send(m)
	default:
		c.http.send(m, md == modeUndecided)
	}
	if m.method == "initialize" {
		c.waitReady()
	}
}

// cancelled handles the host's notifications/cancelled. The request is no longer the
// host's to wait for, so no error is made up for it if its stream ends unanswered. A
// stateless-era request is cancelled by closing its response stream, the one way that
// era's HTTP transport has; the notification itself is then not sent (the spec says
// none is expected there). It reports whether the notification was consumed.
func (c *remoteConn) cancelled(m *outMsg) bool {
	id := jsonlex.Get(m.params, "requestId")
	if id == nil {
		return false
	}
	key := jsonlex.IDKey(id)
	c.mu.Lock()
	p := c.pending[key]
	delete(c.pending, key)
	var conn net.Conn
	var done chan struct{}
	stateless := p != nil && p.stateless && p.abort != nil
	if stateless {
		conn, done = p.conn, p.done
	}
	c.mu.Unlock()
	if p != nil && !stateless && p.msg != nil {
		// The notification goes to the server (the session era's way to cancel);
		// the request's stream is closed after the grace.
		c.http.abortLater(p.msg)
	}
	if stateless {
		if ls := c.setup.Listens(); ls.Open() {
			// Setup does not see this notification (it is not sent): a listen
			// stream cancelled must not be POSTed again, nor remembered.
			ls.Closed(id)
		}
		c.log.Debug("the host cancelled a stateless-era request: closing its stream", "connection known", conn != nil)
		p.abort()
		// What the host sends next must not reach the server before it sees this
		// stream closed, as on stdio the cancel comes first: a server asked right
		// after what it saw must have seen the cancellation. Cancelling the context
		// closes an HTTP/1 connection on the transport's own goroutine, later; so the
		// connection is closed here, now, and the exchange waited for. (Over HTTP/2
		// the cancel is a stream reset on the shared connection, ahead of any later
		// request by construction, and the connection must stay.)
		if conn != nil && !isHTTP2(conn) {
			// A reset rather than a FIN: a server that still owes this response
			// keeps a half-closed connection open until its next write fails, and
			// would see the cancellation only then.
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			conn.Close()
		}
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		return true
	}
	return false
}

func isHTTP2(conn net.Conn) bool {
	tc, ok := conn.(*tls.Conn)
	return ok && tc.ConnectionState().NegotiatedProtocol == "h2"
}

// deliver hands a message from the server to Read, after the bookkeeping: answers end
// their pending requests; answers to the connection's own requests go to their waiter
// instead (the host never sees them); the initialize answer records the protocol
// version and releases the messages held behind it.
func (c *remoteConn) deliver(msg []byte) { c.deliverHeld(msg, 0) }

// deliverHeld is deliver of a message for which held bytes are charged to c.bodies:
// given back when the relay takes it (Read), or when it goes no further.
func (c *remoteConn) deliverHeld(msg []byte, held int64) {
	queued := false
	defer func() {
		if !queued {
			c.bodies.give(held)
		}
	}()
	if !IsMessage(msg) {
		c.notMessage(msg)
		return
	}
	stale := false
	single := len(msg) > 0 && msg[0] == '{'
	jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) {
		if !f.IsResponse() {
			return
		}
		key := jsonlex.IDKey(f.ID)
		c.mu.Lock()
		if single && c.failed[key] && c.pending[key] == nil {
			// A late answer to a request the connection answered itself.
			delete(c.failed, key)
			c.mu.Unlock()
			stale = true
			return
		}
		if p := c.pending[key]; p != nil && p.method == "tools/list" && f.Result != nil {
			defer c.http.learnTools(f.Result) // after the lock
		}
		delete(c.pending, key)
		if c.sess.initKey != "" && key == c.sess.initKey {
			c.sess.initKey = ""
			if v := jsonlex.Get(f.Result, "protocolVersion"); v != nil {
				c.sess.version, _ = jsonlex.DecodeString(v)
			}
			close(c.sess.ready)
		}
		c.mu.Unlock()
		if ls := c.setup.Listens(); ls.Open() {
			// An answer ends a listen stream, however long: Listens.FromServer does
			// not read one over 64 KiB, and a stream left open there filled its
			// bound, so later streams were not carried (TestRemoteListenEndedByALongAnswer).
			ls.Closed(f.ID)
		}
	})
	if stale {
		return
	}
	c.setup.FromServer(msg)
	var notes [][]byte
	if ls := c.setup.Listens(); ls.Open() {
		// A listen stream POSTed again (relisten): its acknowledgment is kept back
		// when the host has it already, and the host is told what it may have missed
		// (listen.go), as after a stdio server's revival.
		var pass bool
		if pass, notes = ls.FromServer(msg, nil); !pass {
			c.tellNotes(notes)
			return
		}
	}
	select {
	case c.inbox <- inItem{msg: msg, held: held}:
		queued = true
	case <-c.shut:
	}
	c.tellNotes(notes)
}

// tellNotes puts notifications the connection makes for the host in the inbox.
func (c *remoteConn) tellNotes(notes [][]byte) {
	for _, n := range notes {
		select {
		case c.inbox <- inItem{msg: n}:
		case <-c.shut:
			return
		}
	}
}

// notMessage shows event data that is not a JSON-RPC message on stderr, as a stdio
// server's stray stdout lines are: the host must never see it.
func (c *remoteConn) notMessage(data []byte) {
	const show = 4096
	if len(data) > show {
		fmt.Fprintf(c.stderr, "[%s] %s… (%d bytes)\n", c.name, termtext.Line(c.scrub.Replace(string(data[:show]))), len(data))
		return
	}
	// Escaped, as a stdio server's stray line is (TestStrayLineIsEscapedOnNotes).
	fmt.Fprintf(c.stderr, "[%s] %s\n", c.name, termtext.Line(c.scrub.Replace(string(bytes.TrimRight(data, "\r\n")))))
}

// fail answers every request of m still pending with a JSON-RPC error naming the
// server and why; notifications and responses that could not be delivered are logged.
func (c *remoteConn) fail(m *outMsg, why string) {
	if c.ended() {
		// The session ended: what it owed is the reader's to answer (the session
		// room's ReplacedError), once.
		return
	}
	why = c.scrub.Replace(why)
	if len(m.ids) == 0 {
		c.log.Warn("could not deliver a message to the server", "url", c.shownURL, "method", m.method, "err", why)
		return
	}
	if c.relisten(m, why) {
		return // an open listen stream: POSTed again rather than answered
	}
	reason := fmt.Sprintf("bir-proxy: server %s (%s): %s", c.name, c.shownURL, why)
	var gone [][]byte
	for _, id := range m.ids {
		key := jsonlex.IDKey(id)
		c.mu.Lock()
		_, still := c.pending[key]
		if still {
			delete(c.pending, key)
			// The server may answer it after all (on a stream): the host has its
			// answer from the reader by then, and must not get two.
			if c.failed == nil || len(c.failed) >= maxForgotten {
				c.failed = make(map[string]bool)
			}
			c.failed[key] = true
			if c.sess.initKey != "" && key == c.sess.initKey {
				// No session came of the host's initialize: requests stop waiting.
				c.sess.initKey = ""
				close(c.sess.ready)
			}
		}
		c.mu.Unlock()
		if still { // else answered, or cancelled by the host
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		c.log.Debug("requests the server could not answer", "method", m.method, "err", why)
		for _, id := range gone {
			// Setup waits for the answers to what sets the session up: this one is
			// the reader's, and sets nothing up.
			c.setup.FromServer(errorAnswer(id, remoteErrorCode, reason))
			if ls := c.setup.Listens(); ls.Open() {
				ls.Closed(id) // a listen stream answered: ended
			}
		}
		c.tell(&UnansweredError{IDs: gone, Reason: reason})
	}
}

// maxForgotten bounds the keys kept of requests the connection answered itself
// (failed): a server whose POSTs fail all day must not grow the proxy. Past it the
// oldest failures' late answers, which no server sends in practice, would reach the
// host.
const maxForgotten = 4096

// remoteErrorCode is the code of the answers the connection makes itself: the one the
// relay uses for a server that could not answer.
const remoteErrorCode = -32000

func errorAnswer(id []byte, code int, message string) []byte {
	return jsonlex.ErrorResponse(id, code, message)
}

// stillPending reports whether any request of m awaits its answer.
func (c *remoteConn) stillPending(m *outMsg) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range m.ids {
		if _, ok := c.pending[jsonlex.IDKey(id)]; ok {
			return true
		}
	}
	return false
}

// reauthorize asks the Authorizer what to do about a 401/403 answer to m; true means
// send m again. why is what to tell the host otherwise.
func (c *remoteConn) reauthorize(ctx context.Context, m *outMsg, resp *http.Response) (retry bool, why error) {
	if c.auth == nil || m.authTries >= maxAuthRetries {
		return false, nil
	}
	m.authTries++
	sent := ""
	if resp.Request != nil {
		sent = resp.Request.Header.Get("Authorization")
	}
	return c.auth.Refused(ctx, resp.StatusCode, resp.Header.Values("WWW-Authenticate"), sent)
}

// authRefused says, once, that the server refused the credentials, and answers m;
// why, when set, is the Authorizer's word on it (what the user must do).
func (c *remoteConn) authRefused(m *outMsg, status int, why error) {
	if why != nil {
		c.fail(m, fmt.Sprintf("HTTP %d %s: %s", status, http.StatusText(status), why.Error()))
		return
	}
	said := c.authSaid.Swap(true)
	if c.auth != nil {
		if !said {
			c.log.Error(fmt.Sprintf("server %s refused the credentials (HTTP %d %s) after an OAuth sign-in", c.name, status, http.StatusText(status)), "url", c.shownURL)
		}
		c.fail(m, fmt.Sprintf("HTTP %d %s: the server refused the OAuth credentials", status, http.StatusText(status)))
		return
	}
	if !said {
		c.log.Error(fmt.Sprintf("server %s refused the credentials (HTTP %d %s): check the --header values it is given",
			c.name, status, http.StatusText(status)), "url", c.shownURL)
	}
	c.fail(m, fmt.Sprintf("HTTP %d %s: the server refused the credentials", status, http.StatusText(status)))
}

// httpFailure is why a request failed at the HTTP level, for the host.
func httpFailure(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text quotes the URL, query secrets and all
	}
	var over *overCapError
	if errors.As(err, &over) {
		return over.Error() // what happened, not "could not reach the server"
	}
	var shared *budgetError
	if errors.As(err, &shared) {
		return shared.Error()
	}
	if errors.Is(err, context.Canceled) {
		return "the request was ended (the proxy is stopping)"
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the server closed the connection before answering"
	}
	return "could not reach the server: " + err.Error()
}

// refusedBeforeSending reports whether err says no byte of the request left: the
// connection was never made. Only then is a POST retried (a tool call has side
// effects, and a request that may have reached the server must not run twice).
func refusedBeforeSending(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// overCapError is an answer over the --max-message cap.
type overCapError struct {
	length int64 // the announced length; -1 when the body had none
	max    int
}

func (e *overCapError) Error() string {
	if e.length >= 0 {
		return fmt.Sprintf("the answer is %d bytes, over the %d-byte cap (--max-message)", e.length, e.max)
	}
	return fmt.Sprintf("the answer exceeded the cap of %d bytes (--max-message)", e.max)
}

// readBody reads a whole answer body, up to max bytes, into one exact-size slice when
// the length is known. A body of unknown length is read in chunks that are never
// copied while it arrives, so that one over the cap costs at most the cap: the reading
// stops at max+1 bytes and the caller's Close drops the connection with the rest (a
// bytes.Buffer, doubling past the cap and copying as it grew, cost four times the cap
// for each over-cap answer: 1 GB at the default, 3.4 GB for four at once).
func readBody(r io.Reader, length int64, max int) ([]byte, error) {
	body, _, err := readBodyIn(r, length, max, nil)
	return body, err
}

// readBodyIn is readBody charging what it holds past its first freeBody bytes to b
// (nil: nothing is charged): held is what stays charged for the body returned, to be
// given back once it is passed on. When b cannot take more, the reading stops with a
// *budgetError. (Each exchange read its answer up to the cap: four calls answered at
// once just over the default cap cost +1 GB.)
func readBodyIn(r io.Reader, length int64, max int, b *budget) (body []byte, held int64, err error) {
	if length > int64(max) {
		return nil, 0, &overCapError{length: length, max: max}
	}
	take := func(n int) error {
		if !b.take(charged(held+int64(n)) - charged(held)) {
			return &budgetError{max: b.max}
		}
		held += int64(n)
		return nil
	}
	defer func() {
		if err != nil {
			b.give(charged(held))
			held = 0
		}
	}()
	if length >= 0 {
		if err := take(int(length)); err != nil {
			return nil, held, err
		}
		body := make([]byte, length)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, held, err
		}
		return body, charged(held), nil
	}
	const first, largest = 4 << 10, 8 << 20
	var chunks [][]byte
	total, size := 0, first
	for {
		n := min(size, max+1-total)
		if err := take(n); err != nil {
			return nil, held, err
		}
		chunk := make([]byte, n)
		got, err := fill(r, chunk)
		total += got
		if got > 0 {
			chunks = append(chunks, chunk[:got])
		}
		if total > max {
			return nil, held, &overCapError{length: -1, max: max}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, held, err
		}
		size = min(size*2, largest)
	}
	if len(chunks) == 1 {
		return chunks[0], charged(held), nil
	}
	// The one copy, not charged: the chunks it is made of are dropped right after,
	// so at most it doubles for a moment what the budget bounds.
	out := make([]byte, 0, total)
	for _, ch := range chunks {
		out = append(out, ch...)
	}
	return out, charged(held), nil
}

// freeBody is what an exchange may hold of its answer without charging the budget
// shared by the answers being read: small answers never wait on large ones.
const freeBody = 64 << 10

// charged is the part of held bytes that was charged to the budget.
func charged(held int64) int64 { return max(held-freeBody, 0) }

// budget bounds the bytes of the server's answers being read, or read and waiting for
// the relay, together (remoteConn.bodies): --max-message, shared. It never waits: an
// answer it cannot take is dropped, and its request answered with an error.
type budget struct {
	mu   sync.Mutex
	left int64
	max  int
}

func newBudget(max int) *budget { return &budget{left: int64(max), max: max} }

func (b *budget) take(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

func (b *budget) give(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
}

// budgetError is an answer dropped because the answers being read at once would
// together have passed the cap.
type budgetError struct{ max int }

func (e *budgetError) Error() string {
	return fmt.Sprintf("the answer was dropped: with the other answers being read at once it passed the %d-byte cap (--max-message), which they share", e.max)
}

// fill reads into b until it is full (err nil) or the reader ends (io.EOF, the clean
// end, told apart from a broken one: io.ReadFull would call both ErrUnexpectedEOF).
func fill(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// oneLine makes a JSON text fit on one NDJSON line. JSON strings cannot hold a raw CR
// or LF, so each one is whitespace between tokens; it becomes a space, which keeps the
// tokens apart. Servers answer with compact JSON, whose bytes stay as they are.
func oneLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	for i, ch := range b {
		if ch == '\n' || ch == '\r' {
			b[i] = ' '
		}
	}
	return b
}
