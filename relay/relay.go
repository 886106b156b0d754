// Package relay moves messages between the host and the upstream: two pumps, one per
// direction, each forwarding a message the moment it is read, as the exact bytes it
// arrived as. It also gives the proxy a way to send requests of its own to the upstream
// (replay dispatches, re-handshakes) in an id namespace no host uses, and routes their
// answers back to the proxy instead of the host.
package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/upstream"
)

// Interceptor sees every message that passes. FromHost runs on the host's path, so it
// may edit but must never wait; the other methods run after the message was forwarded
// and must only hand work to another goroutine.
type Interceptor interface {
	// FromHost returns the bytes to forward for msg, read from the host at readAt.
	FromHost(msg []byte, readAt time.Time) []byte
	// Forwarded says the bytes FromHost last returned were handed to the upstream at
	// sentAt (written, or held for the next message already in hand: see Conn.Hold).
	// It is called on the same goroutine as FromHost, right after it.
	Forwarded(sentAt time.Time)
	// FromUpstream gets each message the upstream sent to the host, after it was
	// forwarded; readAt is when it was read.
	FromUpstream(msg []byte, readAt time.Time)
	// UpstreamLost says the upstream went away while the host was still connected.
	UpstreamLost(at time.Time)
}

// Options configure a Relay.
type Options struct {
	HostIn   io.Reader
	HostOut  io.Writer
	Upstream upstream.Conn
	// Intercept, when set, sees and may edit traffic (see Interceptor).
	Intercept Interceptor
	// IDPrefix starts the id of every request the proxy sends on its own; it must be
	// a string no host would use (e.g. "bir:<proxyId>:").
	IDPrefix   string
	MaxMessage int
	Logger     *slog.Logger
}

// Relay is one host session relayed to one upstream.
type Relay struct {
	hostIn  *framing.Reader
	hostOut *framing.Writer
	up      upstream.Conn
	ic      Interceptor
	log     *slog.Logger

	idPrefix string
	nextID   atomic.Uint64
	// ownPending counts the proxy's own requests whose answer has not come, waited
	// for or abandoned (len(waiters), readable without the lock). While it is zero,
	// which is almost always, the upstream pump forwards without looking inside a
	// message at all.
	ownPending atomic.Int64
	mu         sync.Mutex
	waiters    map[string]chan []byte

	collecting atomic.Bool

	hostDone chan struct{} // closed when the host has closed its side
	hostErr  error
}

// New returns a Relay; Run starts it.
func New(o Options) *Relay {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	prefix := o.IDPrefix
	if prefix == "" {
		prefix = "bir:"
	}
	return &Relay{
		hostIn:   framing.NewReader(o.HostIn, framing.WithMaxMessage(o.MaxMessage)),
		hostOut:  framing.NewWriter(o.HostOut),
		up:       o.Upstream,
		ic:       o.Intercept,
		log:      log,
		idPrefix: prefix,
		waiters:  make(map[string]chan []byte),
		hostDone: make(chan struct{}),
	}
}

// collectAfter is the message size after which a pump asks for a garbage collection
// once the message is forwarded. A large message exists twice while it is assembled
// (its pieces and the whole); left to the pacer, that garbage is still held when the
// next large message arrives, and the proxy's peak memory doubles again.
const collectAfter = 8 << 20

// ErrUpstreamEnded is returned by Run when the upstream went away while the host was
// still connected.
var ErrUpstreamEnded = errors.New("the upstream server ended the session")

// Run relays until the session is over and returns how it ended:
//   - the host closed its input: the upstream is closed gently, every message it still
//     sends is delivered, and Run returns nil;
//   - the upstream went away first: every message it sent is delivered and Run returns
//     ErrUpstreamEnded;
//   - ctx is done: the upstream is closed and Run returns ctx.Err().
func (r *Relay) Run(ctx context.Context) error {
	upDone := make(chan error, 1)
	go func() { upDone <- r.upstreamPump() }()
	go r.hostPump()

	select {
	case err := <-upDone:
		select {
		case <-r.hostDone:
			// Both sides finished; the host's end came first if it caused this.
			return r.hostErr
		default:
		}
		if err != nil {
			return err
		}
		if r.ic != nil {
			r.ic.UpstreamLost(time.Now())
		}
		return ErrUpstreamEnded
	case <-r.hostDone:
		if r.hostErr != nil {
			r.log.Warn("host connection failed; closing the server", "err", r.hostErr)
		}
		r.up.Close()
		err := <-upDone
		if r.hostErr != nil {
			return r.hostErr
		}
		return err
	case <-ctx.Done():
		r.up.Close()
		<-upDone
		return ctx.Err()
	}
}

func (r *Relay) hostPump() {
	defer close(r.hostDone)
	for {
		msg, err := r.hostIn.Read()
		if err != nil {
			var tooLong *framing.TooLongError
			if errors.As(err, &tooLong) {
				r.log.Warn("dropped a message from the host: over the size cap", "bytes", tooLong.Size, "cap", tooLong.Max)
				continue
			}
			if !errors.Is(err, io.EOF) {
				r.hostErr = fmt.Errorf("reading from the host: %w", err)
			}
			return
		}
		readAt := time.Now()
		if r.ic != nil {
			msg = r.ic.FromHost(msg, readAt)
		}
		// The send time is taken as the write starts: an answer can be read before a
		// large write returns, and a call must not end before it started.
		sentAt := time.Now()
		// Under load, messages leave together: a message is held only when the next
		// one is already buffered, so the next Read cannot wait and a Write follows;
		// a lone message always goes out at once.
		write := r.up.Write
		if r.hostIn.Buffered() {
			write = r.up.Hold
		}
		if err := write(msg); err != nil {
			// The upstream is gone; the upstream pump sees it too and ends the
			// session. Keep reading so the host isn't blocked meanwhile.
			r.log.Debug("could not forward a host message", "err", err)
		}
		if r.ic != nil {
			r.ic.Forwarded(sentAt)
		}
		if len(msg) >= collectAfter {
			r.collect()
		}
	}
}

func (r *Relay) upstreamPump() error {
	for {
		msg, err := r.up.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading from the upstream: %w", err)
		}
		readAt := time.Now()
		if r.ownPending.Load() > 0 && r.deliverOwn(msg) {
			if err := r.hostOut.Flush(); err != nil {
				return fmt.Errorf("writing to the host: %w", err)
			}
			continue
		}
		write := r.hostOut.Write
		if r.up.Buffered() {
			write = r.hostOut.Hold // as in hostPump
		}
		if err := write(msg); err != nil {
			return fmt.Errorf("writing to the host: %w", err)
		}
		if r.ic != nil {
			r.ic.FromUpstream(msg, readAt)
		}
		if len(msg) >= collectAfter {
			r.collect()
		}
	}
}

// deliverOwn hands msg to the proxy's own waiting request when it answers one.
func (r *Relay) deliverOwn(msg []byte) bool {
	res := gjson.GetManyBytes(msg, "id", "method")
	id, method := res[0], res[1]
	if id.Type != gjson.String || method.Exists() || len(id.Str) <= len(r.idPrefix) || id.Str[:len(r.idPrefix)] != r.idPrefix {
		return false
	}
	r.mu.Lock()
	ch, ok := r.waiters[id.Str]
	if ok {
		delete(r.waiters, id.Str)
		r.ownPending.Add(-1)
	}
	r.mu.Unlock()
	if ch != nil {
		ch <- msg // buffered: never blocks the pump
	}
	// Ours either way: an answer nobody waits for any more (ch nil), or to an id of
	// our namespace we never sent, is still never the host's.
	return true
}

// Call sends a request of the proxy's own to the upstream and returns the raw response.
// params is the raw JSON of the params member (nil for none). When ctx ends first, the
// upstream is told with notifications/cancelled, and the answer, if it ever comes, is
// dropped: the id stays registered (with no one waiting) until then, so the upstream
// pump keeps looking for it and it cannot reach the host.
func (r *Relay) Call(ctx context.Context, method string, params []byte) ([]byte, error) {
	id := r.idPrefix + strconv.FormatUint(r.nextID.Add(1), 10)
	idJSON := quote(id)
	ch := make(chan []byte, 1)
	r.mu.Lock()
	r.waiters[id] = ch
	r.ownPending.Add(1)
	r.mu.Unlock()

	msg := request(idJSON, method, params)
	if err := r.up.Write(msg); err != nil {
		r.forget(id) // never sent: no answer can come
		return nil, fmt.Errorf("sending %s to the upstream: %w", method, err)
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-ctx.Done():
		r.mu.Lock()
		if _, ok := r.waiters[id]; ok {
			r.waiters[id] = nil // abandoned, still routed to us
		}
		r.mu.Unlock()
		cancel := request("", "notifications/cancelled", []byte(`{"requestId":`+idJSON+`,"reason":"cancelled by bir-proxy"}`))
		if err := r.up.Write(cancel); err != nil {
			r.log.Debug("could not cancel an own request", "id", id, "err", err)
		}
		return nil, fmt.Errorf("waiting for the answer to %s: %w", method, ctx.Err())
	}
}

// Notify sends a notification of the proxy's own to the upstream.
func (r *Relay) Notify(method string, params []byte) error {
	if err := r.up.Write(request("", method, params)); err != nil {
		return fmt.Errorf("sending %s to the upstream: %w", method, err)
	}
	return nil
}

func (r *Relay) forget(id string) {
	r.mu.Lock()
	if _, ok := r.waiters[id]; ok {
		delete(r.waiters, id)
		r.ownPending.Add(-1)
	}
	r.mu.Unlock()
}

// request builds a JSON-RPC request (a notification when idJSON is empty).
func request(idJSON, method string, params []byte) []byte {
	b := make([]byte, 0, 64+len(method)+len(params))
	b = append(b, `{"jsonrpc":"2.0"`...)
	if idJSON != "" {
		b = append(b, `,"id":`...)
		b = append(b, idJSON...)
	}
	b = append(b, `,"method":`...)
	b = append(b, quote(method)...)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// collect starts a garbage collection unless one started by collect is still running.
// It runs beside the pumps: a pump that waited for it would hold the next message (and,
// after a held write, the newline ending this one) for a whole GC cycle.
func (r *Relay) collect() {
	if r.collecting.CompareAndSwap(false, true) {
		go func() {
			runtime.GC()
			r.collecting.Store(false)
		}()
	}
}

// quote is a JSON string literal for s. strconv.Quote is not one: it writes \x escapes
// that JSON parsers reject.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// WriteHost sends a message of the proxy's own to the host (an error answer for a
// request the upstream can no longer answer). It never interleaves with relayed ones.
func (r *Relay) WriteHost(msg []byte) error {
	return r.hostOut.Write(msg)
}
