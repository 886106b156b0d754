package recorder

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// tuning holds the timings of delivery. Zero fields take the defaults below; tests
// shorten them so that failure paths run in milliseconds.
type tuning struct {
	maxInFlight    int           // reports posted at once
	retries        int           // quick retries inside one attempt (connection errors, 5xx)
	retryWaitMin   time.Duration // between those quick retries
	retryWaitMax   time.Duration
	backoffBase    time.Duration // between attempts, doubling with jitter...
	backoffCap     time.Duration // ...up to this (SPEC §5: 30 s); also clamps Retry-After
	requestTimeout time.Duration // one attempt, retries included
	closeGrace     time.Duration

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
	if t.retries <= 0 {
		t.retries = 2
	}
	def(&t.retryWaitMin, 100*time.Millisecond)
	def(&t.retryWaitMax, time.Second)
	def(&t.backoffBase, 500*time.Millisecond)
	def(&t.backoffCap, 30*time.Second)
	def(&t.requestTimeout, 60*time.Second)
	def(&t.closeGrace, closeGrace)
	return t
}

// client posts JSON to the recorder. It knows nothing of reports, so a poll loop can
// use it beside delivery.
type client struct {
	rc *retryablehttp.Client
}

// response is what came back from one attempt (after its quick retries).
type response struct {
	status     int           // 0 when no answer came (err is set)
	body       []byte        // the start of the answer, for messages
	retryAfter time.Duration // the recorder asked to wait (429/503)
	err        error
}

func newClient(t tuning, log *slog.Logger) *client {
	transport := &http.Transport{
		// Never through an HTTP proxy from the environment: the bearer token is for the
		// recorder alone.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        t.maxInFlight * 2,
		MaxIdleConnsPerHost: t.maxInFlight * 2,
		IdleConnTimeout:     30 * time.Second,
	}
	hc := &http.Client{
		Transport: transport,
		// A redirect would carry the token to wherever it points.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &client{rc: &retryablehttp.Client{
		HTTPClient:   hc,
		Logger:       debugLogger{log},
		RetryWaitMin: t.retryWaitMin,
		RetryWaitMax: t.retryWaitMax,
		RetryMax:     t.retries,
		CheckRetry:   checkRetry,
		Backoff:      jitterBackoff,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}}
}

// checkRetry is retryablehttp's default policy, except that an answer asking us to wait
// (Retry-After) ends the attempt: delivery as a whole then waits, instead of each
// request in flight sleeping on its own.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if err == nil && resp != nil && resp.Header.Get("Retry-After") != "" &&
		(resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		return false, nil
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
}

// jitterBackoff doubles from min up to max and spreads each wait over [d/2, d], so
// proxies that lost the recorder together do not come back in lockstep.
func jitterBackoff(min, max time.Duration, attempt int, _ *http.Response) time.Duration {
	return jitter(min, max, attempt)
}

func jitter(base, max time.Duration, attempt int) time.Duration {
	d := base << min(attempt, 30)
	if d <= 0 || d > max {
		d = max
	}
	return d/2 + rand.N(d/2+1)
}

// post sends body to path under ep. It retries quickly a few times on connection errors
// and 5xx; anything left is the caller's to back off from.
func (c *client) post(ctx context.Context, ep *Endpoint, path string, body []byte) response {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, ep.URL+path, body)
	if err != nil {
		return response{err: fmt.Errorf("post %s: %w", path, err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+ep.Token)
	resp, err := c.rc.Do(req)
	if err != nil {
		return response{err: fmt.Errorf("post %s: %w", path, err)}
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // so the connection is reused
	return response{status: resp.StatusCode, body: bytes.TrimSpace(answer), retryAfter: retryAfter(resp)}
}

func retryAfter(resp *http.Response) time.Duration {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

func (c *client) closeIdle() { c.rc.HTTPClient.CloseIdleConnections() }

// Ping asks the recorder at ep whether it is up (GET /health), for `bir-proxy status`.
func Ping(ctx context.Context, ep *Endpoint) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.URL+"/health", nil)
	if err != nil {
		return fmt.Errorf("ping recorder: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+ep.Token)
	hc := &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
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

// debugLogger sends retryablehttp's chatter to slog at debug level: its "request
// failed" lines at error level would otherwise flood stderr while the recorder is down.
type debugLogger struct{ log *slog.Logger }

func (l debugLogger) Error(msg string, kv ...any) { l.log.Debug(msg, kv...) }
func (l debugLogger) Info(msg string, kv ...any)  { l.log.Debug(msg, kv...) }
func (l debugLogger) Debug(msg string, kv ...any) { l.log.Debug(msg, kv...) }
func (l debugLogger) Warn(msg string, kv ...any)  { l.log.Debug(msg, kv...) }
