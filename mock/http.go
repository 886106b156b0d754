package mock

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Bounds of the request bodies read over HTTP (a Mock's, set by tests).
const (
	// bodyTimeout bounds the reading of one body: a client that announces one and
	// sends it a byte a minute (or never) must not hold its connection for ever.
	bodyTimeout = time.Minute
	// maxHeld bounds the bodies read at once, together: each may be MaxMessage, and
	// clients may be many.
	maxHeld int64 = 2 * MaxMessage
)

// Handler is the mock as a Streamable HTTP server (MCP 2025-03-26 and later), one
// endpoint: a POSTed message is answered in the response's JSON body (a notification
// or a response with 202 and none); GET (the server's own stream) and DELETE (no
// sessions are kept) get 405. The answering is Take's, as on stdio.
func (m *Mock) Handler() http.Handler {
	return http.HandlerFunc(m.serveHTTP)
}

func (m *Mock) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "bir-proxy mock: POST a JSON-RPC message", http.StatusMethodNotAllowed)
		return
	}
	// A page in a browser must not reach a local server (DNS rebinding): an Origin,
	// when sent, must be the loopback's.
	if o := r.Header.Get("Origin"); o != "" && !loopbackOrigin(o) {
		http.Error(w, "bir-proxy mock: forbidden origin", http.StatusForbidden)
		return
	}
	// The body is read within bodyTimeout (a slow-loris client held its
	// connection for ever), and counted against maxHeld with every other being
	// read (TestHTTPBodiesAreBounded).
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(m.bodyTimeout))
	br := &heldReader{r: http.MaxBytesReader(w, r.Body, MaxMessage), m: m}
	defer func() { m.held.Add(-br.n) }()
	body, err := io.ReadAll(br)
	if errors.Is(err, errBusy) {
		http.Error(w, "bir-proxy mock: busy: too many large requests at once", http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "bir-proxy mock: message too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "bir-proxy mock: reading the request", http.StatusBadRequest)
		return
	}
	// Read: an answer may wait (--latency). (Not before: the server drains what
	// is left of a body it did not read whole, and that too is bounded.)
	rc.SetReadDeadline(time.Time{})
	body = bytes.TrimSpace(body)
	if !jsonlex.Valid(body) {
		writeJSON(w, []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bir-proxy mock: a body that is not JSON"}}`))
		return
	}
	// Each answer is written as it is made: a batch of 200 tools/list in 10 KB,
	// each answered with a recorded 1 MiB list, held them all and their join
	// (TestMockHTTPBatchMemoryBound). The status is the first answer's to send:
	// 202 when there is none.
	batch, n := body[0] == '[', 0
	jsonlex.EachRPC(body, func(msg []byte, f jsonlex.Fields) {
		b := m.Take(msg, f).Wait(r.Context())
		switch {
		case b == nil, !batch && n > 0:
			return
		case n == 0:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			if batch {
				w.Write([]byte{'['})
			}
		default:
			w.Write([]byte{','})
		}
		n++
		w.Write(b)
	})
	switch {
	case n == 0:
		w.WriteHeader(http.StatusAccepted)
	case batch:
		w.Write([]byte{']'})
	}
}

// errBusy: the bodies being read hold maxHeld.
var errBusy = errors.New("busy")

// heldReader counts what it reads against m.held; n is its part, given back when
// the request is done.
type heldReader struct {
	r io.Reader
	m *Mock
	n int64
}

func (h *heldReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.n += int64(n)
	if h.m.held.Add(int64(n)) > h.m.maxHeld {
		return n, errBusy
	}
	return n, err
}

func writeJSON(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func loopbackOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}
