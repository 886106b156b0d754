package upstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/backoff"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// The Streamable HTTP client, both eras: the session era (2025-03-26 … 2025-11-25:
// Mcp-Session-Id, a GET stream for server-initiated messages, resumable streams,
// DELETE at the end) and the stateless era (2026-07-28: each request carries its
// protocol version in params._meta, mirrored into MCP-Protocol-Version, Mcp-Method and
// Mcp-Name headers; no session, no GET stream). Which era a message belongs to is read
// from the message itself, so the host decides, as it would talking HTTP directly.

// Header names (http.Header canonicalises them; the spec spells them MCP-…).
const (
	hdrSessionID   = "Mcp-Session-Id"
	hdrVersion     = "Mcp-Protocol-Version"
	hdrMethod      = "Mcp-Method"
	hdrName        = "Mcp-Name"
	hdrLastEventID = "Last-Event-Id"
)

const (
	// maxResumes is how many times in a row a broken stream is resumed without a new
	// event before its request is answered with an error (the go-sdk's limit).
	maxResumes = 5
	// A session whose GET stream gets a 404 within reinitMax of its start expired at
	// once; after maxReinits of them in a row the next is kept without a GET stream
	// (getLost). A server that answered every GET with 404 drove ~1,000 initialize
	// POSTs a second and a core's worth of CPU. (session.RenewPolicy paces and bounds
	// the new sessions themselves.)
	reinitMax  = 30 * time.Second
	maxReinits = 5
)

// session is the state of a Streamable HTTP session (the session era).
type session struct {
	id      string // Mcp-Session-Id; "" when the server gave none
	version string // the protocol version of the initialize answer
	// initKey is the IDKey of the host's initialize while its answer is awaited.
	initKey string
	// ready is closed when requests may go: no initialize answer and no re-handshake
	// is awaited.
	ready chan struct{}
	gen   int // bumped by each initialize; a GET stream serves one generation
	// stopListen ends the GET stream of the current generation.
	stopListen context.CancelFunc
	// statelessVersion is the protocol version of the host's last stateless-era
	// request, for its notifications (which carry no _meta).
	statelessVersion string
}

// streamableHTTP is the Streamable HTTP side of a remoteConn: its POSTs, their
// answers and the GET stream. The session state it reads is the connection's
// (c.sess, guarded by c.mu), which the sender shares.
type streamableHTTP struct {
	c       *remoteConn
	onWire  []<-chan struct{}           // sender only: requests posted, maybe not on the wire yet
	postHdr atomic.Pointer[postHeaders] // see postHeader
	// toolHeaders are the x-mcp-header annotations of the tools, by tool name
	// (guarded by c.mu).
	toolHeaders map[string][]paramHeader
	pool        exchangePool
}

func (c *remoteConn) waitReady() bool {
	c.mu.Lock()
	ch := c.sess.ready
	c.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// send sends one host message over Streamable HTTP. In auto mode before the
// transport is known, the first POST is made here and waited for, since a fallback
// must resend it before anything that follows.
func (st *streamableHTTP) send(m *outMsg, auto bool) {
	if auto {
		st.firstPost(m)
		return
	}
	if !m.isRequest {
		st.waitOnWire()
	}
	sent, status := st.post(m)
	if m.isRequest {
		st.onWire = appendUnsent(st.onWire, sent)
		return
	}
	select {
	case <-sent:
	case <-st.c.ctx.Done():
	}
	switch {
	case m.method == "notifications/initialized" && m.version == "":
		// The GET stream opens before anything else goes: a server that sends a
		// request unrelated to any POST (sampling, elicitation, roots) drops it
		// when no GET stream is open.
		select {
		case <-status:
		case <-st.c.ctx.Done():
		}
		st.startListen(true)
	case !m.isRequest:
		// A notification or a response is answered at once (202); waiting for that
		// keeps it ahead of what the host sent next, where a server handles each
		// POST on its own (a cancel overtaking its request). A request's answer may
		// take as long as its tool, so a request is never waited for.
		waitStatus(st.c.ctx, status)
	}
}

// appendUnsent adds sent to the requests that may not be on the wire yet. A host
// that only sends requests never has them waited for (waitOnWire empties the list),
// so the ones already on the wire are forgotten as it grows, or it would grow for as
// long as the session lasts.
func appendUnsent(list []<-chan struct{}, sent <-chan struct{}) []<-chan struct{} {
	if len(list) >= 64 {
		list = slices.DeleteFunc(list, isClosed)
	}
	return append(list, sent)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitOnWire waits until every request sent before is on the wire (sender only).
func (st *streamableHTTP) waitOnWire() {
	for _, ch := range st.onWire {
		select {
		case <-ch:
		case <-st.c.ctx.Done():
		}
	}
	clear(st.onWire)
	st.onWire = st.onWire[:0]
}

// waitStatus waits for an exchange's HTTP status, at most readyWait.
func waitStatus(ctx context.Context, status <-chan int) {
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-status:
	case <-t.C:
	case <-ctx.Done():
	}
}

// post starts m's exchange on a goroutine of its own. sent is closed once the
// request is on the wire (or failed); status gets the HTTP status (0 for none).
func (st *streamableHTTP) post(m *outMsg) (sent <-chan struct{}, status <-chan int) {
	sentCh := make(chan struct{})
	statusCh := make(chan int, 1)
	// Only a stateless-era request can be cancelled on its own (by ending its
	// exchange); every other exchange ends with the connection's context, and a
	// context of its own would cost each request an allocation and a lock on the
	// connection's context shared by every request in flight.
	ctx, abort := st.c.ctx, context.CancelFunc(nil)
	var done chan struct{}
	if m.version != "" {
		ctx, abort = context.WithCancel(st.c.ctx)
		done = make(chan struct{})
		st.setAbort(m, abort, done)
	}
	st.c.reqs.Add(1)
	st.pool.spawn(func() {
		defer st.c.reqs.Done()
		if done != nil {
			defer close(done)
			defer abort()
		}
		st.exchange(ctx, m, sentCh, statusCh)
	})
	return sentCh, statusCh
}

// abortLater closes the response stream of m, a session-era request the host
// cancelled, after cancelGrace, unless every request of it was answered by then.
func (st *streamableHTTP) abortLater(m *outMsg) {
	st.c.wg.Add(1) // the sender's own count is held: no Add after Close's Wait began
	go func() {
		defer st.c.wg.Done()
		t := time.NewTimer(cancelGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-st.c.ctx.Done():
			return
		}
		if st.c.stillPending(m) {
			return // another request of its batch still awaits its answer
		}
		st.c.log.Debug("closing the response stream of a cancelled request", "grace", cancelGrace)
		m.ex.abort()
	}()
}

// exchangePool is the goroutines that run the exchanges of a connection's POSTs
// (spawn).
type exchangePool struct {
	work chan func() // hands an exchange to an idle worker
	idle atomic.Int32
	wg   *sync.WaitGroup // the connection's: Close waits for every worker
	ctx  context.Context // the connection's: idle workers end with it
}

// maxIdleWorkers is how many exchange goroutines wait for the next exchange (about
// the calls a busy host keeps in flight); more end when they finish.
const maxIdleWorkers = 64

// spawn runs f on an idle exchange goroutine, or on a new one. An exchange goes deep
// into net/http, so a new goroutine grows (copies) its stack on the way, once per
// request: a tenth of the proxy's CPU with 32 calls in flight. A goroutine kept for
// the next exchange keeps its grown stack. Idle ones wait without a timer (no
// wake-ups while the host is quiet) and end with the connection.
func (p *exchangePool) spawn(f func()) {
	select {
	case p.work <- f:
		return
	default:
	}
	p.wg.Add(1)
	go p.worker(f)
}

func (p *exchangePool) worker(f func()) {
	defer p.wg.Done()
	for {
		f()
		if p.idle.Add(1) > maxIdleWorkers {
			p.idle.Add(-1)
			return
		}
		select {
		case f = <-p.work:
			p.idle.Add(-1)
		case <-p.ctx.Done():
			p.idle.Add(-1)
			return
		}
	}
}

// setConn notes the connection a stateless-era request went out on, so that a cancel
// can close it at once (see cancelled).
func (st *streamableHTTP) setConn(m *outMsg, conn net.Conn) {
	st.c.mu.Lock()
	for _, id := range m.ids {
		if p := st.c.pending[jsonlex.IDKey(id)]; p != nil {
			p.conn = conn
		}
	}
	st.c.mu.Unlock()
}

// setAbort gives a stateless-era request's pending entry the means to cancel it:
// abort ends its exchange, and done is closed when the exchange has ended.
func (st *streamableHTTP) setAbort(m *outMsg, abort context.CancelFunc, done chan struct{}) {
	if m.version == "" {
		return
	}
	st.c.mu.Lock()
	for _, id := range m.ids {
		if p := st.c.pending[jsonlex.IDKey(id)]; p != nil {
			p.abort, p.done = abort, done
		}
	}
	st.c.mu.Unlock()
}

// exchange POSTs m and handles the answer. sent and status may be nil.
func (st *streamableHTTP) exchange(ctx context.Context, m *outMsg, sent chan struct{}, status chan int) {
	resp, sid, err := st.roundTrip(ctx, m, sent)
	if err != nil {
		m.ex.ended()
		if status != nil {
			status <- 0
		}
		if ctx.Err() == nil { // else the host cancelled it, or the proxy is stopping
			st.c.fail(m, httpFailure(err))
		}
		return
	}
	if status != nil {
		status <- resp.StatusCode
	}
	if m.isRequest && m.version == "" {
		m.ex.setBody(resp.Body) // a cancel may end it
		defer m.ex.ended()
	}
	st.handleAnswer(ctx, m, resp, sid)
}

// roundTrip POSTs m and returns the response once its headers arrived, and the
// session id the request carried. A request refused before any byte of it was sent is
// tried again (three times in all, 100 ms then 200 ms apart); one that may have
// reached the server never is.
func (st *streamableHTTP) roundTrip(ctx context.Context, m *outMsg, sent chan struct{}) (*http.Response, string, error) {
	var once sync.Once
	markSent := func() {
		if sent != nil {
			once.Do(func() { close(sent) })
		}
	}
	defer markSent()
	for attempt := 0; ; attempt++ {
		var wrote atomic.Bool
		trace := &httptrace.ClientTrace{
			WroteHeaders: func() { wrote.Store(true) },
			WroteRequest: func(httptrace.WroteRequestInfo) { markSent() },
		}
		if m.version != "" {
			trace.GotConn = func(info httptrace.GotConnInfo) { st.setConn(m, info.Conn) }
		} else if m.isRequest {
			trace.GotConn = func(info httptrace.GotConnInfo) { m.ex.setConn(info.Conn) } // a cancel may end it
		}
		req, sid := st.newPost(httptrace.WithClientTrace(ctx, trace), m)
		resp, err := st.c.client.Do(req)
		if err == nil {
			return resp, sid, nil
		}
		if wrote.Load() || attempt >= 2 || !refusedBeforeSending(err) {
			return nil, sid, err
		}
		st.c.log.Debug("connection refused; trying again", "attempt", attempt+1)
		if !backoff.Sleep(ctx, time.Duration(100<<attempt)*time.Millisecond) {
			return nil, sid, err
		}
	}
}

// withWriteTrace notes, in wrote, that a request's first byte left (from then on it
// may have reached the server and is never retried), and calls sent once all of it did.
func withWriteTrace(ctx context.Context, wrote *atomic.Bool, sent func()) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteHeaders: func() { wrote.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { sent() },
	})
}

// newPost builds the POST of m: its exact bytes, and the headers of the era it belongs
// to. The request is built from parts made once (the parsed URL, the headers of the
// session state), not from the URL's text, which would be parsed again for every call.
func (st *streamableHTTP) newPost(ctx context.Context, m *outMsg) (*http.Request, string) {
	st.c.mu.Lock()
	sid, version, stateless := st.c.sess.id, st.c.sess.version, st.c.sess.statelessVersion
	st.c.mu.Unlock()
	if m.method == "initialize" {
		sid, version = "", "" // a new session; the version is not negotiated yet
	}
	mirror := false // the stateless era's Mcp-Method and Mcp-Name
	switch {
	case m.version != "":
		// The stateless era: the header must match the body's _meta, and the method
		// and name are mirrored for intermediaries (2026-07-28 "Request Metadata").
		version, mirror = m.version, true
	case version != "":
	case stateless != "" && m.method != "" && m.method != "initialize":
		version, mirror = stateless, true
	}
	// h is this request's own copy: a header that changes per request (a refreshed
	// credential, say) is set on it, never on the shared set postHeader returns.
	h := st.postHeader(sid, version).Clone()
	if mirror {
		st.statelessHeaders(h, m)
	}
	st.c.authHeader(ctx, h)
	raw := m.raw
	req := &http.Request{
		Method:        http.MethodPost,
		URL:           st.c.url, // shared, never changed: the client and transport only read it
		Host:          st.c.host,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(raw)),
		ContentLength: int64(len(raw)),
		// For a redirect (307/308) and for the transport's resend on a kept-alive
		// connection the server had closed before any byte went.
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
	}
	return req.WithContext(ctx), sid
}

// postHeaders is the header set of the POSTs of one session state.
type postHeaders struct {
	sid, version string
	h            http.Header // never changed once made: cloned for each request
}

// postHeader returns the headers every POST with this session id and protocol version
// carries: the --header ones, then the protocol's own (set after them, so that a user
// header cannot break the exchange). It is remade only when the session changes.
func (st *streamableHTTP) postHeader(sid, version string) http.Header {
	if p := st.postHdr.Load(); p != nil && p.sid == sid && p.version == version {
		return p.h
	}
	h := make(http.Header, len(st.c.header)+4)
	for k, vs := range st.c.header {
		if !strings.EqualFold(k, "Host") {
			h[k] = vs
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		h.Set(hdrSessionID, sid)
	}
	if version != "" {
		h.Set(hdrVersion, version)
	}
	st.postHdr.Store(&postHeaders{sid: sid, version: version, h: h})
	return h
}

// userHeaders puts the --header headers on req. The protocol's own headers are set
// after them, so a user header cannot break the exchange.
func (c *remoteConn) userHeaders(req *http.Request) {
	for k, vs := range c.header {
		if strings.EqualFold(k, "Host") && len(vs) > 0 {
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}
	c.authHeader(req.Context(), req.Header)
}

// authHeader sets the Authorizer's Authorization on h (a request's own headers), when
// there is an Authorizer and it has a credential.
func (c *remoteConn) authHeader(ctx context.Context, h http.Header) {
	if c.auth == nil {
		return
	}
	v, err := c.auth.Header(ctx)
	if err != nil {
		c.log.Debug("no OAuth credentials for the request", "err", c.scrub.Replace(err.Error()))
	}
	if v != "" {
		c.scrub.seen(v) // before it leaves: the answer may quote it
		h.Set("Authorization", v)
	}
}

// hostOf is the Host of the requests to u: a --header "Host: …" or u's host, as
// http.NewRequest sets it.
func hostOf(u *url.URL, h http.Header) string {
	for k, vs := range h {
		if strings.EqualFold(k, "Host") && len(vs) > 0 {
			return vs[0]
		}
	}
	host := u.Host
	if p := u.Port(); p == "" && strings.HasSuffix(host, ":") {
		host = strings.TrimSuffix(host, ":") // NewRequest drops an empty port
	}
	return host
}

// statelessHeaders sets Mcp-Method and, for the methods that name something, Mcp-Name.
func (st *streamableHTTP) statelessHeaders(h http.Header, m *outMsg) {
	if m.method == "" {
		return
	}
	h.Set(hdrMethod, m.method)
	var src []byte
	switch m.method {
	case "tools/call", "prompts/get":
		src = jsonlex.Get(m.params, "name")
	case "resources/read":
		src = jsonlex.Get(m.params, "uri")
	}
	if src != nil {
		if s, ok := jsonlex.DecodeString(src); ok {
			h.Set(hdrName, headerValue(s))
		}
	}
	if m.method == "tools/call" {
		st.paramHeaders(h, m)
	}
}

// headerValue encodes a value for an Mcp-Name or Mcp-Param header: as it is when it is
// plain visible ASCII without leading or trailing blanks, else "=?base64?…?=" (and so
// is a plain value that looks like that form).
func headerValue(s string) string {
	plain := len(s) == 0 || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')
	for i := 0; plain && i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c > 0x7E {
			plain = false
		}
	}
	if plain && strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?=") {
		plain = false
	}
	if plain {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// handleAnswer reads the answer to m (its body is closed here).
func (st *streamableHTTP) handleAnswer(ctx context.Context, m *outMsg, resp *http.Response, sid string) {
	defer resp.Body.Close()
	code := resp.StatusCode
	if m.method == "initialize" && code/100 == 2 {
		if id := resp.Header.Get(hdrSessionID); id != "" {
			st.c.mu.Lock()
			st.c.sess.id = id
			st.c.mu.Unlock()
		}
	}
	switch {
	case code == http.StatusNotFound && sid != "":
		// The session expired (the spec: a 404 for a request carrying the session
		// id), and the connection ends with it. The request was refused, not run:
		// the next session gets it (SessionEndedError).
		drain(resp.Body)
		st.c.endSession("the server's session expired (HTTP 404)", m)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		drain(resp.Body)
		retry, why := st.c.reauthorize(ctx, m, resp)
		if retry {
			st.exchange(ctx, m, nil, nil)
			return
		}
		st.c.authRefused(m, code, why)
	case code/100 == 2:
		st.readAnswer(ctx, m, resp)
	default:
		st.c.refused(m, resp)
	}
}

// readAnswer reads a successful answer: one JSON message, an event stream, or nothing
// (202 for a notification or a response).
func (st *streamableHTTP) readAnswer(ctx context.Context, m *outMsg, resp *http.Response) {
	ct := mediaType(resp.Header.Get("Content-Type"))
	switch {
	case ct == "text/event-stream":
		st.readStream(ctx, m, resp.Body)
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent || resp.ContentLength == 0:
		drain(resp.Body)
		if m.isRequest {
			st.c.fail(m, fmt.Sprintf("the server answered HTTP %d with no response", resp.StatusCode))
		}
	case ct == "application/json" || ct == "":
		body, held, err := readBodyIn(resp.Body, resp.ContentLength, st.c.max, st.c.bodies)
		if err != nil {
			if ctx.Err() == nil {
				st.c.fail(m, "reading the answer: "+httpFailure(err))
			}
			return
		}
		if body = oneLine(body); len(body) == 0 {
			st.c.bodies.give(held)
			if m.isRequest {
				st.c.fail(m, "the server answered with an empty body")
			}
			return
		}
		st.c.deliverHeld(body, held)
		if st.c.stillPending(m) {
			st.c.fail(m, "the server's answer did not answer the request")
		}
	default:
		drain(resp.Body)
		st.c.fail(m, fmt.Sprintf("the server answered with Content-Type %q, neither JSON nor an event stream", ct))
	}
}

// refused answers m for an HTTP error status. A body that is a JSON-RPC error is the
// server's own answer and is passed on with its bytes (the request's id put in when
// the server left it null or out, as it may over HTTP); otherwise the status is said.
func (c *remoteConn) refused(m *outMsg, resp *http.Response) {
	if resp.StatusCode/100 == 3 { // a redirect checkRedirect would not follow
		drain(resp.Body)
		c.fail(m, c.redirected(resp))
		return
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyCap))
	body = oneLine(body)
	code := resp.StatusCode
	if len(m.ids) == 1 && body != nil {
		if f, ok := jsonlex.TopFields(body); ok && f.Error != nil && f.Method == nil && c.stillPending(m) {
			if scrubbed, ok := c.scrubJSON(body); ok { // else said as text below, scrubbed
				body = scrubbed
				if f.ID == nil || string(f.ID) == "null" || jsonlex.IDKey(f.ID) != jsonlex.IDKey(m.ids[0]) {
					body = withAnswerID(body, m.ids[0])
				}
				c.deliver(body)
				return
			}
		}
	}
	why := fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
	if text := strings.TrimSpace(string(body)); text != "" && len(text) < 300 {
		why += ": " + text
	}
	c.fail(m, why)
}

// withAnswerID returns msg (a JSON object) with its top-level id set to id, the member
// added when msg has none.
func withAnswerID(msg, id []byte) []byte {
	ms, _, ok := jsonlex.Members(msg, jsonlex.SkipSpace(msg, 0))
	if !ok {
		return msg
	}
	out := make([]byte, 0, len(msg)+len(id)+8)
	if v, found := jsonlex.Last(msg, ms, "id"); found {
		out = append(out, msg[:v.Start]...)
		out = append(out, id...)
		return append(out, msg[v.End:]...)
	}
	i := jsonlex.SkipSpace(msg, 0) + 1
	out = append(out, msg[:i]...)
	out = append(out, `"id":`...)
	out = append(out, id...)
	if len(ms) > 0 {
		out = append(out, ',')
	}
	return append(out, msg[i:]...)
}

// readStream reads an event stream answering m, forwarding each message as its event
// completes, until m's requests are answered. A stream that breaks first is resumed
// with a GET carrying Last-Event-ID, after the server's retry time (or a backoff), as
// long as the server gave the stream event ids.
func (st *streamableHTTP) readStream(ctx context.Context, m *outMsg, body io.Reader) {
	lastID, retry, tries := "", time.Duration(0), 0
	var resumed io.Closer // the body of the current resumption GET
	defer func() {
		if resumed != nil {
			resumed.Close()
		}
	}()
	for {
		sr, tooLong := st.pump(ctx, m, body)
		if ctx.Err() != nil || len(m.ids) == 0 || !st.c.stillPending(m) {
			return
		}
		if sr.LastID != "" && sr.LastID != lastID {
			lastID, tries = sr.LastID, 0
		}
		if sr.Retry > 0 {
			retry = sr.Retry
		}
		switch {
		case tooLong:
			st.c.fail(m, fmt.Sprintf("the answer was over the %d-byte cap (--max-message)", st.c.max))
			return
		case m.method == "subscriptions/listen":
			// Not resumed (the stateless era has no Last-Event-ID): POSTed again
			// (relisten), or answered.
			st.c.fail(m, "the server ended the stream before answering")
			return
		case lastID == "":
			st.c.fail(m, "the server ended the stream before answering")
			return
		case tries >= maxResumes:
			st.c.fail(m, fmt.Sprintf("the stream broke and could not be resumed (%d tries)", tries))
			return
		}
		tries++
		delay := retry
		if delay <= 0 {
			delay = reconnectWait(tries)
		}
		if !backoff.Sleep(ctx, delay) {
			return
		}
		resp, sid, err := st.get(ctx, lastID)
		if err != nil {
			body = bytes.NewReader(nil)
			continue
		}
		if resp.StatusCode == http.StatusNotFound && sid != "" {
			drain(resp.Body)
			resp.Body.Close()
			// The request ran, or may have: it is lost with the session.
			st.c.endSession("the server's session expired (HTTP 404) while an answer was on its way", nil)
			return
		}
		if resp.StatusCode/100 != 2 || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
			drain(resp.Body)
			resp.Body.Close()
			st.c.fail(m, fmt.Sprintf("the stream broke and the server would not resume it (HTTP %d)", resp.StatusCode))
			return
		}
		st.c.log.Debug("resuming a broken stream", "last-event-id", lastID)
		if resumed != nil {
			resumed.Close()
		}
		body, resumed = resp.Body, resp.Body
	}
}

// pump forwards the messages of one event stream until it ends, or until m (when
// not nil) has been answered.
func (st *streamableHTTP) pump(ctx context.Context, m *outMsg, body io.Reader) (sr *sseReader, tooLong bool) {
	sr = newSSEReader(body, st.c.max)
	sr.bodies = st.c.bodies // the events of streams read at once share the cap too
	defer sr.release()
	for {
		ev, err := sr.Next()
		if err != nil {
			return sr, tooLong
		}
		if ev.Name != "" && ev.Name != "message" {
			continue
		}
		if ev.TooLong {
			st.c.log.Warn("dropped a message from the server: over the size cap", "bytes", ev.Size, "cap", st.c.max)
			if m != nil && len(m.ids) > 0 {
				// A stream of one request's: its answer may be this very event, which
				// may never end. The request is failed; the stream is not read on.
				if ev.Shared {
					st.c.fail(m, (&budgetError{max: st.c.max}).Error())
					return sr, false
				}
				return sr, true
			}
			continue
		}
		if len(ev.Data) == 0 {
			continue // a priming event: an id to resume from, no message
		}
		st.c.deliverHeld(oneLine(ev.Data), ev.Held)
		if m != nil && len(m.ids) > 0 && !st.c.stillPending(m) {
			return sr, false
		}
		if ctx.Err() != nil {
			return sr, false
		}
	}
}

// get opens an event stream with a GET: the standalone stream, or the resumption of a
// broken one (lastID set).
func (st *streamableHTTP) get(ctx context.Context, lastID string) (*http.Response, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, st.c.url.String(), nil)
	st.c.userHeaders(req)
	req.Header.Set("Accept", "text/event-stream")
	st.c.mu.Lock()
	sid, version := st.c.sess.id, st.c.sess.version
	st.c.mu.Unlock()
	if sid != "" {
		req.Header.Set(hdrSessionID, sid)
	}
	if version != "" {
		req.Header.Set(hdrVersion, version)
	}
	if lastID != "" {
		req.Header.Set(hdrLastEventID, lastID)
	}
	resp, err := st.c.client.Do(req)
	return resp, sid, err
}

// startListen opens the GET stream of the current session; with wait, it returns once
// the stream is open (or refused), or after readyWait.
func (st *streamableHTTP) startListen(wait bool) {
	st.c.mu.Lock()
	if st.c.sess.version >= "2026-07-28" { // that era has no GET stream
		st.c.mu.Unlock()
		return
	}
	if st.c.sess.stopListen != nil {
		st.c.sess.stopListen()
	}
	ctx, stop := context.WithCancel(st.c.ctx)
	st.c.sess.stopListen = stop
	st.c.mu.Unlock()
	opened := make(chan struct{})
	st.c.wg.Add(1)
	go st.listen(ctx, opened)
	if !wait {
		return
	}
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-opened:
	case <-t.C:
		st.c.log.Debug("the GET stream is slow to open; going on")
	case <-st.c.ctx.Done():
	}
}

// listen keeps the GET stream open for server-initiated messages: reopened after a
// break with Last-Event-ID, after the server's retry time or a growing backoff, until
// the session ends or the server says it offers none.
func (st *streamableHTTP) listen(ctx context.Context, opened chan struct{}) {
	defer st.c.wg.Done()
	var once sync.Once
	open := func() { once.Do(func() { close(opened) }) }
	defer open()
	lastID, retry, failures := "", time.Duration(0), 0
	for {
		resp, sid, err := st.get(ctx, lastID)
		open()
		if ctx.Err() != nil {
			if err == nil {
				resp.Body.Close()
			}
			return
		}
		if err != nil {
			failures++
			st.c.log.Debug("the GET stream could not be opened", "err", st.c.scrub.Replace(httpFailure(err)))
		} else {
			code := resp.StatusCode
			switch {
			case code == http.StatusMethodNotAllowed:
				resp.Body.Close()
				st.c.log.Debug("the server offers no GET stream")
				return
			case code == http.StatusNotFound && sid != "":
				resp.Body.Close()
				// The session is gone: it ends now, and the next one is started at
				// once, so that what the server sends on its own reaches the host
				// again without waiting for a call. Unless every new session's GET
				// stream got a 404 at once: this one is kept for requests.
				if !st.c.getLost(st.c.started) {
					st.c.endSession("the server's session expired (HTTP 404)", nil)
				}
				return
			case code == http.StatusUnauthorized || code == http.StatusForbidden:
				resp.Body.Close()
				// With OAuth, a renewed token reopens it (after the backoff, so a
				// server that keeps refusing costs a request a growing while).
				if st.c.auth != nil && failures < maxResumes {
					if retry, _ := st.c.auth.Refused(ctx, code, resp.Header.Values("WWW-Authenticate"), resp.Request.Header.Get("Authorization")); retry {
						failures++
						break
					}
				}
				st.c.log.Warn("the server refused the GET stream", "status", code)
				return
			case code/100 != 2 || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream":
				resp.Body.Close()
				if code < 500 && code != http.StatusTooManyRequests {
					st.c.log.Warn("the server answered the GET stream with no event stream; server-initiated messages only come with calls", "status", code)
					return
				}
				failures++
			default:
				// The session works: a later 404 starts afresh.
				st.c.getWorked()
				sr, _ := st.pump(ctx, nil, resp.Body)
				resp.Body.Close()
				if sr.LastID != "" && sr.LastID != lastID {
					lastID, failures = sr.LastID, 0
				}
				if sr.Retry > 0 {
					retry = sr.Retry
				}
				failures++
			}
		}
		delay := reconnectWait(failures)
		if retry > 0 && failures <= 1 {
			delay = retry
		}
		if !backoff.Sleep(ctx, delay) {
			return
		}
	}
}

// firstPost is the first POST in auto mode. When it fails the way a server of the old
// HTTP+SSE transport fails it (400, 404 or 405, with a body that is not a JSON-RPC
// error: a JSON-RPC error proves the endpoint speaks MCP over POST), the URL is tried
// as an SSE endpoint; if that works the connection uses HTTP+SSE from then on,
// starting with this message. Otherwise it is a Streamable HTTP server, and the answer
// is handled as such.
func (st *streamableHTTP) firstPost(m *outMsg) {
	ctx, abort := context.WithCancel(st.c.ctx)
	done := make(chan struct{})
	st.setAbort(m, abort, done)
	resp, sid, err := st.roundTrip(ctx, m, nil)
	if err != nil {
		abort()
		close(done)
		st.c.fail(m, httpFailure(err)) // still undecided: the next message tries again
		return
	}
	code := resp.StatusCode
	if code == http.StatusBadRequest || code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyCap))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if f, ok := jsonlex.TopFields(bytes.TrimSpace(body)); !ok || f.Error == nil {
			if st.c.sse.connect() == nil {
				abort()
				close(done)
				st.c.mu.Lock()
				st.c.mode = modeLegacy
				st.c.mu.Unlock()
				st.c.decided.Store(int32(modeLegacy))
				st.c.log.Info("the server speaks the HTTP+SSE transport (2024-11-05); using it", "url", st.c.shownURL)
				st.c.settle(TransportSSE)
				st.c.sse.send(m)
				return
			}
		}
	}
	st.c.mu.Lock()
	decided := st.c.mode == modeUndecided
	if decided {
		st.c.mode = modeStreamable
	}
	st.c.mu.Unlock()
	if decided && st.c.decided.CompareAndSwap(int32(modeUndecided), int32(modeStreamable)) {
		st.c.settle(TransportHTTP)
	}
	st.c.reqs.Add(1)
	st.c.wg.Add(1)
	go func() {
		defer st.c.wg.Done()
		defer st.c.reqs.Done()
		defer close(done)
		defer abort()
		st.handleAnswer(ctx, m, resp, sid)
	}()
}

// endSession deletes the session, if there is one (Close's gentle step). The answer
// is not waited for beyond deleteTimeout.
func (st *streamableHTTP) endSession() {
	st.c.mu.Lock()
	sid, version, md := st.c.sess.id, st.c.sess.version, st.c.mode
	st.c.mu.Unlock()
	if sid == "" || md == modeLegacy {
		return
	}
	ctx, cancel := context.WithTimeout(st.c.ctx, deleteTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, st.c.url.String(), nil)
	st.c.userHeaders(req)
	req.Header.Set(hdrSessionID, sid)
	if version != "" {
		req.Header.Set(hdrVersion, version)
	}
	resp, err := st.c.client.Do(req)
	if err != nil {
		st.c.log.Debug("could not end the session", "err", st.c.scrub.Replace(httpFailure(err)))
		return
	}
	drain(resp.Body)
	resp.Body.Close()
}

// reconnect is the pacing of a stream's reconnection: 1 s growing by half each time,
// up to 30 s, drawn with full jitter.
var reconnect = backoff.Policy{Base: time.Second, Cap: 30 * time.Second, Factor: 1.5, Jitter: backoff.Full}

// reconnectWait is the wait before reconnection attempt n (from 1).
func reconnectWait(n int) time.Duration { return reconnect.Next(max(n-1, 0), 0) }

func mediaType(ct string) string {
	// A media type is ASCII, case-insensitive, and ends at its parameters;
	// mime.ParseMediaType would also build a map of them, for every answer.
	t, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// drain reads a little of what is left of a body, so its connection can be reused.
func drain(r io.Reader) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r, 64<<10))
}
