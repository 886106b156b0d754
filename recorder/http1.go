package recorder

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// http1 posts to a recorder at a plain http:// URL over kept-alive HTTP/1.1
// connections it writes and reads itself, on the caller's goroutine. A plain recorder
// gets one POST per report, and net/http's client cost about 45 µs of the proxy's CPU
// for each beyond the syscalls: a write loop and a read loop goroutine to hand the
// request and the answer through, a timer per request, the header map built and
// validated, a stack grown for every request's goroutine. Here a POST is one write
// (head and body together) and the reads of the answer; the answer is parsed by
// net/http's own http.ReadResponse, so what counts as a response is what net/http
// says. Anything else (https, a URL with credentials) goes through net/http.
type http1 struct {
	dialer  net.Dialer
	maxIdle int

	mu   sync.Mutex
	idle []*conn1 // most recently used last
	// serialUntil is when pipelining is tried again after the recorder ended a
	// connection that had requests pipelined on it still unanswered: until then, one
	// request per exchange. pause is how long the last such spell was: it doubles
	// while the tries fail (up to maxSerialPause), and starts again from the tuning's
	// when a group is answered whole. A recorder that cuts a connection for a reason
	// of its own (a restart, a limit of requests per connection) must not cost
	// pipelining for the rest of a day-long session; one that never takes pipelined
	// requests costs a group's resend once an hour.
	serialUntil time.Time
	pause       time.Duration
	basePause   time.Duration
	now         func() time.Time // time.Now; a test's clock
	// idleTimeout is how long a connection may wait in idle before it is closed;
	// reaper closes the ones past it, armed only while idle holds a connection.
	idleTimeout time.Duration
	reaper      *time.Timer
	reaping     bool // reaper is armed
	// base is the last endpoint URL parsed, and what it gave.
	base   string
	target target
}

// target is where an endpoint URL sends requests, for http1.
type target struct {
	ok     bool   // http1 can post there; else net/http does
	addr   string // host:port to dial
	host   string // the Host header
	prefix string // the URL's path, before the request's
}

type conn1 struct {
	nc   net.Conn
	lim  capReader // what br reads from: nc, up to a cap while an answer's head is read
	br   *bufio.Reader
	head []byte // the request heads, rebuilt for every exchange
	ends []int  // where each of head's requests ends
	addr string
	// idleAt is when the connection went back to idle.
	idleAt time.Time
	peek   *peeker // nil: only what br holds is seen before a reuse
}

// maxHeadBytes bounds one answer head (status line and headers), as net/http's
// server bounds a request's (http.DefaultMaxHeaderBytes). The client read a head of
// any size: a recorder sending 1 GiB of header cost the proxy ~3 GB of memory.
const maxHeadBytes = http.DefaultMaxHeaderBytes

// max1xx is how many informational (1xx) answers may come before the answer, as
// net/http's client allows; an endless run of them held the request (and a CPU)
// until its timeout.
const max1xx = 5

// errHeadTooLarge fails an answer whose head passed maxHeadBytes.
var errHeadTooLarge = fmt.Errorf("the recorder's answer head passed %d bytes", maxHeadBytes)

// errTooMany1xx fails an answer preceded by more than max1xx informational answers.
var errTooMany1xx = fmt.Errorf("the recorder sent more than %d informational (1xx) answers", max1xx)

// errAnswerTooLarge fails an answer whose body (with its framing) passed bodyCap.
var errAnswerTooLarge = errors.New("the recorder's answer passed its bound")

// capReader reads from r until n bytes have been read, then fails with err.
type capReader struct {
	r   io.Reader
	n   int64
	err error
}

// limit sets what may be read from now on, and the error once it has been.
func (c *capReader) limit(n int64, err error) { c.n, c.err = n, err }

func (c *capReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, c.err
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

// bodyCap bounds what is read of the connection for an answer's body (and, when
// chunked, its framing and trailer) once its head is in: the limit kept, the 1 MiB
// read past it so the connection can be reused, room for chunk framing, and a
// trailer's worth of head.
func bodyCap(limit int64) int64 { return maxHeadBytes + 2*(limit+1<<20) }

// badAnswer is an answer that broke a bound (its head, its 1xx answers): the recorder
// answered, so the request is not sent again on a new connection as for a dead
// kept-alive one.
type badAnswer struct{ err error }

func (e *badAnswer) Error() string { return e.err.Error() }
func (e *badAnswer) Unwrap() error { return e.err }

func newHTTP1(t tuning) *http1 {
	if t.serialPause <= 0 {
		t.serialPause = time.Minute
	}
	return &http1{
		dialer:      net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		maxIdle:     t.maxWindow,
		basePause:   t.serialPause,
		now:         time.Now,
		idleTimeout: t.idleTimeout,
	}
}

// maxSerialPause bounds a spell of one request per exchange.
const maxSerialPause = time.Hour

// targetOf parses (and remembers) where base points.
func (h *http1) targetOf(base string) target {
	h.mu.Lock()
	defer h.mu.Unlock()
	if base == h.base {
		return h.target
	}
	var t target
	if u, err := url.Parse(base); err == nil && u.Scheme == "http" && u.User == nil && u.Host != "" &&
		u.RawQuery == "" && u.Fragment == "" && u.Opaque == "" && headerValue(u.Host) && headerValue(u.EscapedPath()) &&
		!strings.ContainsAny(u.Host+u.EscapedPath(), " \t") {
		t.ok = true
		t.host = u.Host
		t.addr = u.Host
		if u.Port() == "" {
			t.addr = net.JoinHostPort(u.Hostname(), "80")
		}
		t.prefix = u.EscapedPath()
	}
	h.base, h.target = base, t
	return t
}

// post is client.postLimit over http1. ok is false when the URL is not one http1
// posts to, and nothing was sent.
func (h *http1) post(ctx context.Context, ep *Endpoint, path string, body []byte, limit int64, timeout time.Duration) (response, bool) {
	return h.postPieces(ctx, ep, path, reqBody{body}, limit, timeout)
}

// reqBody is a request's body in pieces, written in turn with one writev: a batch of
// reports goes as the reports' own bytes between its brackets and commas, not copied
// into a body of its own first.
type reqBody [][]byte

func (b reqBody) size() int64 {
	n := 0
	for _, p := range b {
		n += len(p)
	}
	return int64(n)
}

// postPieces is post of a body in pieces.
func (h *http1) postPieces(ctx context.Context, ep *Endpoint, path string, body reqBody, limit int64, timeout time.Duration) (response, bool) {
	t := h.targetOf(ep.URL)
	if !t.ok || !headerValue(ep.Token) {
		return response{}, false // net/http's checks, and its error, apply
	}
	c, reused, err := h.get(ctx, t.addr)
	if err != nil {
		return response{err: fmt.Errorf("post %s: %w", path, err)}, true
	}
	bodies := []reqBody{body}
	out, err := h.exchange(ctx, c, t, ep, path, bodies, limit, timeout, nil)
	var bad *badAnswer
	if err != nil && reused && ctx.Err() == nil && !errors.As(err, &bad) {
		// A kept-alive connection the recorder closed while it was idle (its idle
		// timeout racing this request): no answer came, so the request goes again
		// on a new connection, as net/http does for a request marked idempotent.
		// Every route posted to is: a repeated (proxyId, seq) is ignored, a register
		// may repeat.
		if c, err = h.dial(ctx, t.addr); err == nil {
			out, err = h.exchange(ctx, c, t, ep, path, bodies, limit, timeout, out[:0])
		}
	}
	if err != nil {
		return response{err: fmt.Errorf("post %s: %w", path, err)}, true
	}
	return out[0], true
}

// pipelines reports whether postGroup writes a group's requests together to ep.
func (h *http1) pipelines(ep *Endpoint) bool {
	if !h.targetOf(ep.URL).ok || !headerValue(ep.Token) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.serialUntil.IsZero() || !h.now().Before(h.serialUntil)
}

// errUnanswered is the answer to a pipelined request the recorder did not get to: it
// ended the connection after answering those before it. It is not a failure of the
// recorder's; the report is simply sent again.
var errUnanswered = errors.New("not answered: the recorder ended the connection first")

// postGroup posts each of bodies to path as a request of its own, all written at once
// on one connection and answered in order (HTTP/1.1 pipelining, RFC 9112 §9.3.2). A
// plain recorder gets one report per POST; sent one at a time, each cost the proxy a
// write, a read and a goroutine's wake-up, and the recorder a read, about 30 µs of the
// proxy's CPU per report when a sequential host made one every 100 µs. Pipelining a
// POST is safe here because every step POST is idempotent (a repeated (proxyId, seq)
// is ignored), which is the RFC's condition for it.
//
// It returns one response per body, in order. One the recorder did not get to has
// errUnanswered; when nothing was answered at all, the first has the error and the
// rest errUnanswered. ok is false when the URL is not one http1 posts to.
func (h *http1) postGroup(ctx context.Context, ep *Endpoint, path string, bodies [][]byte, limit int64, timeout time.Duration) ([]response, bool) {
	if len(bodies) == 1 || !h.pipelines(ep) {
		r, ok := h.post(ctx, ep, path, bodies[0], limit, timeout)
		out := []response{r}
		for len(out) < len(bodies) {
			out = append(out, response{err: errUnanswered})
		}
		return out, ok
	}
	t := h.targetOf(ep.URL)
	out := make([]response, 0, len(bodies))
	reqs := make([]reqBody, len(bodies))
	for i, b := range bodies {
		reqs[i] = reqBody{b}
	}
	if c, _, err := h.get(ctx, t.addr); err == nil {
		out, _ = h.exchange(ctx, c, t, ep, path, reqs, limit, timeout, out) // what failed is in how many answered
	}
	switch {
	case len(out) == 0 && ctx.Err() != nil:
		out = append(out, response{err: fmt.Errorf("post %s: %w", path, ctx.Err())}) // Close: not sent again now
	case len(out) == 0:
		// Nothing answered: a stale kept-alive connection, a recorder that cuts
		// pipelined requests short, or one that is down. The first report goes
		// alone, as it would unpipelined (with post's retry on a fresh connection),
		// so its answer, whatever it is, is heard.
		r, _ := h.post(ctx, ep, path, bodies[0], limit, timeout)
		out = append(out, r)
	case len(out) < len(bodies):
		// The recorder ended the connection with requests unanswered, saying so or
		// not: it does not take pipelined requests (or not many), or it went away.
		// Once is enough to stop for a while; each group would otherwise deliver one
		// report and resend the rest. Only the first cut after a pause ends counts:
		// the groups in flight beside it (up to the window) were cut by the same
		// event, and each doubling the pause made one restart cost 8 minutes.
		h.mu.Lock()
		if now := h.now(); !now.Before(h.serialUntil) {
			h.pause = min(max(2*h.pause, h.basePause), maxSerialPause)
			h.serialUntil = now.Add(h.pause)
		}
		h.mu.Unlock()
	default:
		// Answered whole: the next cut pauses pipelining for basePause again. Not a
		// group that was in flight when a pause began: it says nothing of the tries.
		h.mu.Lock()
		if !h.now().Before(h.serialUntil) {
			h.pause = 0
		}
		h.mu.Unlock()
	}
	for len(out) < len(bodies) {
		out = append(out, response{err: errUnanswered})
	}
	return out, true
}

// exchange writes the requests of bodies to c in one write and reads their answers,
// appending them to out. It stops early, with no error, at an answer after which c
// cannot carry more; c is kept for reuse only when every answer came and nothing
// else did.
func (h *http1) exchange(ctx context.Context, c *conn1, t target, ep *Endpoint, path string, bodies []reqBody, limit int64, timeout time.Duration, out []response) ([]response, error) {
	keep := false
	defer func() {
		if keep {
			h.put(c)
		} else {
			c.nc.Close()
		}
	}()
	deadline := time.Now().Add(timeout)
	if timeout <= 0 {
		deadline = time.Time{}
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	c.nc.SetDeadline(deadline)
	// Close (or any end of ctx) must not wait for a slow recorder's answer.
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(aLongTimeAgo) })
	defer stop()

	// Every head first, into the one buffer (which may move as it grows), then the
	// write of heads and bodies in turn.
	c.head, c.ends = c.head[:0], c.ends[:0]
	for _, body := range bodies {
		c.head = append(c.head, "POST "...)
		c.head = append(c.head, t.prefix...)
		c.head = append(c.head, path...)
		c.head = append(c.head, " HTTP/1.1\r\nHost: "...)
		c.head = append(c.head, t.host...)
		c.head = append(c.head, "\r\nUser-Agent: bir-proxy\r\nContent-Type: application/json\r\nAuthorization: Bearer "...)
		c.head = append(c.head, ep.Token...)
		c.head = append(c.head, "\r\nContent-Length: "...)
		c.head = strconv.AppendInt(c.head, body.size(), 10)
		c.head = append(c.head, "\r\n\r\n"...)
		c.ends = append(c.ends, len(c.head))
	}
	n := 0
	for _, body := range bodies {
		n += 1 + len(body)
	}
	bufs := make(net.Buffers, 0, n)
	from := 0
	for i, body := range bodies {
		bufs = append(bufs, c.head[from:c.ends[i]])
		bufs = append(bufs, body...)
		from = c.ends[i]
	}
	if _, err := bufs.WriteTo(c.nc); err != nil {
		return out, ctxErr(ctx, err)
	}
	for i := range bodies {
		r, more, err := c.answer(ctx, limit)
		if err != nil {
			return out, err
		}
		out = append(out, r)
		if !more {
			return out, nil
		}
		if i == len(bodies)-1 {
			keep = c.br.Buffered() == 0
		}
	}
	return out, nil
}

// answer reads the next answer on c. more says c can carry another after it (bytes
// already buffered past it are the next answer's, or trouble: the caller judges).
func (c *conn1) answer(ctx context.Context, limit int64) (r response, more bool, err error) {
	// The head is read under a cap (what br has buffered already is within it: br
	// holds 4 KiB); the body, once the head is in, under one of its own, which also
	// bounds a chunked body's trailer (read as headers, as the head is).
	c.lim.limit(maxHeadBytes, errHeadTooLarge)
	defer c.lim.limit(math.MaxInt64, nil)
	if _, err := c.br.Peek(1); err != nil { // the answer's first bytes (or none)
		return response{}, false, ctxErr(ctx, err)
	}
	if q, ok := c.quick(limit); ok {
		return q.response, q.keep, nil
	}
	resp, err := http.ReadResponse(c.br, nil)
	for n := 0; err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols; n++ {
		if n == max1xx {
			return response{}, false, &badAnswer{errTooMany1xx}
		}
		c.lim.limit(maxHeadBytes, errHeadTooLarge) // each head has its own cap, as in net/http
		resp, err = http.ReadResponse(c.br, nil)   // an informational answer comes before the answer
	}
	if errors.Is(err, errHeadTooLarge) {
		return response{}, false, &badAnswer{err}
	}
	if err != nil {
		return response{}, false, ctxErr(ctx, err)
	}
	c.lim.limit(bodyCap(limit), errAnswerTooLarge)
	body, cut := io.ReadAll(io.LimitReader(resp.Body, limit))
	// The rest is read so the connection can carry the next request; an answer that
	// does not end (or ends the connection) closes it.
	rest, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	more = cut == nil && err == nil && rest < 1<<20 && !resp.Close
	resp.Body.Close()
	if cut != nil {
		cut = ctxErr(ctx, cut)
	}
	return response{status: resp.StatusCode, body: trimSpace(body), retryAfter: retryAfter(resp),
		location: resp.Header.Get("Location"), cut: cut}, more, nil
}

// quickAnswer is an answer quick read, and whether its connection can be kept.
type quickAnswer struct {
	response
	keep bool
}

// quick reads the answer the usual recorder gives (HTTP/1.1, a status, plain headers,
// a Content-Length body) without building an http.Response: net/http's parsing of the
// head (textproto, a header map) was 9% of the proxy's CPU with a plain recorder. It
// looks only at a head already buffered whole, and takes nothing from the reader
// unless it understands every line of it; anything else (HTTP/1.0, an informational
// answer, chunked or close-delimited bodies, folded or repeated framing headers, a
// head not yet all here) is left for http.ReadResponse, byte for byte.
func (c *conn1) quick(limit int64) (quickAnswer, bool) {
	head, err := c.br.Peek(c.br.Buffered())
	if err != nil {
		return quickAnswer{}, false
	}
	end := bytes.Index(head, []byte("\r\n\r\n"))
	if end < 0 {
		return quickAnswer{}, false
	}
	head = head[:end+2] // every line with its CRLF
	for i, c := range head {
		// A lone CR or LF (net/http takes a bare LF for a line's end) or any other
		// control character: not the usual answer.
		if (c < ' ' && c != '\t' || c == 0x7f) && !(c == '\r' && head[i+1] == '\n' || c == '\n' && i > 0 && head[i-1] == '\r') {
			return quickAnswer{}, false
		}
	}
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || (len(line) > 12 && line[12] != ' ') {
		return quickAnswer{}, false
	}
	status := 0
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return quickAnswer{}, false
		}
		status = status*10 + int(d-'0')
	}
	if status < 200 || status > 599 {
		return quickAnswer{}, false
	}
	var q quickAnswer
	q.status, q.keep = status, true
	length := int64(-1)
	sawRetry, sawLocation := false, false
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) == 0 || !tokenBytes(name) {
			return quickAnswer{}, false // also a folded line (leading space)
		}
		value = bytes.Trim(value, " \t")
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length >= 0 || len(value) == 0 || len(value) > 15 {
				return quickAnswer{}, false
			}
			length = 0
			for _, d := range value {
				if d < '0' || d > '9' {
					return quickAnswer{}, false
				}
				length = length*10 + int64(d-'0')
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return quickAnswer{}, false
		case bytes.EqualFold(name, []byte("Connection")):
			switch {
			case bytes.EqualFold(value, []byte("close")):
				q.keep = false
			case bytes.EqualFold(value, []byte("keep-alive")):
			default:
				return quickAnswer{}, false
			}
		case bytes.EqualFold(name, []byte("Retry-After")):
			if !sawRetry { // the first, as Header.Get reads it
				q.retryAfter, sawRetry = retryAfterValue(string(value)), true
			}
		case bytes.EqualFold(name, []byte("Location")):
			if !sawLocation {
				q.location, sawLocation = string(value), true
			}
		}
	}
	if status == http.StatusNoContent || status == http.StatusNotModified {
		if length > 0 {
			return quickAnswer{}, false
		}
		length = 0
	}
	if length < 0 {
		return quickAnswer{}, false // the body runs to the connection's end
	}
	c.br.Discard(end + 4)
	c.lim.limit(bodyCap(limit), errAnswerTooLarge)
	keepN := min(length, limit)
	body := make([]byte, keepN)
	if n, err := io.ReadFull(c.br, body); err != nil {
		q.body, q.cut, q.keep = trimSpace(body[:n]), err, false // as much as came, as net/http gives it
		return q, true
	}
	q.body = trimSpace(body)
	if rest := length - keepN; rest > 0 {
		// Read so the connection can carry the next request, up to 1 MiB.
		if rest > 1<<20 {
			q.keep = false
		} else if _, err := c.br.Discard(int(rest)); err != nil {
			q.keep = false
		}
	}
	return q, true
}

// tokenBytes reports whether b is an HTTP token (a header name).
func tokenBytes(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || bytes.IndexByte([]byte(`"(),/:;<=>?@[\]{}`), c) >= 0 {
			return false
		}
	}
	return true
}

// aLongTimeAgo is a deadline that has passed: setting it wakes a blocked read or write.
var aLongTimeAgo = time.Unix(1, 0)

// ctxErr is err, or why ctx ended when that is what cut the request short.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

func (h *http1) get(ctx context.Context, addr string) (c *conn1, reused bool, err error) {
	h.mu.Lock()
	now := h.now()
	for n := len(h.idle); n > 0; n = len(h.idle) {
		c = h.idle[n-1]
		h.idle = h.idle[:n-1]
		if c.addr == addr && now.Sub(c.idleAt) < h.idleTimeout {
			h.mu.Unlock()
			// Anything the recorder sent while the connection was idle (a second
			// answer to the last request, an answer to nothing) would be read as the
			// answer to the next request: a stray 200 marked a report the recorder
			// refused delivered. A connection with bytes to read, or ended by the
			// recorder, is not used again.
			if c.br.Buffered() == 0 && c.peek.quiet() {
				return c, true, nil
			}
			c.nc.Close()
			h.mu.Lock()
			continue
		}
		c.nc.Close() // the endpoint moved, or the connection expired
	}
	h.mu.Unlock()
	c, err = h.dial(ctx, addr)
	return c, false, err
}

func (h *http1) dial(ctx context.Context, addr string) (*conn1, error) {
	nc, err := h.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn1{nc: nc, lim: capReader{r: nc, n: math.MaxInt64}, addr: addr, peek: newPeeker(nc)}
	c.br = bufio.NewReaderSize(&c.lim, 4<<10)
	return c, nil
}

func (h *http1) put(c *conn1) {
	c.nc.SetDeadline(time.Time{})
	h.mu.Lock()
	if len(h.idle) < h.maxIdle {
		c.idleAt = h.now()
		h.idle = append(h.idle, c)
		c = nil
		h.armReaper()
	}
	h.mu.Unlock()
	if c != nil {
		c.nc.Close()
	}
}

// armReaper makes sure the reaper will look at the idle connections once the oldest
// of them expires. One timer for the pool, armed only while it holds a connection and
// not re-armed for every put: a busy session's connections are reused long before it
// fires. Called with mu held.
func (h *http1) armReaper() {
	if h.reaping || len(h.idle) == 0 {
		return
	}
	oldest := h.idle[0].idleAt
	for _, c := range h.idle[1:] {
		if c.idleAt.Before(oldest) {
			oldest = c.idleAt
		}
	}
	wait := max(oldest.Add(h.idleTimeout).Sub(h.now()), 0)
	h.reaping = true
	if h.reaper == nil {
		h.reaper = time.AfterFunc(wait, h.reap)
	} else {
		h.reaper.Reset(wait)
	}
}

// reap closes the idle connections that have waited idleTimeout, and arms itself
// again for the rest.
func (h *http1) reap() {
	h.mu.Lock()
	h.reaping = false
	now := h.now()
	var expired []*conn1
	h.idle = slices.DeleteFunc(h.idle, func(c *conn1) bool {
		if now.Sub(c.idleAt) >= h.idleTimeout {
			expired = append(expired, c)
			return true
		}
		return false
	})
	h.armReaper()
	h.mu.Unlock()
	for _, c := range expired {
		c.nc.Close()
	}
}

func (h *http1) closeIdle() {
	h.mu.Lock()
	idle := h.idle
	h.idle = nil
	if h.reaper != nil {
		h.reaper.Stop()
		h.reaping = false
	}
	h.mu.Unlock()
	for _, c := range idle {
		c.nc.Close()
	}
}

// headerValue reports whether s can go in a request head as it is: no control
// characters (a token holding a line break would add headers of its own).
func headerValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpaceByte(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpaceByte(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
