// Package oauth is the client side of the MCP authorization spec (2025-11-25, and the
// 2026-07-28 revision) for a remote upstream: discovery (RFC 9728, RFC 8414 / OpenID
// Connect), the authorization code flow with PKCE S256 and RFC 8707 resource
// indicators, client identity (pre-registered, Client ID Metadata Document, dynamic
// registration), step-up on insufficient_scope, a token store shared by every process
// of the user, and the coordination that gives many proxies of one server one sign-in
// and one refresh. docs/oauth.md says how, and every choice the spec leaves open.
package oauth

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bir-dev/bir-proxy/internal/httpclient"
)

const (
	// DefaultCallbackPort is the loopback port of the sign-in's redirect URI,
	// http://127.0.0.1:33418/callback. It is fixed so that the redirect URI a client
	// was registered with never changes, and it is how the processes of one user find
	// out who runs a sign-in: whoever binds it.
	DefaultCallbackPort = 33418
	// DefaultWait is how long a proxy's request that met a 401 waits for a sign-in
	// before it is answered with an error telling the user to sign in. The sign-in
	// goes on after that, for FlowLifetime; the next request finds its token.
	DefaultWait = 30 * time.Second
	// DefaultFlowLifetime is how long a sign-in waits for the browser to come back.
	DefaultFlowLifetime = 10 * time.Minute
	// refreshSkew: a token this close to its expiry is refreshed before it is used,
	// so a request does not leave with a token that expires on its way.
	refreshSkew = 30 * time.Second
	// refreshPause is how long after a refresh that failed (the token endpoint
	// unreachable, slow, or answering an error other than a refused grant) no request
	// tries again: each would otherwise wait for the endpoint in turn, up to
	// requestTimeout apiece.
	refreshPause = 5 * time.Second
	// signInPause is how long after a sign-in that failed (refused in the browser or
	// at the code exchange, no metadata, no way to register, the port held by another
	// program) no request starts another: each is answered at once with that failure.
	// Without it every request of the host opened a browser tab of its own, to fail
	// the same way (11 requests, 11 tabs). Each failure in a row doubles it, up to
	// signInPauseMax; a sign-in that works ends it, and so does a token stored
	// meanwhile by another process (`bir-proxy login`).
	signInPause    = 30 * time.Second
	signInPauseMax = 5 * time.Minute
	// portPoll is how often a process that does not hold the callback port looks for
	// the token the holder is getting, and tries the port again.
	portPoll = 100 * time.Millisecond
)

// Options configure a Client.
type Options struct {
	// ServerURL is the MCP server's URL (expanded).
	ServerURL string
	// Name is the server's name in messages.
	Name string
	// ShownURL is the URL as the user should see it in messages (redacted); "" is
	// the canonical ServerURL.
	ShownURL string
	// ClientID and ClientSecret are a client registered beforehand with the
	// authorization server ("" secret: a public client).
	ClientID, ClientSecret string
	// ClientMetadataURL is the https URL of a Client ID Metadata Document to use as
	// the client_id, when the authorization server supports them.
	ClientMetadataURL string
	// Scopes, when set, are asked for in place of the spec's choice.
	Scopes []string
	// CallbackPort is the loopback redirect port (0: DefaultCallbackPort).
	CallbackPort int
	Store        *Store
	HTTPClient   *http.Client // nil: net/http's default settings, the environment's proxy honoured
	Open         Opener       // nil: SystemOpener(os.Getenv)
	Notify       io.Writer    // the lines the user must see (stderr); nil: os.Stderr
	// Logger is the log. Its lines do not name the server (the proxy's log names it
	// on every line already): give one that does. nil: slog.Default() with server=Name.
	Logger *slog.Logger
	// Wait bounds how long Refused waits for an interactive sign-in (0: DefaultWait;
	// negative: until ctx ends).
	Wait time.Duration
	// FlowLifetime bounds a sign-in (0: DefaultFlowLifetime).
	FlowLifetime time.Duration
	// ClientName is the client_name of a dynamic registration.
	ClientName string
}

// Client gets and keeps the credentials of one MCP server. Its Header and Refused
// make it an upstream.Authorizer. Close ends any sign-in it started.
type Client struct {
	o        Options
	resource string // the canonical server URL: the store's key and the `resource`
	redirect string
	hc       *http.Client
	log      *slog.Logger

	mu     sync.Mutex
	entry  *Entry // the store's entry as last read or written; nil before the first read
	loaded bool
	// keepUntil: a refresh was refused while the access token was still valid; it is
	// used as it is until then, without asking again on every request.
	keepUntil time.Time
	flow      *flow // the sign-in under way in this process
	// renew is held (a token in it) by the one refresh of this process under way;
	// a channel, so that a request waiting for it can stop with its context.
	renew chan struct{}
	// refreshFailed is the last refresh's failure, and no request tries again
	// before retryAt (refreshPause).
	refreshFailed error
	retryAt       time.Time
	// signInFailed is the last sign-in's failure, signInFails how many failed in a
	// row; no sign-in starts before signInAt unless the stored access token's
	// tokenSum is no longer failedToken (someone signed in since).
	signInFailed error
	signInAt     time.Time
	signInFails  int
	failedToken  string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type flow struct {
	done chan struct{}
	err  error
}

// New returns the Client of o.ServerURL. It touches neither the network nor the store.
func New(o Options) (*Client, error) {
	res, err := CanonicalURI(o.ServerURL)
	if err != nil {
		return nil, err
	}
	if o.Store == nil {
		return nil, errors.New("oauth: no token store")
	}
	if o.CallbackPort == 0 {
		o.CallbackPort = DefaultCallbackPort
	}
	if o.CallbackPort < 0 || o.CallbackPort > 65535 {
		return nil, fmt.Errorf("the OAuth callback port %d is not a port", o.CallbackPort)
	}
	if o.Open == nil {
		o.Open = SystemOpener(os.Getenv)
	}
	if o.Notify == nil {
		o.Notify = os.Stderr
	}
	if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	if o.FlowLifetime <= 0 {
		o.FlowLifetime = DefaultFlowLifetime
	}
	if o.ClientName == "" {
		o.ClientName = "bir-proxy"
	}
	if o.ShownURL == "" {
		o.ShownURL = res
	}
	if o.Name == "" {
		o.Name = o.ShownURL
	}
	if o.Logger == nil {
		o.Logger = slog.Default().With("server", o.Name)
	}
	c := &Client{o: o, resource: res, log: o.Logger,
		redirect: "http://127.0.0.1:" + strconv.Itoa(o.CallbackPort) + "/callback",
		hc:       o.HTTPClient, renew: make(chan struct{}, 1)}
	if c.hc == nil {
		// As http.DefaultClient: the environment's proxy (the authorization server is
		// on the network), net/http's redirects (the token endpoint refuses them on its
		// own copy, token.go).
		c.hc = httpclient.New(httpclient.Options{Proxy: httpclient.FromEnv, Redirects: httpclient.Follow, Standard: true})
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Resource is the canonical server URL: the `resource` of every grant.
func (c *Client) Resource() string { return c.resource }

// RedirectURI is the loopback redirect URI, fixed by the callback port.
func (c *Client) RedirectURI() string { return c.redirect }

// Close ends a sign-in this client started and waits for it.
func (c *Client) Close() {
	c.cancel()
	c.wg.Wait()
}

// Preload reads the stored grant now, on its own goroutine, so that the first
// request does not wait for the file (it waits only if it comes first).
func (c *Client) Preload() {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.cached()
	}()
}

// cached is the entry as last known, read from the store the first time.
func (c *Client) cached() *Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.loaded {
		e, err := c.o.Store.Load(c.resource)
		if err != nil {
			c.log.Warn("could not read the stored OAuth grant", "err", err)
		}
		c.entry, c.loaded = e, true
	}
	return c.entry
}

func (c *Client) setCached(e *Entry) {
	c.mu.Lock()
	c.entry, c.loaded = e, true
	c.mu.Unlock()
}

// reload reads the store again (without the lock).
func (c *Client) reload() *Entry {
	e, err := c.o.Store.Load(c.resource)
	if err != nil {
		c.log.Warn("could not read the stored OAuth grant", "err", err)
		return c.cached()
	}
	c.setCached(e)
	return e
}

// Header is the Authorization header for a request: the stored access token,
// refreshed first when it is about to expire (one process refreshes; the others read
// its result). "" when there is no grant: the request goes without, and the server's
// 401 starts the sign-in through Refused.
func (c *Client) Header(ctx context.Context) (string, error) {
	e := c.cached()
	if e == nil || e.Token == nil {
		return "", nil
	}
	t := e.Token
	now := time.Now()
	c.mu.Lock()
	keep := now.Before(c.keepUntil)
	c.mu.Unlock()
	if t.expired(now, refreshSkew) && !keep {
		// A token that still works goes now when the refresh is another request's
		// (or another process's) to make: it must not wait on a slow endpoint.
		nt, err := c.renewToken(ctx, t.AccessToken, false, !t.expired(now, 0))
		var paused *pausedError
		switch {
		case err == nil:
			t = nt
		case errors.Is(err, errNoGrant):
			return "", nil
		case errors.Is(err, errBusy), errors.As(err, &paused):
			// Said once, by the attempt that failed.
		default:
			c.log.Warn("refreshing the OAuth token failed; using the one there is", "err", err)
		}
	}
	return "Bearer " + t.AccessToken, nil
}

// errNoGrant: there is no grant to use or refresh; only a sign-in gets one.
var errNoGrant = errors.New("no OAuth grant")

// errBusy: another request or process is refreshing, and the caller did not wait.
var errBusy = errors.New("a refresh is under way")

// pausedError is a refresh not tried, because the last one failed a moment ago.
type pausedError struct {
	err   error
	until time.Time
}

func (e *pausedError) Error() string {
	return fmt.Sprintf("%v (not tried again before %s)", e.err, e.until.Format(time.TimeOnly))
}

func (e *pausedError) Unwrap() error { return e.err }

// refresh renews the grant whose access token is stale, under the store's lock: when
// another process (or request) already replaced that token, its token is used and no
// request is made, so many proxies refresh once. after401 says the server refused the
// stale token; otherwise it is only close to its expiry, and a refused refresh keeps
// it while it lasts.
func (c *Client) refresh(ctx context.Context, stale string, after401 bool) (*Token, error) {
	return c.renewToken(ctx, stale, after401, false)
}

// renewToken is refresh; with noWait, errBusy instead of waiting when a refresh is
// already under way here or in another process (the caller has a token that works).
// After a failed attempt, none is made for refreshPause: the failure is returned
// (a pausedError), so that requests do not each wait on the endpoint in turn.
func (c *Client) renewToken(ctx context.Context, stale string, after401, noWait bool) (*Token, error) {
	if noWait {
		select {
		case c.renew <- struct{}{}:
		default:
			return nil, errBusy
		}
	} else {
		select {
		case c.renew <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the refresh under way: %w", ctx.Err())
		}
	}
	defer func() { <-c.renew }()
	now := time.Now()
	if e := c.cached(); e != nil && e.Token != nil && e.Token.AccessToken != stale && !e.Token.expired(now, refreshSkew) {
		return e.Token, nil
	}
	c.mu.Lock()
	failed, until := c.refreshFailed, c.retryAt
	c.mu.Unlock()
	if failed != nil && now.Before(until) {
		return nil, &pausedError{err: failed, until: until}
	}
	var unlock func()
	var err error
	if noWait {
		unlock, err = c.o.Store.tryLock(c.resource)
	} else {
		lctx, cancel := context.WithTimeout(ctx, 2*requestTimeout)
		defer cancel()
		unlock, err = c.o.Store.Lock(lctx, c.resource)
	}
	if err != nil {
		return nil, err
	}
	defer unlock()
	e, err := c.o.Store.Load(c.resource)
	if err != nil {
		return nil, err
	}
	c.setCached(e)
	if e == nil || e.Token == nil {
		return nil, errNoGrant
	}
	if e.Token.AccessToken != stale && !e.Token.expired(now, refreshSkew) {
		return e.Token, nil // another process refreshed it
	}
	if e.Token.RefreshToken == "" || e.Server == nil || e.Client == nil {
		if after401 || e.Token.expired(now, 0) {
			return nil, errNoGrant
		}
		return e.Token, nil
	}
	form := url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {e.Token.RefreshToken},
		"resource":      {c.resource},
	}
	c.log.Debug("refreshing the OAuth token")
	t, err := tokenRequest(ctx, c.hc, e.Server, e.Client, form, e.Token, e.Scopes)
	if err != nil && !invalidGrant(err) {
		if ctx.Err() == nil { // not the caller giving up: the endpoint failed
			c.mu.Lock()
			c.refreshFailed, c.retryAt = err, time.Now().Add(refreshPause)
			c.mu.Unlock()
		}
		return nil, err
	}
	c.mu.Lock()
	c.refreshFailed = nil
	c.mu.Unlock()
	if err != nil {
		if !after401 && !e.Token.expired(now, 0) {
			// The access token still works: keep the grant until it does not.
			c.log.Warn("the authorization server refused to refresh the token; using it until it expires", "err", err)
			c.mu.Lock()
			c.keepUntil = e.Token.Expiry
			c.mu.Unlock()
			return e.Token, nil
		}
		c.log.Warn("the authorization server refused to refresh the token: a new sign-in is needed", "err", err)
		// A copy: the cached entry is read by other requests without the lock, so
		// a cached entry is never changed, only replaced.
		ne := *e
		ne.Token = nil // the registration stays, unless the server no longer knows it
		if forgotClient(err) && ne.Client != nil && ne.Client.Kind == KindDynamic {
			// Kept, every sign-in after would use it, and an authorization server
			// answers an unknown client_id with an error page, never a redirect:
			// no sign-in could finish. The next one registers again.
			ne.Client = nil
		}
		if err := c.o.Store.Save(&ne); err != nil {
			return nil, err
		}
		c.setCached(&ne)
		return nil, errNoGrant
	}
	ne := *e
	ne.Token = t
	if err := c.o.Store.Save(&ne); err != nil {
		return nil, err
	}
	c.setCached(&ne)
	return t, nil
}

// Refused is told that the server answered a request sent with the Authorization
// header sent (or none) with status (401 or 403) and these WWW-Authenticate values.
// It renews the credentials (another process's new token, a refresh, or a sign-in:
// the browser is opened and the URL said on Notify) and reports whether the request
// should be sent again. It waits for a sign-in at most Options.Wait; past that the
// sign-in goes on, and the error says how to finish it.
func (c *Client) Refused(ctx context.Context, status int, challenges []string, sent string) (bool, error) {
	ch := ParseChallenge(challenges)
	stale := bearerToken(sent)
	switch status {
	case http.StatusUnauthorized:
		if stale != "" {
			t, err := c.refresh(ctx, stale, true)
			if err == nil && t.AccessToken != stale {
				return true, nil
			}
			if err != nil && !errors.Is(err, errNoGrant) {
				return false, fmt.Errorf("renewing the OAuth token: %w", err)
			}
		} else if e := c.reload(); e != nil && e.Token != nil && !e.Token.expired(time.Now(), 0) {
			return true, nil // signed in meanwhile (bir-proxy login, another proxy)
		}
		var scopes []string
		if ch.Scope != "" {
			scopes = scopeList(ch.Scope)
		} else if e := c.cached(); e != nil {
			scopes = e.Scopes
		}
		if err := c.signIn(ctx, stale, scopes, nil, ch.ResourceMetadata); err != nil {
			return false, err
		}
		return true, nil
	case http.StatusForbidden:
		if ch.Error != "insufficient_scope" {
			return false, nil
		}
		need := scopeList(ch.Scope)
		e := c.reload()
		if e != nil && e.Token != nil && e.Token.AccessToken != stale && covers(scopeList(e.Token.Scope), need) {
			return true, nil // another process stepped up
		}
		if e != nil && e.Token != nil && e.Token.AccessToken == stale && covers(scopeList(e.Token.Scope), need) {
			// The refused token has what the challenge names: a sign-in for the same
			// scopes (a browser tab per call) would get the same refusal.
			c.log.Warn("the server refuses a token that has the scopes it names", "scopes", strings.Join(need, " "))
			return false, nil
		}
		var had []string
		if e != nil {
			had = e.Scopes
			if e.Token != nil {
				had = union(had, scopeList(e.Token.Scope))
			}
		}
		want := union(had, need)
		c.log.Info("the server needs more scopes: signing in again for them", "scopes", strings.Join(want, " "))
		if err := c.signIn(ctx, stale, want, need, ch.ResourceMetadata); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

func bearerToken(h string) string {
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// NeedLoginError is a sign-in that did not finish within the wait.
type NeedLoginError struct {
	Name, URL string
	Wait      time.Duration
	Cause     error
}

func (e *NeedLoginError) Error() string {
	s := fmt.Sprintf("server %s needs an OAuth sign-in", e.Name)
	switch {
	case e.Cause != nil:
		s += ", which failed: " + e.Cause.Error() + ";"
	case e.Wait > 0:
		s += fmt.Sprintf(", which did not finish within %s: finish it in the browser (its URL is on the proxy's stderr), or", e.Wait)
	default:
		s += ":"
	}
	return s + fmt.Sprintf(" run `bir-proxy login --url %s` in a terminal, then call again", e.URL)
}

func (e *NeedLoginError) Unwrap() error { return e.Cause }

// signIn runs (or joins) the sign-in of this process and waits for it, at most
// Options.Wait. need is what a step-up needs the new token to cover. After a sign-in
// that failed, here or in another process, none starts for a while (signInPause):
// the failure is the answer.
func (c *Client) signIn(ctx context.Context, stale string, scopes, need []string, prmURL string) error {
	if signedIn, err := c.pausedSignIn(stale, need); signedIn || err != nil {
		return err
	}
	c.mu.Lock()
	f := c.flow
	if f == nil {
		f = &flow{done: make(chan struct{})}
		c.flow = f
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			fctx, cancel := context.WithTimeout(c.ctx, c.o.FlowLifetime)
			defer cancel()
			f.err = c.runFlow(fctx, stale, scopes, need, prmURL, false)
			c.flowEnded(f.err)
			close(f.done)
		}()
	}
	c.mu.Unlock()
	wctx := ctx
	if c.o.Wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, c.o.Wait)
		defer cancel()
	}
	select {
	case <-f.done:
		if f.err != nil {
			return &NeedLoginError{Name: c.o.Name, URL: c.o.ShownURL, Cause: f.err}
		}
		return nil
	case <-wctx.Done():
		return &NeedLoginError{Name: c.o.Name, URL: c.o.ShownURL, Wait: c.o.Wait}
	}
}

// pausedSignIn is the error a request that needs a sign-in gets while the pause after
// a failed one lasts (this process's, or another's noted in the store), or nil when
// a sign-in may start (or join the one under way); signedIn: a token came meanwhile.
func (c *Client) pausedSignIn(stale string, need []string) (signedIn bool, err error) {
	now := time.Now()
	c.mu.Lock()
	running := c.flow != nil
	failed, until, had := c.signInFailed, c.signInAt, c.failedToken
	c.mu.Unlock()
	if running {
		return false, nil
	}
	if failed == nil || !now.Before(until) {
		failed = nil
		if f := c.o.Store.failure(c.resource, now); f != nil {
			failed, until, had = f.err(), f.Until, f.Token
		}
	}
	if failed == nil {
		return false, nil
	}
	e := c.reload()
	if fresh(e, stale, need) {
		return true, nil // signed in meanwhile (bir-proxy login, another proxy)
	}
	if tokenSum(accessToken(e)) != had {
		// The grant changed since the failure: what failed then says nothing now.
		c.mu.Lock()
		if c.signInFailed == failed {
			c.signInFailed, c.signInFails = nil, 0
		}
		c.mu.Unlock()
		return false, nil
	}
	return false, &NeedLoginError{Name: c.o.Name, URL: c.o.ShownURL, Cause: &pausedError{err: failed, until: until}}
}

// sharedFailure is the failure another process's sign-in ended with, noted in the
// store, while its pause lasts and the grant is the one it failed with: a process
// that waited for that sign-in takes it as its own, rather than opening a browser
// to fail the same way, each in turn.
func (c *Client) sharedFailure() error {
	f := c.o.Store.failure(c.resource, time.Now())
	if f == nil || f.Token != tokenSum(accessToken(c.cached())) {
		return nil
	}
	return &pausedError{err: f.err(), until: f.Until}
}

// pauseAfter is the pause after the n-th sign-in in a row that failed.
func pauseAfter(n int) time.Duration {
	p := signInPause
	for i := 1; i < n && p < signInPauseMax; i++ {
		p *= 2
	}
	return min(p, signInPauseMax)
}

// flowEnded notes how the sign-in of this process ended: a failure starts (or
// lengthens) the pause before the next, and is said on the log, the one place
// besides the host's error answers where the user sees why; a success ends it.
func (c *Client) flowEnded(err error) {
	c.mu.Lock()
	c.flow = nil
	if err == nil {
		c.signInFailed, c.signInFails = nil, 0
		c.mu.Unlock()
		return
	}
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return // Close: the proxy is ending, nothing failed
	}
	c.signInFails++
	pause := pauseAfter(c.signInFails)
	until := time.Now().Add(pause)
	var theirs *pausedError
	adopted := errors.As(err, &theirs)
	if adopted {
		err, until = theirs.err, theirs.until
	}
	c.signInFailed, c.signInAt, c.failedToken = err, until, tokenSum(accessToken(c.entry))
	c.mu.Unlock()
	// err holds no secret: token endpoint errors are scrubbed (scrubSecrets), and
	// the others name URLs, codes of errors and the server's own words.
	if adopted {
		c.log.Warn("another bir-proxy's OAuth sign-in to this server failed; requests get its error, without a new sign-in, for a while", "err", err,
			"until", until.Format(time.TimeOnly))
		return
	}
	c.log.Warn("the OAuth sign-in failed; requests get this error, without a new sign-in, for a while", "err", err,
		"retry_after", pause.String())
}

// accessToken is e's access token, or "".
func accessToken(e *Entry) string {
	if e == nil || e.Token == nil {
		return ""
	}
	return e.Token.AccessToken
}

// Login signs in now, from a terminal: the browser is opened whatever is stored (the
// user asked), and it returns once the token is stored or ctx ends.
func (c *Client) Login(ctx context.Context) error {
	stale := ""
	if e := c.reload(); e != nil && e.Token != nil {
		stale = e.Token.AccessToken
	}
	var scopes []string
	if e := c.cached(); e != nil {
		scopes = e.Scopes
	}
	return c.runFlow(ctx, stale, scopes, nil, "", true)
}

// fresh reports whether e holds a token a waiting sign-in can stop for: not the
// refused one, not expired, with the scopes a step-up needs.
func fresh(e *Entry, stale string, need []string) bool {
	return e != nil && e.Token != nil && e.Token.AccessToken != stale && !e.Token.expired(time.Now(), 0) &&
		covers(scopeList(e.Token.Scope), need)
}

// runFlow gets a new token. Whoever binds the callback port runs the browser flow;
// the others wait for the token it stores (or for the port, when the holder was
// signing in to another server, or gave up).
func (c *Client) runFlow(ctx context.Context, stale string, scopes, need []string, prmURL string, interactive bool) error {
	said := false
	t := time.NewTicker(portPoll)
	defer t.Stop()
	for polls := 0; ; polls++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.o.CallbackPort))
		if err == nil {
			if !interactive {
				if err := c.sharedFailure(); err != nil {
					ln.Close()
					return err
				}
			}
			err = c.authorize(ctx, ln, func(err error) { c.noteOutcome(err, interactive) }, stale, scopes, need, prmURL)
			ln.Close()
			return err
		}
		if !errors.Is(err, syscall.EADDRINUSE) && !isAddrInUse(err) {
			return fmt.Errorf("opening the sign-in's callback port 127.0.0.1:%d: %w", c.o.CallbackPort, err)
		}
		if e := c.reload(); fresh(e, stale, need) {
			return nil
		}
		if !interactive {
			if err := c.sharedFailure(); err != nil {
				return err
			}
		}
		if polls%probeEvery == 0 && c.portHeldByOther(ctx) {
			// No sign-in is coming from there: waiting would only hold each request
			// for --oauth-wait, and tell it to finish a browser page there is not.
			return fmt.Errorf("the sign-in's callback port 127.0.0.1:%d is held by another program, not a bir-proxy: end it, or give --oauth-port another port (the redirect URI changes with it: a pre-registered client needs it registered)", c.o.CallbackPort)
		}
		if !said {
			said = true
			msg := fmt.Sprintf("bir-proxy: server %s: another bir-proxy holds the sign-in's callback port %d; waiting for its sign-in", c.o.Name, c.o.CallbackPort)
			if p := c.o.Store.pending(c.resource); p != "" {
				msg += " (its browser page: " + p + ")"
				if interactive {
					_ = c.o.Open(ctx, p)
				}
			}
			fmt.Fprintln(c.o.Notify, msg)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("no token came: %w", ctx.Err())
		}
	}
}

// noteOutcome notes for the other processes how the sign-in of the port's holder
// ended: a failure (not a `login`'s, not this proxy ending) is kept beside the entry
// for its pause, a success forgets the last. It is called while the port is still
// held (authorize calls it before its callback server closes the listener): the
// processes waiting for the port find the failure first, and take it as theirs.
func (c *Client) noteOutcome(err error, interactive bool) {
	switch {
	case err == nil:
		c.o.Store.setFailure(c.resource, nil)
	case !interactive && c.ctx.Err() == nil:
		c.mu.Lock()
		n, sum := c.signInFails+1, tokenSum(accessToken(c.entry))
		c.mu.Unlock()
		c.o.Store.setFailure(c.resource, &signInFailure{Error: err.Error(), Until: time.Now().Add(pauseAfter(n)), Token: sum})
	}
}

// holderHeader marks the answers of a bir-proxy's callback server, so that a process
// finding the port taken can tell a bir-proxy's sign-in (to wait for) from another
// program (nothing to wait for).
const holderHeader = "X-Bir-Proxy-Sign-In"

// probeEvery: the port's holder is looked at on the first poll, then every this many.
const probeEvery = 20

// portHeldByOther reports whether the callback port is held by a program that is not
// a bir-proxy: it answered HTTP without holderHeader. Anything else (no answer yet: a
// bir-proxy's server starts after discovery; the port freed) is not known to be.
func (c *Client) portHeldByOther(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// Loopback: no proxy. net/http's redirects, as this probe always followed them.
	hc := httpclient.New(httpclient.Options{Proxy: httpclient.NoProxy, Redirects: httpclient.Follow, DisableKeepAlives: true})
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", c.o.CallbackPort), nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.Header.Get(holderHeader) == ""
}

func isAddrInUse(err error) bool {
	return strings.Contains(err.Error(), "address already in use") || strings.Contains(err.Error(), "Only one usage of each socket address")
}

// authorize is the browser flow, run by the holder of the callback port ln. ended is
// told its outcome before ln is closed, whichever way it ends.
func (c *Client) authorize(ctx context.Context, ln net.Listener, ended func(error), stale string, scopes, need []string, prmURL string) (err error) {
	var stop func() // the callback server's end, which closes ln
	defer func() {
		// The outcome is noted while the port is held. Noted after the callback
		// server's Shutdown (which closes ln at once, then waits up to 2 s for its
		// connections: a browser's preconnected socket keeps it waiting), a proxy
		// waiting for the port took it, found no failure, and opened a browser of its
		// own: five proxies, five tabs, each failing the same way.
		ended(err)
		if stop != nil {
			stop()
		}
	}()
	// A token may have come while this process waited for the port.
	e := c.reload()
	if fresh(e, stale, need) {
		return nil
	}
	prm, err := discoverResource(ctx, c.hc, c.resource, prmURL)
	if err != nil {
		return err
	}
	issuer := originOf(c.resource)
	if prm != nil {
		issuer = prm.AuthorizationServers[0]
	}
	as, err := discoverServer(ctx, c.hc, issuer)
	if err != nil {
		return err
	}
	switch {
	case len(c.o.Scopes) > 0:
		scopes = union(c.o.Scopes, need)
	case len(scopes) == 0 && prm != nil:
		scopes = prm.ScopesSupported
	}
	cl, err := c.clientFor(ctx, as, e, scopes)
	if err != nil {
		return err
	}
	verifier, state := randomString(32), randomString(16)
	authURL, err := url.Parse(as.AuthorizationEndpoint)
	if err != nil {
		return fmt.Errorf("the authorization endpoint is not a URL: %w", err)
	}
	q := authURL.Query()
	q.Set("response_type", "code")
	q.Set("client_id", cl.ID)
	q.Set("redirect_uri", c.redirect)
	q.Set("code_challenge", s256(verifier))
	q.Set("code_challenge_method", "S256")
	q.Set("state", state)
	q.Set("resource", c.resource)
	if len(scopes) > 0 {
		q.Set("scope", strings.Join(scopes, " "))
	}
	authURL.RawQuery = q.Encode()

	type result struct {
		code string
		err  error
	}
	got := make(chan result, 1)
	answered := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/callback", func(w http.ResponseWriter, r *http.Request) {
		qs := r.URL.Query()
		if qs.Get("state") != state {
			// Not this sign-in's answer (a stale tab, another page): ignored.
			http.Error(w, "This is not the answer to the sign-in under way. Close this tab.", http.StatusBadRequest)
			return
		}
		res := result{code: qs.Get("code")}
		// RFC 9207 (MCP 2026-07-28 "Authorization Response Validation"): the issuer
		// the answer names must be the one the sign-in went to (a mix-up attack
		// sends the code of another server here); required when the server says
		// it sends it.
		if iss, has := qs["iss"]; (has && (len(iss) != 1 || iss[0] != as.Issuer)) || (!has && as.IssParameterSupported) {
			res.code, res.err = "", fmt.Errorf("the sign-in's answer came from another authorization server than %s (iss)", as.Issuer)
		} else if e := qs.Get("error"); e != "" || res.code == "" {
			d := qs.Get("error_description")
			if e == "" {
				e = "no code"
			}
			res.err = fmt.Errorf("the authorization server answered the sign-in with %s", e)
			if d != "" && len(d) < 300 {
				res.err = fmt.Errorf("%w: %s", res.err, d)
			}
		}
		select {
		case got <- res:
		default:
			http.Error(w, "The sign-in was already answered.", http.StatusConflict)
			return
		}
		var err error
		select {
		case err = <-answered:
		case <-ctx.Done():
			err = ctx.Err()
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "<p>Signing in to %s failed: %s</p>", html.EscapeString(c.o.Name), html.EscapeString(err.Error()))
			return
		}
		fmt.Fprintf(w, "<p>Signed in to %s. You can close this tab.</p>", html.EscapeString(c.o.Name))
	})
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(holderHeader, "1")
		mux.ServeHTTP(w, r)
	})}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	stop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx) // lets the page of the answer be written
		srv.Close()
		<-served
	}

	c.o.Store.setPending(c.resource, authURL.String())
	defer c.o.Store.setPending(c.resource, "")
	fmt.Fprintf(c.o.Notify, "bir-proxy: server %s needs an OAuth sign-in; opening the browser at:\n  %s\n(if no browser opens, visit that URL; or run `bir-proxy login --url %s` in a terminal)\n",
		c.o.Name, authURL.String(), c.o.ShownURL)
	if err := c.o.Open(ctx, authURL.String()); err != nil {
		fmt.Fprintf(c.o.Notify, "bir-proxy: could not open a browser (%v): visit the URL above\n", err)
	}
	var res result
	select {
	case res = <-got:
	case <-ctx.Done():
		return fmt.Errorf("the browser did not come back: %w", ctx.Err())
	}
	if res.err != nil {
		answered <- res.err
		return res.err
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {res.code},
		"redirect_uri":  {c.redirect},
		"code_verifier": {verifier},
		"resource":      {c.resource},
	}
	tok, err := tokenRequest(ctx, c.hc, as, cl, form, nil, scopes)
	if err == nil {
		err = c.update(ctx, func(e *Entry) { e.Server, e.Client, e.Token, e.Scopes = as, cl, tok, scopes })
	}
	answered <- err
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.keepUntil = time.Time{}
	c.mu.Unlock()
	fmt.Fprintf(c.o.Notify, "bir-proxy: signed in to server %s\n", c.o.Name)
	return nil
}

// update changes the stored entry under the lock.
func (c *Client) update(ctx context.Context, change func(e *Entry)) error {
	lctx, cancel := context.WithTimeout(ctx, 2*requestTimeout)
	defer cancel()
	unlock, err := c.o.Store.Lock(lctx, c.resource)
	if err != nil {
		return err
	}
	defer unlock()
	e, err := c.o.Store.Load(c.resource)
	if err != nil {
		return err
	}
	if e == nil {
		e = &Entry{ServerURL: c.resource}
	}
	change(e)
	if err := c.o.Store.Save(e); err != nil {
		return err
	}
	c.setCached(e)
	return nil
}

// clientFor is the client identity to sign in with, in the spec's order: the
// pre-registered client given, a Client ID Metadata Document the server accepts, the
// client registered before (same server, same redirect URI), a new dynamic
// registration (stored at once, so a sign-in abandoned in the browser does not
// register again next time).
func (c *Client) clientFor(ctx context.Context, as *ServerMetadata, e *Entry, scopes []string) (*ClientInfo, error) {
	if c.o.ClientID != "" {
		ci := &ClientInfo{Kind: KindPreRegistered, ID: c.o.ClientID, Secret: c.o.ClientSecret, AuthMethod: "none",
			RedirectURI: c.redirect, Issuer: as.Issuer}
		if ci.Secret != "" {
			ci.AuthMethod = secretMethod(as)
		}
		return ci, nil
	}
	if c.o.ClientMetadataURL != "" && as.ClientIDMetadataDocumentSupported {
		return &ClientInfo{Kind: KindMetadataDoc, ID: c.o.ClientMetadataURL, AuthMethod: "none",
			RedirectURI: c.redirect, Issuer: as.Issuer}, nil
	}
	if e != nil && e.Client != nil && e.Client.Kind == KindDynamic && e.Client.Issuer == as.Issuer && e.Client.RedirectURI == c.redirect {
		return e.Client, nil
	}
	if as.RegistrationEndpoint == "" {
		hint := ""
		if c.o.ClientMetadataURL != "" {
			hint = " (it does not accept Client ID Metadata Documents)"
		}
		return nil, fmt.Errorf("the authorization server %s offers no dynamic client registration%s: register a client there with the redirect URI %s and give --client-id", as.Issuer, hint, c.redirect)
	}
	ci, err := register(ctx, c.hc, as, c.o.ClientName, c.redirect, scopes)
	if err != nil {
		return nil, err
	}
	if err := c.update(ctx, func(e *Entry) { e.Server, e.Client = as, ci }); err != nil {
		return nil, err
	}
	return ci, nil
}

func originOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Scheme + "://" + p.Host
}
