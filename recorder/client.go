// One retry policy per request. Every request this package sends to the recorder —
// register and step alike — goes through the dispatcher (deliver.go), whose backoff
// (doubling with jitter, capped at 30 s, Retry-After honoured, one probe before the
// window opens again) is the only retry layer. The client below makes exactly one
// attempt per call. go-retryablehttp used to retry inside each of those attempts: two
// layers on one request, so a failing recorder got (1+RetryMax) POSTs per pause, a
// worker sat sleeping in its quick retries while delivery was meant to be paused, and a
// request could outlive the failure that paused everything and reach a recorder that
// came back ahead of the register it needed. No request here lacks the outer loop, so
// go-retryablehttp has no place left; plain net/http is the client.
//
// The one resend left is on a kept-alive connection that turns out to be dead (the
// recorder closed it while idle): http1's, or net/http's own for the URLs it posts to
// (see send). That is not a retry policy — no answer came, nothing waits — and without
// it every such race would look like an outage: a warning on stderr, a pause, and every
// proxyId registered again.

package recorder

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/bir-dev/bir-proxy/internal/backoff"
	"github.com/bir-dev/bir-proxy/internal/httpclient"
)

// tuning holds the timings of delivery. Zero fields take the defaults below; tests
// shorten them so that failure paths run in milliseconds.
type tuning struct {
	maxInFlight    int           // requests in flight at first and after a failure's probe
	maxWindow      int           // requests in flight at most, while the recorder keeps accepting
	backoffBase    time.Duration // between attempts, doubling with jitter...
	backoffCap     time.Duration // ...up to this (SPEC §5: 30 s); also clamps Retry-After
	requestTimeout time.Duration // one attempt
	closeGrace     time.Duration
	writeWindow    time.Duration // the journal's and spool file's (default writeWindow)
	idleTimeout    time.Duration // a kept-alive connection idle this long is closed (default idleTimeout)
	serialPause    time.Duration // how long one request per exchange lasts after a group was cut short, at first

	hooks hooks
}

// hooks let tests wait for events inside the package instead of sleeping.
type hooks struct {
	committed func(n int)                              // a batch of n reports reached the disk
	attempt   func(path string, status int, err error) // a request's answer was acted on
}

func (t tuning) withDefaults() tuning {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if t.maxInFlight <= 0 {
		t.maxInFlight = 4
	}
	if t.maxWindow <= 0 {
		t.maxWindow = max(64, t.maxInFlight)
	}
	t.maxWindow = max(t.maxWindow, t.maxInFlight)
	def(&t.backoffBase, 500*time.Millisecond)
	def(&t.backoffCap, 30*time.Second)
	def(&t.requestTimeout, 60*time.Second)
	def(&t.closeGrace, closeGrace)
	def(&t.serialPause, time.Minute)
	def(&t.idleTimeout, idleTimeout)
	return t
}

// client posts JSON to the recorder. It knows nothing of reports, so a poll loop can
// use it beside delivery.
type client struct {
	hc      *http.Client
	h1      *http1        // plain http:// recorders; hc for the rest (and all, when nil)
	timeout time.Duration // bounds one step or register POST
}

// response is what came back from one attempt.
type response struct {
	status     int           // 0 when no answer came (err is set)
	body       []byte        // the start of the answer, for messages
	retryAfter time.Duration // the recorder asked to wait (429/503)
	location   string        // where a redirect pointed (never followed), for the message
	err        error
	// cut is set when the answer's body broke off: a status alone is enough for a
	// step, but a poll must not act on part of a list of dispatches.
	cut error
}

func newClient(t tuning) *client {
	return &client{h1: newHTTP1(t), timeout: t.requestTimeout, hc: httpclient.New(httpclient.Options{
		// Never through an HTTP proxy from the environment: the bearer token is for the
		// recorder alone.
		Proxy: httpclient.NoProxy,
		// A redirect would carry the token to wherever it points.
		Redirects:           httpclient.NoRedirects,
		DialTimeout:         5 * time.Second,
		KeepAlive:           30 * time.Second,
		MaxIdleConns:        t.maxWindow,
		MaxIdleConnsPerHost: t.maxWindow,
		IdleConnTimeout:     t.idleTimeout,
	})}
}

// idleTimeout is how long a kept-alive connection to the recorder may wait unused
// before the proxy closes it (net/http's IdleConnTimeout, for https recorders, is the
// same): a session that stopped making calls must not hold the recorder's sockets open
// for the rest of the day.
const idleTimeout = 30 * time.Second

// post sends body to path under ep, once, within the request timeout. Whatever fails
// is the caller's to back off from.
func (c *client) post(ctx context.Context, ep *Endpoint, path string, body []byte) response {
	return c.send(ctx, ep, path, body, 4<<10, c.timeout)
}

// postLimit is post keeping up to limit bytes of the answer (a poll answer carries
// dispatches; a step's answer is read only for messages), bounded by ctx alone (a
// poll may be held by the recorder).
func (c *client) postLimit(ctx context.Context, ep *Endpoint, path string, body []byte, limit int64) response {
	return c.send(ctx, ep, path, body, limit, 0)
}

func (c *client) send(ctx context.Context, ep *Endpoint, path string, body []byte, limit int64, timeout time.Duration) response {
	if c.h1 != nil {
		if resp, ok := c.h1.post(ctx, ep, path, body, limit, timeout); ok {
			return resp
		}
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL+path, bytes.NewReader(body))
	if err != nil {
		return response{err: fmt.Errorf("post %s: %w", path, err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+ep.Token)
	// Every route we post to is idempotent (a repeated (proxyId, seq) is ignored, a
	// register may repeat), and saying so lets net/http resend the request on a fresh
	// connection when a kept-alive one was closed by the recorder under it; for a POST
	// it would otherwise return the error. A nil value marks the request without
	// sending the header.
	req.Header["Idempotency-Key"] = nil
	// One attempt, not go-retryablehttp: the dispatcher's backoff is the one retry layer.
	resp, err := c.hc.Do(req)
	if err != nil {
		return response{err: fmt.Errorf("post %s: %w", path, err)}
	}
	defer resp.Body.Close()
	answer, cut := io.ReadAll(io.LimitReader(resp.Body, limit))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // so the connection is reused
	return response{status: resp.StatusCode, body: bytes.TrimSpace(answer), retryAfter: retryAfter(resp),
		location: resp.Header.Get("Location"), cut: cut}
}

func retryAfter(resp *http.Response) time.Duration { return backoff.FromResponse(resp) }

// retryAfterValue reads a Retry-After header's value: seconds, or an HTTP date.
func retryAfterValue(v string) time.Duration { return backoff.RetryAfter(v, time.Now()) }

// postPieces is post of a body in pieces (a batch: its reports, and the brackets and
// commas between them), written as they are where http1 posts, joined for net/http.
func (c *client) postPieces(ctx context.Context, ep *Endpoint, path string, pieces [][]byte) response {
	if c.h1 != nil {
		if resp, ok := c.h1.postPieces(ctx, ep, path, reqBody(pieces), 4<<10, c.timeout); ok {
			return resp
		}
	}
	return c.post(ctx, ep, path, bytes.Join(pieces, nil))
}

// pipelines reports whether postGroup pipelines requests to ep (a plain http://
// recorder that has not refused it).
func (c *client) pipelines(ep *Endpoint) bool { return c.h1 != nil && c.h1.pipelines(ep) }

// postGroup posts each of bodies to path as its own request, pipelined on one
// connection where pipelines says so (else the first alone), within the request
// timeout; see http1.postGroup for what the responses say.
func (c *client) postGroup(ctx context.Context, ep *Endpoint, path string, bodies [][]byte) []response {
	if c.h1 != nil {
		if out, ok := c.h1.postGroup(ctx, ep, path, bodies, 4<<10, c.timeout); ok {
			return out
		}
	}
	out := []response{c.post(ctx, ep, path, bodies[0])}
	for len(out) < len(bodies) {
		out = append(out, response{err: errUnanswered})
	}
	return out
}

func (c *client) closeIdle() {
	c.hc.CloseIdleConnections()
	if c.h1 != nil {
		c.h1.closeIdle()
	}
}

// Ping asks the recorder at ep whether it is up (GET /health), for `bir-proxy status`.
func Ping(ctx context.Context, ep *Endpoint) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.URL+"/health", nil)
	if err != nil {
		return fmt.Errorf("ping recorder: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+ep.Token)
	// One try, as the request loops' are (no go-retryablehttp): status says what it saw.
	hc := httpclient.New(httpclient.Options{Proxy: httpclient.NoProxy, Redirects: httpclient.NoRedirects, DisableKeepAlives: true})
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("ping recorder at %s: %w", ep.URL, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("ping recorder at %s: %s", ep.URL, resp.Status)
	}
	return nil
}
