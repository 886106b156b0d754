// Package relay moves messages between the host and the upstream: two pumps, one per
// direction, each forwarding a message the moment it is read, as the exact bytes it
// arrived as. It also gives the proxy a way to send requests of its own to the upstream
// (replay dispatches, re-handshakes) in an id namespace no host uses, and routes their
// answers back to the proxy instead of the host.
//
// The relay owns the state of the session that outlives any one server: which host
// requests are in flight (answered with an error, never left hanging, when the server
// behind the upstream is replaced or cannot take a message), the proxy's own requests
// (retired the moment the upstream is lost, as x/tools' jsonrpc2_v2 does), and which
// ids belong to a server that is gone.
//
// A policy on the messages plugs in through one seam, Options.Hooks (hooks.go):
// documented fields, as httputil.ReverseProxy's Rewrite, ModifyResponse and
// ErrorHandler, with the power to answer the host in the server's place (Hooks.FromHost's
// answers, Port.Answer from a timer), take a host message or objects of a batch out of
// what goes upstream, cut, drop or replace what goes to the host (Hooks.FromUpstream),
// answer a request of the proxy's own (Hooks.FromProxy), and cancel a request upstream
// (Port.Answer's cancel). The pumps know no policy: the tool policy (--ignore-tool,
// --allow-tool, --call-timeout, and through toolpolicy.Policy's hooks the tool pins'
// block mode and the result budget) is ToolPolicy, a type of its own (policy.go) that
// plugs in there.
package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/upstream"
)

// Interceptor sees every message that passes. FromHost and FromProxy run on a sender's
// path, so they may edit but must never wait; the other methods run after the message
// was forwarded and must only hand work to another goroutine.
type Interceptor interface {
	// FromHost returns the bytes to forward for msg, read from the host at readAt.
	FromHost(msg []byte, readAt time.Time) []byte
	// Forwarded says the bytes FromHost last returned were handed to the upstream at
	// sentAt (written, or held for the next message already in hand: see
	// upstream.Batcher). It is called on the same goroutine as FromHost, right after it.
	Forwarded(sentAt time.Time)
	// FromProxy returns the bytes to send for a message of the proxy's own, about to
	// be written to the upstream at sentAt; own says who asked for it, and why a
	// notifications/cancelled the relay sends for it was sent. It may be called from
	// any goroutine, but never concurrently with FromHost or another FromProxy.
	FromProxy(msg []byte, own Own, sentAt time.Time) []byte
	// FromUpstream gets each message the upstream sent to the host, just before it is
	// written to the host (a host request built on it comes after), or, for a long
	// answer streamed to the host, once it has gone (FromUpstreamStreamed); readAt is
	// when it was read. It must not wait: it is on the host's path.
	FromUpstream(msg []byte, readAt time.Time)
	// ToProxy gets each answer to a request of the proxy's own, after its caller has it.
	ToProxy(msg []byte, readAt time.Time)
	// UpstreamLost says the server went away while the host was still connected: for
	// good, or replaced by another (the session then goes on).
	UpstreamLost(at time.Time)
	// Capabilities says what else it can do, in one value (see Capabilities).
	Capabilities() Capabilities
}

// Capabilities is what an Interceptor can do beyond the Interceptor interface, as one
// value: each interface field is the Interceptor (or a part of it) when it has that
// capability, nil when not. One method gives them all, so a decorator (replay.Gate)
// passes them on in one call: an optional interface asked for with a type assertion,
// as before, was dropped by a decorator that lacked the method — the Gate did not
// expose KeyedInterceptor, and with a recorder a 64 MB host call was held whole
// (TestLongHostCallStreamsWithARecorder) with no test of the relay failing.
type Capabilities struct {
	Lexed           LexedInterceptor
	LexedUpstream   LexedUpstreamInterceptor
	Sparing         SparingInterceptor
	Keyed           KeyedInterceptor
	Streaming       StreamingInterceptor // asked only when Keyed is set
	ResultStreaming ResultStreamingInterceptor
	Timeout         TimeoutInterceptor
	// Passive: it records nothing (a pure pipe, BIR_OFF=1): it reads none of the
	// times the pumps give it and keeps none of the messages past its call. The
	// pumps then do not read the clock for every message (three time.Now per call,
	// ~60 ns each on this project's VMs, were a tenth of the relay's own work per
	// message), and the host's messages are lent by the reader in place
	// (framing.WithLending) when the upstream copies what it is written
	// (CopiesWrites), else carved out of shared blocks rather than allocated one by
	// one (framing.WithSlab).
	Passive bool
	// KeepsBriefly: it reads the times it is given but keeps the host's messages
	// only until it has looked at them, soon after (tracing with nothing recording):
	// the host's messages are then carved out of shared blocks as for a Passive one
	// (framing.WithSlab), as the server's already are in that mode.
	KeepsBriefly bool
}

// SparingInterceptor is an Interceptor that can be told, when a server is replaced,
// which of the host's requests in flight outlive it: held by the upstream while no
// server could take them (upstream.Holder), they were never received by the server
// that went away and will be answered by the next one. The relay calls
// UpstreamLostSparing instead of UpstreamLost when there are such requests.
type SparingInterceptor interface {
	// UpstreamLostSparing is UpstreamLost, except for the calls whose raw ids are in
	// spared: those go on.
	UpstreamLostSparing(at time.Time, spared [][]byte)
}

// LexedInterceptor is an Interceptor that reads a host message from the relay's lex of
// it (jsonlex.Line) rather than lexing it again: the host's path lexes each message
// once, for interception, the relay's registry and the upstream (LexedWriter).
type LexedInterceptor interface {
	Interceptor
	// FromHostLexed is FromHost of msg, which lx describes. lx must describe the
	// bytes returned (an edit moves its spans: jsonlex.Line.Shift); it is the
	// relay's, valid only during the call.
	FromHostLexed(msg []byte, lx *jsonlex.Line, readAt time.Time) []byte
}

// LexedUpstreamInterceptor is an Interceptor that reads an upstream message from the
// lex the upstream made of it (LexedReader): bookkeeping then finds a response's id,
// result and error without reading the message twice more (once to find where it
// ends, once for its members).
type LexedUpstreamInterceptor interface {
	// FromUpstreamLexed is FromUpstream of msg, which lx describes; lx is the relay's,
	// valid only during the call.
	FromUpstreamLexed(msg []byte, lx *jsonlex.Line, readAt time.Time)
}

// Own describes a message of the proxy's own to interception.
type Own struct {
	// Origin names who asked: a replay dispatch's id, which interception puts in the
	// step report of a tools/call; "" for the proxy's own housekeeping.
	Origin string
	// TimedOut marks the notifications/cancelled Call sends because its caller's
	// deadline passed (ctx.Err() is context.DeadlineExceeded) rather than because it
	// was cancelled: the call's report then says timeout, not cancelled.
	TimedOut bool
}

// Options configure a Relay.
type Options struct {
	HostIn   io.Reader
	HostOut  io.Writer
	Upstream upstream.Conn
	// Intercept, when set, sees and may edit traffic (see Interceptor).
	Intercept Interceptor
	// IDs makes the id of every request the proxy sends on its own, the one
	// namespace the upstream's own requests share (upstream.OwnIDs): an answer in it
	// that no own request waits for is never the host's. When nil, one is made with
	// IDPrefix (a string no host would use, e.g. "bir:<proxyId>:").
	IDs        *upstream.OwnIDs
	IDPrefix   string
	MaxMessage int
	Logger     *slog.Logger
	// Hooks, when set, is the seam a policy on the messages plugs in through: it may
	// answer the host itself, take out or cut a message, replace an answer, and cancel
	// a request upstream (Hooks). ToolPolicy is the tool policy's (policy.go).
	Hooks *Hooks
	// StreamThreshold is the size from which a server's message goes to the host as
	// it arrives, when the upstream can (upstream.Streamer; stream.go), and a host's
	// call to the server (hoststream.go): 0 means DefaultStreamThreshold and
	// DefaultHostStreamThreshold, a negative value never.
	StreamThreshold int
}

// Relay is one host session relayed to one upstream.
type Relay struct {
	hostIn  *framing.Reader
	hostSrc io.Reader // what hostIn reads, for stop to interrupt it
	hostOut *framing.Writer
	up      upstream.Conn
	caps    upstream.Capabilities // up's
	batch   upstream.Batcher      // up, when it can coalesce writes; else nil
	lw      upstream.LexedWriter  // up, when it reads the relay's lex; else nil
	lr      upstream.LexedReader  // up, when it lexes what it reads; else nil
	ic      Interceptor
	icaps   Capabilities             // ic's
	lic     LexedInterceptor         // ic, when it reads the relay's lex; else nil
	luc     LexedUpstreamInterceptor // ic, when it reads the upstream's lex; else nil
	clock   bool                     // ic reads the times it is given (see Passive)
	key     string                   // the argument ic removes from a tools/call (KeyedInterceptor)
	sic     StreamingInterceptor     // ic, when it takes a long call reduced; else nil
	// resultsQueued counts the bytes of long answers waiting to be reduced for
	// interception (resultDigest), all of them together.
	resultsQueued atomic.Int64
	// cuts are the host calls cut at the cap on their way to the server whose parse
	// error has not come: it is not the host's (hoststream.go).
	cuts cutLines
	log  *slog.Logger

	idPrefix string
	ids      *upstream.OwnIDs
	// ownPending counts the proxy's own requests whose answer has not come, waited
	// for or abandoned (len(waiters), readable without the lock).
	ownPending atomic.Int64
	mu         sync.Mutex
	waiters    map[string]*waiter // by the own id, decoded
	// ended is set, under mu, once the upstream's read side has ended for good: a
	// Call from then on fails at once rather than wait for an answer that cannot come
	// (x/tools' jsonrpc2_v2 refuses at registration the same way).
	ended error

	// sendMu is held while a message is intercepted and written to the upstream, by
	// the host pump and by Call. It orders those writes against the upstream pump's
	// handling of a replaced server (every request registered before it was written
	// to the old server, or failed and was answered), and against the end of Run
	// (after which the host pump touches nothing).
	sendMu  sync.Mutex
	stopped bool // under sendMu: Run has returned or is returning
	// answering counts the host messages whose answers made by the proxy are still
	// being written, outside sendMu (forward): the end of Run lets them finish, for
	// at most pumpGrace, so an answer is not cut off by the exit.
	answering sync.WaitGroup
	// lx is the host message being forwarded, lexed once (under sendMu) for every
	// reader of it on the host's path; reused, so it pins nothing and costs nothing.
	lx jsonlex.Line
	// upLx is the same for the upstream pump's message.
	upLx jsonlex.Line
	// streamErr is the host's side failing under a streamed message (stream.go):
	// the upstream pump's alone, like upLx.
	streamErr error

	// hostReqs are the host's requests the upstream has not answered; serverReqs the
	// upstream's requests the host has not answered.
	hostReqs, serverReqs *pending
	stale                stale
	staleCount           atomic.Int64 // ids in stale; 0 almost always, then nothing is looked up

	gc collector
	// endedWhy, under sendMu, is the reason a server that ended before serving the
	// session gave (upstream.EndedError): while it is set, each host request is
	// answered with it and goes nowhere. endedAnswer says one was.
	endedWhy    string
	endedAnswer chan struct{}
	// abandoned is set when Run returned without the upstream pump, stuck in a write
	// to the host: once that write returns, the pump stops at once.
	abandoned atomic.Bool

	hostDone chan struct{} // closed when the host pump has returned
	hostErr  error

	hooks *Hooks // Options.Hooks
	// answered are Hooks.FromHost's answers to the host message being forwarded,
	// written by forward once sendMu is let go: the host pump's only.
	answered [][]byte
}

// waiter is one of the proxy's own requests awaiting its answer. ch is nil once its
// caller gave up: the answer, if it comes, is still the proxy's, never the host's.
type waiter struct {
	ch chan callResult
}

type callResult struct {
	msg []byte
	err error
}

// ErrUpstreamLost is returned by Call when the server went away before answering.
var ErrUpstreamLost = errors.New("the upstream server went away before answering")

// New returns a Relay; Run starts it.
func New(o Options) *Relay {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	ids := o.IDs
	if ids == nil {
		ids = upstream.NewOwnIDs(o.IDPrefix)
	}
	prefix := ids.Prefix()
	caps := o.Upstream.Capabilities()
	var icaps Capabilities
	if o.Intercept != nil {
		icaps = o.Intercept.Capabilities()
	}
	passive := o.Intercept == nil || icaps.Passive
	slab := passive || icaps.KeepsBriefly
	opts := []framing.Option{framing.WithMaxMessage(o.MaxMessage)}
	if passive && caps.CopiesWrites {
		// Nobody keeps a host message once it is forwarded, and the upstream copies
		// what it is written: a message may be lent, read in place and never copied
		// into a message of its own (the host pump reads the next only once the
		// upstream has it).
		opts = append(opts, framing.WithLending())
	} else if slab {
		// Nobody keeps a host message once it is forwarded: a block of them may be
		// one allocation (what one message holds alive is its block).
		opts = append(opts, framing.WithSlab())
	}
	r := &Relay{
		hostIn:      framing.NewReader(o.HostIn, opts...),
		hostSrc:     o.HostIn,
		hostOut:     framing.NewWriter(o.HostOut),
		up:          o.Upstream,
		caps:        caps,
		batch:       caps.Batcher,
		lw:          caps.LexedWriter,
		lr:          caps.LexedReader,
		ic:          o.Intercept,
		icaps:       icaps,
		lic:         icaps.Lexed,
		luc:         icaps.LexedUpstream,
		clock:       !passive,
		log:         log,
		idPrefix:    prefix,
		ids:         ids,
		waiters:     make(map[string]*waiter),
		hostReqs:    newPending(),
		serverReqs:  newPending(),
		hostDone:    make(chan struct{}),
		endedAnswer: make(chan struct{}, 1),
		hooks:       o.Hooks,
	}
	if o.Hooks != nil && o.Hooks.Attach != nil {
		o.Hooks.Attach(&Port{r})
	}
	t, ht := o.StreamThreshold, o.StreamThreshold
	if t == 0 {
		t, ht = DefaultStreamThreshold, DefaultHostStreamThreshold
	}
	if st := caps.Streamer; st != nil && t > 0 {
		st.SetStream(t, r)
	}
	// A long host call goes to the server as it arrives (hoststream.go) when the
	// relay can make interception's edit itself.
	if caps.LineWriter != nil && ht > 0 && (o.Intercept == nil || icaps.Keyed != nil) {
		if icaps.Keyed != nil {
			r.key = icaps.Keyed.CorrelationKey()
			r.sic = icaps.Streaming
		}
		r.hostIn.SetStream(ht, r.startHostLine)
	}
	return r
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
//   - the upstream went away first (for good, not replaced): every message it sent is
//     delivered and Run returns ErrUpstreamEnded;
//   - ctx is done: the upstream is closed and Run returns ctx.Err().
//
// When Run returns, neither pump will touch the upstream or the interceptor again, so
// the caller may close both. The host pump itself has returned too, unless it is
// blocked in a read of a host input that cannot be interrupted (a blocking file): what
// that read brings is then discarded.
func (r *Relay) Run(ctx context.Context) error {
	upDone := make(chan error, 1)
	go func() { upDone <- r.upstreamPump() }()
	go r.hostPump()
	defer r.stop()

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
		err := r.waitPump(upDone)
		if r.hostErr != nil {
			return r.hostErr
		}
		return err
	case <-ctx.Done():
		r.up.Close()
		r.waitPump(upDone)
		return ctx.Err()
	}
}

// pumpGrace bounds how long Run waits for the upstream pump once the upstream is
// closed (the server has ended): what it sent last goes to the host in that time,
// unless the host is not reading. Long enough for a host that reads to take the
// largest message; short enough that a stop stays within --stop-grace, the
// SIGTERM→SIGKILL step and a second (docs/processes.md).
const pumpGrace = time.Second

// waitPump waits for the upstream pump to end after the upstream was closed. A pump
// still running after pumpGrace is stuck writing to a host that does not read (the
// upstream is closed, so it is not reading from it): Run returns without it, or the
// proxy would never exit. The pump touches nothing after its write (abandoned).
func (r *Relay) waitPump(upDone <-chan error) error {
	t := time.NewTimer(pumpGrace)
	defer t.Stop()
	select {
	case err := <-upDone:
		return err
	case <-t.C:
		r.abandoned.Store(true)
		r.log.Warn("the host is not reading what the server sent; ending the session without it")
		return errHostNotReading
	}
}

// errHostNotReading is how a session ends whose host stopped reading.
var errHostNotReading = errors.New("the host stopped reading its input (the proxy's stdout)")

// stop ends the host pump's part in the session and joins it where its read can be
// interrupted.
func (r *Relay) stop() {
	r.sendMu.Lock()
	r.stopped = true
	r.sendMu.Unlock()
	// No forward starts now; one under way writes its answers to the host (a request
	// that met the dead server: "could not deliver…") before the session ends,
	// unless the host has stopped reading.
	written := make(chan struct{})
	go func() { r.answering.Wait(); close(written) }()
	t := time.NewTimer(pumpGrace)
	select {
	case <-written:
	case <-t.C:
	}
	t.Stop()
	if d, ok := r.hostSrc.(interface{ SetReadDeadline(time.Time) error }); ok && d.SetReadDeadline(time.Now()) == nil {
		<-r.hostDone
	}
}

func (r *Relay) hostPump() {
	defer close(r.hostDone)
	for {
		msg, err := r.hostIn.Read()
		if err != nil {
			if errors.Is(err, framing.ErrStreamed) {
				continue // a long call went to the server as it arrived (hoststream.go)
			}
			var tooLong *framing.TooLongError
			if errors.As(err, &tooLong) {
				r.log.Warn("dropped a message from the host: over the size cap", "bytes", tooLong.Size, "cap", tooLong.Max)
				r.refuseTooLong(tooLong, time.Now())
				continue
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
				r.hostErr = fmt.Errorf("reading from the host: %w", err)
			}
			return
		}
		readAt := r.now()
		// msg is not used after forward: interception may replace it (a copy with the
		// key spliced out), and a 64 MB original kept alive here would be a third
		// copy of the message in memory.
		n := len(msg)
		if !r.forward(msg, readAt) {
			return
		}
		if n >= collectAfter {
			r.gc.collect()
		}
	}
}

// now is the time for interception to be given: the zero time when it reads none.
func (r *Relay) now() time.Time {
	if !r.clock {
		return time.Time{}
	}
	return time.Now()
}

// forward sends one host message upstream; it returns false once Run has ended.
func (r *Relay) forward(msg []byte, readAt time.Time) bool {
	ok, ended := r.forwardLocked(msg, readAt)
	if ok {
		defer r.answering.Done() // taken by forwardLocked
	}
	// The policy's answers to what it took out of the message (Hooks.FromHost).
	for i, a := range r.answered {
		if err := r.hostOut.Write(a); err != nil {
			r.log.Debug("could not answer the host", "err", err)
		} else if r.ic != nil {
			r.ic.FromUpstream(a, time.Now())
		}
		r.answered[i] = nil
	}
	r.answered = nil
	if ended != nil {
		// Written outside sendMu: a host that is slow to read must not hold the lock
		// the end of Run takes (nor the proxy's own requests, which take it too).
		r.answerInstead(ended.ids, ended.reason)
	}
	return ok
}

// endedRequests are host requests to be answered with the reason a server that
// ended before serving the session gave.
type endedRequests struct {
	ids    [][]byte
	reason string
}

// forwardLocked is forward under sendMu, but for the answers to requests after an
// upstream.EndedError, which it returns.
func (r *Relay) forwardLocked(msg []byte, readAt time.Time) (bool, *endedRequests) {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if r.stopped {
		return false, nil
	}
	// What forward then writes to the host outside the lock (an answer the proxy
	// makes for this message) is waited for by the end of Run (stop), bounded.
	r.answering.Add(1)
	// One lex of the message for everyone on this path: interception, the registry,
	// the upstream. An interceptor that cannot read it edits first, and what it
	// returns is lexed.
	if r.lic != nil {
		r.lx.Lex(msg)
		msg = r.lic.FromHostLexed(msg, &r.lx, readAt)
	} else {
		if r.ic != nil {
			msg = r.ic.FromHost(msg, readAt)
		}
		r.lx.Lex(msg)
	}
	if h := r.hooks; h != nil && h.FromHost != nil {
		if msg, r.answered = h.FromHost(msg, &r.lx); msg == nil {
			// Nothing goes for this message (a refused call): interception is told it
			// went. A message held for it (Hold, when it was already buffered) must go
			// now, or it waits for a write that may never come, and the host for its
			// answer (a visible call written in one go with a refused one).
			if r.ic != nil {
				r.ic.Forwarded(time.Now())
			}
			if r.batch != nil {
				if err := r.batch.Flush(); err != nil {
					r.log.Debug("could not forward a held host message", "err", err)
				}
			}
			return true, nil
		}
	}
	if r.endedWhy != "" {
		// The server ended before serving the session: the host is told why, request
		// by request (upstream.EndedError).
		if r.ic != nil {
			r.ic.Forwarded(time.Now())
		}
		e := &endedRequests{reason: r.endedWhy}
		jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) {
			if f.IsRequest() {
				e.ids = append(e.ids, f.ID)
			}
		})
		return true, e
	}
	if r.staleCount.Load() > 0 && r.belongsToOldServer(msg) {
		if r.ic != nil {
			r.ic.Forwarded(time.Now())
		}
		return true, nil
	}
	r.noteHost(msg, &r.lx)
	// The send time is taken as the write starts: an answer can be read before a
	// large write returns, and a call must not end before it started.
	sentAt := r.now()
	// Under load, messages leave together: a message is held only when the next one
	// is already buffered, so the next Read cannot wait and a Write follows; a lone
	// message always goes out at once.
	var werr error
	hold := r.batch != nil && r.hostIn.Buffered()
	switch {
	case r.lw != nil:
		werr = r.lw.WriteLexed(msg, &r.lx, hold)
	case hold:
		werr = r.batch.Hold(msg)
	default:
		werr = r.up.Write(msg)
	}
	if r.ic != nil {
		r.ic.Forwarded(sentAt)
	}
	if werr != nil {
		// The upstream could not take it (the server is gone, or being replaced): a
		// request that reached no server is answered here, or the host would wait
		// for it forever.
		r.log.Debug("could not forward a host message", "err", werr)
		return true, &endedRequests{ids: r.undeliveredIDs(msg), reason: "could not deliver the request to the server: " + werr.Error()}
	}
	return true, nil
}

// refuseTooLong answers for a host message dropped for its size, which would otherwise
// leave someone waiting forever: a request gets an error answer (and a tools/call a
// report saying what happened); an answer to the server's request is replaced, for the
// server, by an error answer.
func (r *Relay) refuseTooLong(e *framing.TooLongError, at time.Time) {
	r.refuseTooLongSent(e, at, "it was not sent to the server")
}

// refuseTooLongSent is refuseTooLong, saying what reached the server as sent (a long
// call streamed to it reached it cut off: hoststream.go).
func (r *Relay) refuseTooLongSent(e *framing.TooLongError, at time.Time, sent string) {
	if e.ID == nil {
		return // a notification: nobody waits for it
	}
	if e.Method == nil {
		r.serverReqs.remove(e.ID)
		msg := ErrorResponse(e.ID, -32603, fmt.Sprintf("bir-proxy: the host's answer was %s, over the proxy's --max-message cap of %d bytes, and was dropped", e.Sized(), e.Max))
		if err := r.send(msg, Own{}); err != nil {
			r.log.Debug("could not tell the server its request's answer was dropped", "err", err)
		}
		return
	}
	answer := ErrorResponse(e.ID, -32600, fmt.Sprintf("bir-proxy: the request was %s, over the proxy's --max-message cap of %d bytes; %s", e.Sized(), e.Max, sent))
	report := r.ic != nil && jsonlex.KeyIs(e.Method, "tools/call")
	if report {
		// Interception never saw the call; it is reported as what it was, a call
		// refused for its size, with arguments that say so (their fingerprint cannot
		// match anything the host computed, and must not pretend to).
		// Held throughout: after Run, interception is not touched again.
		r.sendMu.Lock()
		defer r.sendMu.Unlock()
		if r.stopped {
			return
		}
		r.ic.FromHost(request(e.ID, "tools/call", []byte(`{"name":"","arguments":"[bir-proxy: not recorded: `+strconv.FormatInt(e.Size, 10)+`-byte request over the size cap]"}`)), at)
		r.ic.Forwarded(at)
	}
	if err := r.hostOut.Write(answer); err != nil {
		r.log.Debug("could not answer the host", "err", err)
	}
	if report {
		r.ic.FromUpstream(answer, time.Now())
	}
}

// noteHost registers the host's requests in msg, which lx describes, as in flight, and
// retires the upstream's requests it answers.
func (r *Relay) noteHost(msg []byte, lx *jsonlex.Line) {
	for i, objs := 0, lx.RPC(); i < len(objs); i++ {
		// Read from the spans: Fields' five slices per message are built only for
		// a notification.
		o := &objs[i]
		switch hasID, hasMethod := o.ID.End != 0, o.Method.End != 0; {
		case hasID && hasMethod: // a request
			r.hostReqs.add(msg[o.ID.Start:o.ID.End])
			continue
		case hasID: // a response
			r.serverReqs.remove(msg[o.ID.Start:o.ID.End])
			continue
		case !hasMethod:
			continue
		}
		if f := o.Fields(msg); jsonlex.KeyIs(f.Method, "notifications/cancelled") {
			// A cancelled request may never be answered (the server SHOULD NOT); it is
			// no longer the host's to wait for.
			if id := jsonlex.Get(f.Params, "requestId"); id != nil {
				r.hostReqs.remove(id)
			}
		}
	}
}

// answerUndelivered answers each request in msg, which reached no server, with an
// error carrying its id.
func (r *Relay) answerUndelivered(msg []byte, reason string) {
	r.answerInstead(r.undeliveredIDs(msg), reason)
}

// undeliveredIDs takes the requests in msg, which reached no server, out of those in
// flight, and returns their ids (copied: msg may be reused once the lock is let go).
func (r *Relay) undeliveredIDs(msg []byte) [][]byte {
	var ids [][]byte
	jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) {
		if f.IsRequest() {
			r.hostReqs.remove(f.ID)
			ids = append(ids, bytes.Clone(f.ID))
		}
	})
	return ids
}

// unanswered settles requests the upstream says will never be answered, though its
// server stays (upstream.UnansweredError): a host request still in flight gets an
// error answer with the reason (and interception sees it as the server's answer); an
// own request's caller gets the error. An id in neither was answered or cancelled
// already.
func (r *Relay) unanswered(ue *upstream.UnansweredError) {
	var host [][]byte
	for _, id := range ue.IDs {
		if r.retireOwnID(id, ue.Reason) {
			continue
		}
		if r.hostReqs.take(id) {
			host = append(host, id)
		}
	}
	r.answerInstead(host, ue.Reason)
}

// belongsToOldServer reports whether msg, a single message from the host, is meant
// for a server that was replaced: an answer to one of its requests, or a cancel of a
// request the relay already answered. Such a message is dropped.
func (r *Relay) belongsToOldServer(msg []byte) bool {
	f, ok := jsonlex.TopFields(msg)
	if !ok {
		return false
	}
	r.stale.mu.Lock()
	defer r.stale.mu.Unlock()
	drop := false
	switch {
	case f.IsResponse():
		drop = r.stale.take(r.stale.server, f.ID)
	case f.Method != nil && jsonlex.KeyIs(f.Method, "notifications/cancelled"):
		if id := jsonlex.Get(f.Params, "requestId"); id != nil {
			drop = r.stale.take(r.stale.host, id)
		}
	}
	if drop {
		r.staleCount.Add(-1)
		r.log.Debug("dropped a host message meant for the server that was replaced")
	}
	return drop
}

func (r *Relay) upstreamPump() error {
	for {
		var msg []byte
		var err error
		lexed := r.lr != nil
		if lexed {
			msg, err = r.lr.ReadLexed(&r.upLx)
		} else {
			msg, err = r.up.Read()
		}
		if err != nil {
			if re, ok := upstream.IsReplaced(err); ok {
				r.replaced(re)
				continue
			}
			if ee, ok := upstream.IsEnded(err); ok {
				r.endedBeforeServing(ee)
				return nil
			}
			if ue, ok := upstream.IsUnanswered(err); ok {
				r.unanswered(ue)
				continue
			}
			if ue, ok := upstream.IsUndelivered(err); ok {
				// Messages the upstream held for a server that did not come back in
				// time: answered as a write that failed would have been.
				for _, m := range ue.Msgs {
					r.answerUndelivered(m, "could not deliver the request to the server: "+ue.Reason)
				}
				continue
			}
			r.mu.Lock()
			r.ended = fmt.Errorf("%w: %v", ErrUpstreamLost, err)
			r.mu.Unlock()
			r.retireOwn(ErrUpstreamLost)
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading from the upstream: %w", err)
		}
		if r.streamErr != nil {
			// A streamed message could not be written: the host is gone.
			return fmt.Errorf("writing to the host: %w", r.streamErr)
		}
		readAt := r.now()
		if r.noteUpstream(msg, lexed, readAt) {
			if err := r.hostOut.Flush(); err != nil {
				return fmt.Errorf("writing to the host: %w", err)
			}
			continue
		}
		toHost := msg
		if h := r.hooks; h != nil && h.FromUpstream != nil {
			var replaced bool
			if toHost, replaced = h.FromUpstream(msg, &r.upLx); toHost == nil {
				// Dropped: what this pump held for the host (it holds a message when
				// the next is already read) is written out, as the next message, this
				// one, will not. A failed write fails the pump's next one too, which
				// says so.
				if err := r.hostOut.Flush(); err != nil {
					r.log.Debug("could not write to the host", "err", err)
				}
				continue
			}
			if !replaced {
				msg = toHost
			} // else (the result budget) interception is given the answer as the
			// server sent it, which r.upLx describes.
		}
		// Interception is handed the answer before the host can have it: the host's
		// next request may build on it (a tools/call retry carrying the requestState
		// this answer gave), and bookkeeping must see the answer first. Handed after
		// the write, the retry's event was queued before the answer's now and then
		// under load, and the two rounds were reported as two calls
		// (TestMultiRoundCallIsOneReport). A push appends under a lock; only with
		// bookkeeping a queue's budget behind does it read the message once more, to
		// keep what a report needs of it. (A long answer streamed to the host is
		// still handed over after it went: stream.go.)
		// noteUpstream lexed msg into upLx if the upstream did not (an HTTP one).
		r.intercepted(msg, true, readAt)
		write := r.hostOut.Write
		if r.batch != nil && r.batch.Buffered() {
			write = r.hostOut.Hold // as in hostPump
		}
		if err := write(toHost); err != nil {
			return fmt.Errorf("writing to the host: %w", err)
		}
		if r.abandoned.Load() {
			return errHostNotReading // Run has returned: the interceptor may be closed
		}
		if len(msg) >= collectAfter {
			r.gc.collect()
		}
	}
}

// noteUpstream reads msg once: it retires the host requests msg answers, registers
// the server's requests, and hands an answer to one of the proxy's own requests to its
// caller, returning true (the host never sees it). The proxy never batches its own
// requests, so only a message that is one object can answer one. lexed says r.upLx
// already describes msg (LexedReader).
func (r *Relay) noteUpstream(msg []byte, lexed bool, readAt time.Time) (own bool) {
	// One object, not a batch, by its first token: a line may be led by blanks.
	start := jsonlex.SkipSpace(msg, 0)
	single := start < len(msg) && msg[start] == '{'
	if !lexed {
		r.upLx.Lex(msg)
	}
	for i, objs := 0, r.upLx.RPC(); i < len(objs); i++ {
		o := &objs[i] // read from the spans, as noteHost
		if o.ID.End == 0 {
			continue // a notification: neither answers nor asks
		}
		id := msg[o.ID.Start:o.ID.End]
		if o.Method.End == 0 { // a response
			if single && (r.deliverOwn(o.Bytes(msg), id, readAt) || r.cuts.swallow(id, o.Error.End != 0, r.log)) {
				own = true
				continue
			}
			r.hostReqs.remove(id)
		} else {
			r.serverReqs.add(id)
		}
	}
	return own
}

// deliverOwn hands an answer with id to the proxy's own request it answers; it
// reports whether the answer was the proxy's.
func (r *Relay) deliverOwn(msg, id []byte, readAt time.Time) bool {
	// Most ids are numbers, or strings of the host's: both fail here without an
	// allocation.
	if len(id) < 2 || id[0] != '"' {
		return false
	}
	var s string
	if body := id[1 : len(id)-1]; bytes.IndexByte(body, '\\') < 0 {
		if len(body) <= len(r.idPrefix) || string(body[:len(r.idPrefix)]) != r.idPrefix {
			return false
		}
		s = string(body)
	} else {
		var ok bool
		if s, ok = jsonlex.DecodeString(id); !ok || len(s) <= len(r.idPrefix) || s[:len(r.idPrefix)] != r.idPrefix {
			return false
		}
	}
	r.mu.Lock()
	w, ok := r.waiters[s]
	if ok {
		delete(r.waiters, s)
		r.ownPending.Add(-1)
	}
	r.mu.Unlock()
	if !ok {
		// An id of our namespace that no own request waits for: a host request of
		// that id (no host would choose one, but nothing forbids it) gets its answer.
		// Otherwise it is still not the host's: a late answer to a request given up on
		// (retired with its server, or by its caller, or by the re-handshake that
		// sent it) is expected; one to an id never given out is a bug, or a server
		// making ids up, and is said.
		if r.hostReqs.hasKey(jsonlex.IDKey(id)) {
			return false
		}
		if r.ids.Issued(s) {
			r.log.Debug("dropped a late answer to a request of the proxy's own that was given up on", "id", s)
		} else {
			r.log.Warn("dropped an answer in the proxy's own id namespace to no request it sent", "id", clipped(s, 64))
		}
		return true
	}
	if w.ch != nil {
		// A copy: the upstream may lend its messages only until its next Read
		// (upstream.Command.Slab), and the caller keeps this one.
		w.ch <- callResult{msg: bytes.Clone(msg)} // buffered: never blocks the pump
	}
	if r.ic != nil {
		r.ic.ToProxy(msg, readAt)
	}
	return true
}

// replaced settles what the server that went away leaves behind, before the session
// goes on with the one that replaced it (see upstream.ReplacedError): the host's
// requests it owed an answer get an error each, the proxy's own are retired, its
// requests to the host become stale, and interception ends its calls.
func (r *Relay) replaced(re *upstream.ReplacedError) {
	r.sendMu.Lock()
	lost := r.hostReqs.drain()
	// The requests the upstream still holds never reached the server that went away:
	// they are the next server's to answer, not losses (upstream.Holder).
	var spared [][]byte
	if h := r.caps.Holder; h != nil {
		lost, spared = r.spare(lost, h.Held())
	}
	orphans := r.serverReqs.drain()
	r.retireOwn(fmt.Errorf("%w: %s", ErrUpstreamLost, re.Reason))
	if r.ic != nil {
		if sp := r.icaps.Sparing; sp != nil && len(spared) > 0 {
			sp.UpstreamLostSparing(time.Now(), spared)
		} else {
			r.ic.UpstreamLost(time.Now())
		}
	}
	r.stale.addHost(lost)
	r.stale.addServer(orphans)
	r.staleCount.Store(int64(r.stale.len()))
	// The parse errors awaited for calls cut at the cap were the old server's to
	// send (a cut is noted under sendMu, as this is): the next server's error of id
	// null is the host's.
	r.cuts.pending.Store(0)
	// Under sendMu, so no write slips in between: every request the old server owed is
	// registered above and answered below; what the host sends from here on is the
	// new server's, even before this pump reads again.
	if s := r.caps.Settler; s != nil {
		s.Settled()
	}
	r.sendMu.Unlock()
	// Debug: the upstream that replaced its server says so itself, in one line.
	r.log.Debug("the server was replaced; the session goes on", "reason", re.Reason, "answered", len(lost))
	// Written after the lock: a host that is slow to read must not hold up its own
	// requests' way to the new server.
	r.answerHost(lost, re.Reason)
}

// spare splits lost, the host requests in flight when a server went away, into those
// the server may have received and those in held, messages that reached no server:
// the latter are registered in flight again, for the next server to answer.
func (r *Relay) spare(lost, held [][]byte) (still, spared [][]byte) {
	if len(held) == 0 {
		return lost, nil
	}
	keys := make(map[string]bool)
	for _, m := range held {
		jsonlex.EachRPC(m, func(_ []byte, f jsonlex.Fields) {
			if f.IsRequest() {
				keys[jsonlex.IDKey(f.ID)] = true
			}
		})
	}
	still = lost[:0]
	for _, id := range lost {
		if keys[jsonlex.IDKey(id)] {
			r.hostReqs.add(id)
			spared = append(spared, id)
		} else {
			still = append(still, id)
		}
	}
	return still, spared
}

// Windows in which the host's requests are answered after a server ended before
// serving the session. A host writes initialize the moment it has started the proxy,
// so the first request comes within milliseconds; after an answer, a short settle
// catches a request written alongside (a batch, a ping) before the session ends.
const (
	endedWindow = 2 * time.Second
	endedSettle = 100 * time.Millisecond
)

// endedBeforeServing settles a server that ended before it served the session
// (upstream.EndedError): every request in flight is answered with the reason, and so
// is each one the host sends until endedWindow has passed with none, or endedSettle
// after the last answer. Then the session ends, as for a server that went away.
func (r *Relay) endedBeforeServing(ee *upstream.EndedError) {
	r.mu.Lock()
	r.ended = fmt.Errorf("%w: %s", ErrUpstreamLost, ee.Reason)
	r.mu.Unlock()
	r.retireOwn(ErrUpstreamLost)
	select {
	case <-r.endedAnswer: // an answer of before: not one of these
	default:
	}
	r.sendMu.Lock()
	r.endedWhy = ee.Reason
	lost := r.hostReqs.drain()
	r.sendMu.Unlock()
	r.answerInstead(lost, ee.Reason)
	wait := endedWindow
	if len(lost) > 0 {
		wait = endedSettle
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-r.endedAnswer:
			t.Reset(endedSettle)
		case <-t.C:
			return
		case <-r.hostDone:
			return
		}
	}
}

// answerInstead answers the host's requests ids, which no server will, with reason;
// interception records each as answered so (an rpc_error with the cause), at once
// rather than as lost when the session ends. The host pump and the upstream pump may
// both call it.
func (r *Relay) answerInstead(ids [][]byte, reason string) {
	for _, id := range ids {
		answer := ErrorResponse(id, ServerErrorCode, reason)
		if err := r.hostOut.Write(answer); err != nil {
			r.log.Debug("could not answer the host", "err", err)
			return
		}
		if r.ic != nil {
			r.ic.FromUpstream(answer, time.Now())
		}
	}
	if len(ids) > 0 {
		select {
		case r.endedAnswer <- struct{}{}:
		default:
		}
	}
}

// answerHost sends the host a JSON-RPC error for each request id.
func (r *Relay) answerHost(ids [][]byte, reason string) {
	for _, id := range ids {
		if err := r.hostOut.Write(ErrorResponse(id, ServerErrorCode, reason)); err != nil {
			r.log.Debug("could not answer the host", "err", err)
			return
		}
	}
}

// ServerErrorCode is the JSON-RPC error code of answers the proxy makes itself for a
// server that could not answer: in the range JSON-RPC leaves to implementations, and
// the one MCP SDKs use for a closed connection.
const ServerErrorCode = -32000

// ErrorResponse is a JSON-RPC error answer to the request with the raw id.
func ErrorResponse(id []byte, code int, message string) []byte {
	return jsonlex.ErrorResponse(id, code, message)
}

// clipped is s cut to at most n bytes, for a log line: an id from the server can be
// as long as a message.
func clipped(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// retireOwnID answers the proxy's own request with id, if one waits for it, with an
// error answer saying reason, as if the server had sent it (the caller and
// interception see what a server's error would show); it reports whether one waited.
func (r *Relay) retireOwnID(id []byte, reason string) bool {
	s, ok := jsonlex.DecodeString(id)
	if !ok || !strings.HasPrefix(s, r.idPrefix) {
		return false
	}
	r.mu.Lock()
	_, ok = r.waiters[s]
	r.mu.Unlock()
	if !ok {
		return false
	}
	return r.deliverOwn(ErrorResponse(id, ServerErrorCode, reason), id, r.now())
}

// retireOwn ends every own request still waiting, with err.
func (r *Relay) retireOwn(err error) {
	if r.ownPending.Load() == 0 {
		return
	}
	r.mu.Lock()
	ws := r.waiters
	r.waiters = make(map[string]*waiter)
	r.ownPending.Store(0)
	r.mu.Unlock()
	for _, w := range ws {
		if w.ch != nil {
			w.ch <- callResult{err: err}
		}
	}
}

// Request is a request of the proxy's own.
type Request struct {
	Method string
	Params []byte // the raw JSON of the params member; nil for none
	// Origin names who asked: a replay dispatch's id, which interception puts in the
	// step report of a tools/call; "" for the proxy's own housekeeping.
	Origin string
	// Sent, when set, is called once the request has been handed to the upstream,
	// before its answer is awaited (not at all when it could not be sent): a caller
	// with several requests to make in order starts the next one then.
	Sent func()
}

// Call sends a request of the proxy's own to the upstream and returns the raw
// response. It passes interception like a host request, with its origin. It returns
// an error wrapping ErrUpstreamLost the moment the server goes away. When ctx ends
// first, the upstream is told with notifications/cancelled (interception hears it as
// a timeout when ctx's deadline passed, else as a cancel), the error wraps ctx.Err()
// and its cause, and the answer, if it ever comes, is dropped: the id stays
// registered (with no one waiting) until then, so the upstream pump keeps looking
// for it and it cannot reach the host.
func (r *Relay) Call(ctx context.Context, req Request) ([]byte, error) {
	id := r.ownID()
	idJSON := jsonlex.AppendString(nil, id)
	msg := request(idJSON, req.Method, req.Params)
	if !oneLineObject(msg) {
		// Params with a raw line break (or not JSON at all) would reach a stdio
		// server as several lines, each a message of its own that the host never
		// sent: refused before anything is registered or written.
		return nil, fmt.Errorf("sending %s to the upstream: %w", req.Method, ErrMalformed)
	}
	if h := r.hooks; h != nil && h.FromProxy != nil {
		if answer := h.FromProxy(msg); answer != nil {
			// Answered in the server's place (a hidden tool), as the host's calls of
			// it are: interception sees the request and its answer.
			r.sendMu.Lock()
			stopped := r.stopped
			if !stopped && r.ic != nil {
				r.ic.FromProxy(msg, Own{Origin: req.Origin}, time.Now())
			}
			r.sendMu.Unlock()
			if !stopped && r.ic != nil {
				r.ic.ToProxy(answer, time.Now())
			}
			if req.Sent != nil {
				req.Sent()
			}
			return answer, nil
		}
	}
	w := &waiter{ch: make(chan callResult, 1)}
	r.mu.Lock()
	if r.ended != nil {
		err := r.ended
		r.mu.Unlock()
		return nil, fmt.Errorf("sending %s to the upstream: %w", req.Method, err)
	}
	r.waiters[id] = w
	r.ownPending.Add(1)
	r.mu.Unlock()

	if err := r.send(msg, Own{Origin: req.Origin}); err != nil {
		r.forget(id) // never sent: no answer can come
		return nil, fmt.Errorf("sending %s to the upstream: %w", req.Method, err)
	}
	if req.Sent != nil {
		req.Sent()
	}
	select {
	case res := <-w.ch:
		return res.msg, res.err
	case <-ctx.Done():
		r.mu.Lock()
		if cur, ok := r.waiters[id]; ok && cur == w {
			r.waiters[id] = &waiter{} // abandoned, still routed to us
		}
		r.mu.Unlock()
		// A deadline is a timeout, not a cancel: the report must tell the two apart
		// (the recorder's timeoutMs ran out, or it cancelled the dispatch itself).
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
		reason := `"cancelled by bir-proxy"`
		if timedOut {
			reason = `"timed out (bir-proxy)"`
		}
		cancel := request(nil, "notifications/cancelled", []byte(`{"requestId":`+string(idJSON)+`,"reason":`+reason+`}`))
		if err := r.send(cancel, Own{Origin: req.Origin, TimedOut: timedOut}); err != nil {
			r.log.Debug("could not cancel an own request", "id", id, "err", err)
		}
		if cause := context.Cause(ctx); cause != ctx.Err() {
			// The caller said why it gave up (a recorder's cancel, the proxy exiting):
			// its error keeps that, and still matches ctx.Err().
			return nil, fmt.Errorf("waiting for the answer to %s: %w: %w", req.Method, ctx.Err(), cause)
		}
		return nil, fmt.Errorf("waiting for the answer to %s: %w", req.Method, ctx.Err())
	}
}

// ErrMalformed is Call's error for a request that is not exactly one JSON object on
// one line; nothing was sent.
var ErrMalformed = errors.New("the request is not one single-line JSON object")

// oneLineObject reports whether msg is exactly one JSON object with no raw line
// break anywhere: valid JSON has none inside a string, so one outside would be
// whitespace that the NDJSON framing would take for the end of the message.
func oneLineObject(msg []byte) bool {
	return len(msg) > 0 && msg[0] == '{' && bytes.IndexByte(msg, '\n') < 0 && bytes.IndexByte(msg, '\r') < 0 && jsonlex.Valid(msg)
}

// ownID is the next id of the proxy's namespace that no host request in flight uses
// (a host may send any string, "bir:" ones included).
func (r *Relay) ownID() string {
	for {
		id := r.ids.Next()
		if !r.hostReqs.hasKey(`"` + id) { // the IDKey of the string id

			return id
		}
	}
}

// send writes a message of the proxy's own to the upstream, through interception.
func (r *Relay) send(msg []byte, own Own) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if r.ic != nil {
		msg = r.ic.FromProxy(msg, own, time.Now())
	}
	return r.up.Write(msg)
}

// Notify sends a notification of the proxy's own to the upstream.
func (r *Relay) Notify(method string, params []byte) error {
	if err := r.send(request(nil, method, params), Own{}); err != nil {
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

// request builds a JSON-RPC request (a notification when idJSON is nil).
func request(idJSON []byte, method string, params []byte) []byte {
	b := make([]byte, 0, 64+len(method)+len(params))
	b = append(b, `{"jsonrpc":"2.0"`...)
	if idJSON != nil {
		b = append(b, `,"id":`...)
		b = append(b, idJSON...)
	}
	b = append(b, `,"method":`...)
	b = jsonlex.AppendString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// collector asks for garbage collections after large messages (collectAfter), one
// at a time.
type collector struct{ running atomic.Bool }

// collect starts a garbage collection unless one started by collect is still running.
// It runs beside the pumps: a pump that waited for it would hold the next message (and,
// after a held write, the newline ending this one) for a whole GC cycle.
func (c *collector) collect() {
	if c.running.CompareAndSwap(false, true) {
		go func() {
			runtime.GC()
			c.running.Store(false)
		}()
	}
}

// HostDone is closed once the host's side of the session has ended: the host closed
// its input, or the session is stopping. Run is then on its way out; a caller with
// work of its own on the upstream can wind it down while the server is stopped.
func (r *Relay) HostDone() <-chan struct{} { return r.hostDone }
