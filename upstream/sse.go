package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/backoff"
)

// The HTTP+SSE transport of protocol version 2024-11-05: a GET opens an event stream
// whose first event, "endpoint", names the URL to POST messages to; everything the
// server sends arrives on that one stream as "message" events. A new stream is a new
// session on the server, so a lost stream ends the connection's session (end.go): the
// session room answers the requests it owed and sets the next one up with the host's
// handshake again.

// endpointWait bounds the wait for the endpoint event once the stream is open.
const endpointWait = 10 * time.Second

// legacySSE is the HTTP+SSE side of a remoteConn: the event stream and the endpoint
// it names. Its fields are guarded by the connection's mu.
type legacySSE struct {
	c        *remoteConn
	endpoint string // where messages go; "" while there is no stream
	gen      int    // bumped by each stream
	// connectTimeout bounds the wait for the event stream's response head.
	connectTimeout time.Duration
}

var errNoEndpoint = errors.New("the server's event stream did not start with an endpoint event")

// connect opens the event stream and waits for its endpoint event; the stream is
// then read by a goroutine of its own.
func (lg *legacySSE) connect() error {
	for tries := 0; ; tries++ {
		refused, err := lg.open()
		if refused == nil || lg.c.auth == nil || tries >= maxAuthRetries {
			return err
		}
		// The stream was refused (401/403): renew the credentials, then try again.
		retry, why := lg.c.auth.Refused(lg.c.ctx, refused.StatusCode, refused.Header.Values("WWW-Authenticate"), refused.Request.Header.Get("Authorization"))
		if !retry {
			if why != nil {
				return fmt.Errorf("HTTP %d %s: %w", refused.StatusCode, http.StatusText(refused.StatusCode), why)
			}
			return err
		}
	}
}

// open is one try of connect; refused is the answer when it was a 401 or
// 403.
func (lg *legacySSE) open() (refused *http.Response, err error) {
	ctx, stop := context.WithCancel(lg.c.ctx)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, lg.c.url.String(), nil)
	lg.c.userHeaders(req)
	req.Header.Set("Accept", "text/event-stream")
	// --connect-timeout covers the whole wait for the response head, not only the
	// dial: a server that accepted the connection and never answered the GET held the
	// host's initialize, and everything after it, unanswered for good.
	wait := lg.connectTimeout
	if wait <= 0 {
		wait = DefaultConnectTimeout
	}
	headTimer := time.AfterFunc(wait, stop)
	resp, err := lg.c.client.Do(req)
	if !headTimer.Stop() {
		if err == nil {
			resp.Body.Close() // its context is cancelled: nothing more comes on it
		}
		stop()
		return nil, fmt.Errorf("opening the event stream: no answer to the GET within %s (--connect-timeout)", wait)
	}
	if err != nil {
		stop()
		return nil, errors.New(httpFailure(err))
	}
	code := resp.StatusCode
	if code/100 != 2 || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		drain(resp.Body)
		resp.Body.Close()
		stop()
		if code == http.StatusUnauthorized || code == http.StatusForbidden {
			return resp, fmt.Errorf("HTTP %d %s: the server refused the credentials", code, http.StatusText(code))
		}
		return nil, fmt.Errorf("opening the event stream: HTTP %d %s", code, http.StatusText(code))
	}
	sr := newSSEReader(resp.Body, lg.c.max)
	// The wait for the endpoint is bounded by closing the body: a server that opens
	// the stream and never says where to post would otherwise hold the sender.
	timer := time.AfterFunc(endpointWait, stop)
	endpoint, err := lg.readEndpoint(sr)
	if !timer.Stop() && err != nil {
		err = fmt.Errorf("no endpoint event within %s", endpointWait)
	}
	if err != nil {
		resp.Body.Close()
		stop()
		return nil, err
	}
	lg.c.mu.Lock()
	lg.endpoint = endpoint
	lg.gen++
	gen := lg.gen
	lg.c.mu.Unlock()
	lg.c.log.Debug("HTTP+SSE stream open")
	lg.c.wg.Add(1)
	go func() {
		defer lg.c.wg.Done()
		defer stop()
		defer resp.Body.Close()
		lg.readEvents(ctx, gen, sr)
	}()
	return nil, nil
}

// readEndpoint reads events up to the endpoint event and returns the absolute URL it
// names. The endpoint must be on the stream's own origin: the proxy sends the
// --header credentials there.
func (lg *legacySSE) readEndpoint(sr *sseReader) (string, error) {
	for {
		ev, err := sr.Next()
		if err != nil {
			return "", errNoEndpoint
		}
		if ev.Name != "endpoint" {
			if len(ev.Data) > 0 {
				return "", errNoEndpoint
			}
			continue
		}
		ref, err := url.Parse(strings.TrimSpace(string(ev.Data)))
		if err != nil {
			return "", fmt.Errorf("the endpoint event does not hold a URL: %w", err)
		}
		u := lg.c.url.ResolveReference(ref)
		if u.Scheme != lg.c.url.Scheme || u.Host != lg.c.url.Host {
			return "", fmt.Errorf("the endpoint event names another origin (%s://%s); not sending the credentials there", u.Scheme, u.Host)
		}
		return u.String(), nil
	}
}

// readEvents forwards what the stream carries until it ends.
func (lg *legacySSE) readEvents(ctx context.Context, gen int, sr *sseReader) {
	for {
		ev, err := sr.Next()
		if err != nil {
			break
		}
		switch {
		case ev.Name == "endpoint":
			if ref, err := url.Parse(strings.TrimSpace(string(ev.Data))); err == nil {
				if u := lg.c.url.ResolveReference(ref); u.Scheme == lg.c.url.Scheme && u.Host == lg.c.url.Host {
					lg.c.mu.Lock()
					lg.endpoint = u.String()
					lg.c.mu.Unlock()
				}
			}
		case ev.Name != "" && ev.Name != "message":
		case ev.TooLong:
			lg.c.log.Warn("dropped a message from the server: over the size cap", "bytes", ev.Size, "cap", lg.c.max)
		case len(ev.Data) > 0:
			lg.c.deliver(oneLine(ev.Data))
		}
	}
	if ctx.Err() != nil {
		return
	}
	lg.streamLost(gen)
}

// streamLost handles the end of stream gen while the session goes on: the session is
// lost with it, and the connection ends (end.go); the next session opens a new stream.
func (lg *legacySSE) streamLost(gen int) {
	lg.c.mu.Lock()
	current := lg.gen == gen
	lg.c.mu.Unlock()
	if current {
		lg.c.log.Warn("the server's event stream ended; starting a new session")
		lg.c.endSession("the server's event stream ended before it answered", nil)
	}
}

// send sends one host message over HTTP+SSE.
func (lg *legacySSE) send(m *outMsg) {
	lg.c.mu.Lock()
	connected := lg.endpoint != ""
	lg.c.mu.Unlock()
	if !connected {
		if err := lg.connect(); err != nil {
			lg.c.fail(m, lg.c.scrub.Replace(err.Error()))
			return
		}
	}
	status := make(chan int, 1)
	ctx, abort := context.WithCancel(lg.c.ctx)
	lg.c.reqs.Add(1)
	lg.c.wg.Add(1)
	go func() {
		defer lg.c.wg.Done()
		defer lg.c.reqs.Done()
		defer abort()
		lg.post(ctx, m, status)
	}()
	// The POST's own answer only says the server took the message (the answer comes
	// on the stream), so it is waited for, briefly: servers of this transport handle
	// each POST on its own, and the next message must not overtake this one.
	waitStatus(lg.c.ctx, status)
}

// post POSTs m to the endpoint. The answer comes on the event stream; the POST's
// own answer only says whether the server took the message. status, when not nil,
// gets the HTTP status (0 for none).
func (lg *legacySSE) post(ctx context.Context, m *outMsg, status chan int) {
	code := 0
	defer func() {
		if status != nil {
			status <- code
		}
	}()
	lg.c.mu.Lock()
	endpoint := lg.endpoint
	lg.c.mu.Unlock()
	if endpoint == "" {
		lg.c.fail(m, "the server's event stream is not open")
		return
	}
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		var wrote atomic.Bool
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(m.raw))
		lg.c.userHeaders(req)
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(withWriteTrace(req.Context(), &wrote, func() {}))
		var err error
		resp, err = lg.c.client.Do(req)
		if err == nil {
			break
		}
		if wrote.Load() || attempt >= 2 || !refusedBeforeSending(err) || !backoff.Sleep(ctx, time.Duration(100<<attempt)*time.Millisecond) {
			if ctx.Err() == nil {
				lg.c.fail(m, httpFailure(err))
			}
			return
		}
	}
	defer resp.Body.Close()
	code = resp.StatusCode
	switch {
	case code/100 == 2:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, errorBodyCap))
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		drain(resp.Body)
		retry, why := lg.c.reauthorize(ctx, m, resp)
		if retry {
			resp.Body.Close()
			lg.post(ctx, m, nil)
			return
		}
		lg.c.authRefused(m, code, why)
	default:
		lg.c.refused(m, resp)
	}
}
