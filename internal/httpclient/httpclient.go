// Package httpclient builds every HTTP client of the proxy's own requests (recorder,
// OTLP exporter, OAuth) from one Options, so that whether a client goes through an
// HTTP proxy from the environment and which redirects it follows are written where
// it is made, not left to what a zero http.Transport or http.Client happens to do.
package httpclient

import (
	"net"
	"net/http"
	"time"
)

// Proxy says whether requests go through the HTTP proxy the environment names.
type Proxy uint8

const (
	// NoProxy connects directly whatever HTTPS_PROXY/HTTP_PROXY say: for a peer that
	// must get the client's credentials and nobody else (the recorder, on loopback,
	// with its bearer token; a probe of a loopback port).
	NoProxy Proxy = iota
	// FromEnv honours HTTPS_PROXY, HTTP_PROXY and NO_PROXY (http.ProxyFromEnvironment):
	// for peers on the network the user may only reach through one.
	FromEnv
)

// Redirects says which redirects the client follows.
type Redirects uint8

const (
	// NoRedirects follows none: the 3xx is the answer (where a redirect would carry a
	// bearer token, a code or a secret to wherever it points).
	NoRedirects Redirects = iota
	// SameOrigin follows a redirect only to the scheme and host the request was first
	// sent to, in a chain of at most MaxHops requests (configured headers, an API key,
	// go nowhere else).
	SameOrigin
	// Follow is net/http's rule: up to 10, anywhere (net/http drops Authorization and
	// cookies on a move to another domain).
	Follow
)

// Options of a client. The zero value is a bare http.Transport (no dial or TLS
// timeout, no HTTP/2 with a custom dialer) with no proxy and no redirects.
type Options struct {
	Proxy     Proxy
	Redirects Redirects
	// MaxHops bounds SameOrigin's chain, the first request included; 0 means 3 (two
	// redirects followed: the OTLP exporter's rule as it always was).
	MaxHops int
	// Standard starts from net/http's DefaultTransport settings: dial 30 s with 30 s
	// keep-alive, TLS handshake 10 s, HTTP/2 attempted, 100 idle connections closed
	// after 90 s, Expect-Continue 1 s. The fields below override them.
	Standard bool

	Timeout                time.Duration // http.Client.Timeout: the whole exchange, body included; 0: none
	DialTimeout            time.Duration // with KeepAlive, a net.Dialer of these (0 KeepAlive: 30 s)
	KeepAlive              time.Duration
	TLSHandshakeTimeout    time.Duration
	ResponseHeaderTimeout  time.Duration
	MaxResponseHeaderBytes int64
	MaxIdleConns           int
	MaxIdleConnsPerHost    int
	IdleConnTimeout        time.Duration
	DisableKeepAlives      bool
	WriteBufferSize        int
}

// New returns a client with its own transport, made as o says.
func New(o Options) *http.Client {
	var t *http.Transport
	if o.Standard {
		t = http.DefaultTransport.(*http.Transport).Clone()
	} else {
		t = &http.Transport{}
	}
	switch o.Proxy {
	case FromEnv:
		t.Proxy = http.ProxyFromEnvironment
	default:
		t.Proxy = nil
	}
	if o.DialTimeout > 0 || o.KeepAlive > 0 {
		keepAlive := o.KeepAlive
		if keepAlive == 0 {
			keepAlive = 30 * time.Second
		}
		t.DialContext = (&net.Dialer{Timeout: o.DialTimeout, KeepAlive: keepAlive}).DialContext
	}
	set := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	set(&t.TLSHandshakeTimeout, o.TLSHandshakeTimeout)
	set(&t.ResponseHeaderTimeout, o.ResponseHeaderTimeout)
	set(&t.IdleConnTimeout, o.IdleConnTimeout)
	if o.MaxResponseHeaderBytes > 0 {
		t.MaxResponseHeaderBytes = o.MaxResponseHeaderBytes
	}
	if o.MaxIdleConns > 0 {
		t.MaxIdleConns = o.MaxIdleConns
	}
	if o.MaxIdleConnsPerHost > 0 {
		t.MaxIdleConnsPerHost = o.MaxIdleConnsPerHost
	}
	if o.WriteBufferSize > 0 {
		t.WriteBufferSize = o.WriteBufferSize
	}
	t.DisableKeepAlives = o.DisableKeepAlives
	c := &http.Client{Transport: t, Timeout: o.Timeout}
	switch o.Redirects {
	case Follow:
	case SameOrigin:
		c.CheckRedirect = SameOriginRule(o.MaxHops)
	default:
		c.CheckRedirect = noRedirects
	}
	return c
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// SameOriginRule is a CheckRedirect that follows a redirect only to the scheme and
// host of the first request, in a chain of at most hops requests (0: 3); past either,
// the 3xx is the answer.
func SameOriginRule(hops int) func(*http.Request, []*http.Request) error {
	if hops <= 0 {
		hops = 3
	}
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= hops {
			return http.ErrUseLastResponse
		}
		first := via[0].URL
		if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
			return http.ErrUseLastResponse
		}
		return nil
	}
}
