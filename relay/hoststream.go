package relay

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/upstream"
)

// KeyedInterceptor is an Interceptor that names the argument its FromHost removes
// from each tools/call: the relay then removes it itself from a long call it
// streams to the server (hoststream.go), as the call arrives. The relay streams no
// host message through an interceptor that does not say.
type KeyedInterceptor interface {
	CorrelationKey() string
}

// startHostLine takes a long host line to the server as it arrives, when its head
// says it is a tools/call (jsonlex.Peek: its method), which is what a host sends
// that is long: a file's contents, an image. Its id need not be known yet: the
// TypeScript SDK writes it last, after the params, and the server cannot answer
// before the newline, so the request is registered in flight by the time the
// newline is written. Anything else — another method,
// an answer to the server, a batch — is read whole as before, and so is any line
// while the relay must see messages whole: Hooks set (the tool policy), the server ended
// before serving, ids of a replaced server's still about, Run ending. It runs on
// the host pump's goroutine, inside hostIn.Read.
func (r *Relay) startHostLine(pk *jsonlex.Peek) framing.LineSink {
	if pk.Method == nil || !jsonlex.KeyIs(pk.Method, "tools/call") || r.hooks != nil {
		return nil
	}
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if r.stopped || r.endedWhy != "" || r.staleCount.Load() > 0 {
		return nil
	}
	l := &hostLine{r: r, id: bytes.Clone(pk.ID), readAt: r.now()}
	if r.key != "" {
		l.st = jsonlex.NewArgStrip(r.key)
	}
	switch {
	case !r.clock || r.ic == nil:
		// A pure pipe: nothing of the call is kept.
	case l.st != nil && r.sic != nil && r.sic.StreamsArgs():
		// Its arguments are reduced to what the report needs as they pass, off
		// this path; nothing else of it is kept.
		l.dig = newArgsDigest()
		l.st.Capture(l.dig.add)
	default:
		l.keep = true
	}
	r.answering.Add(1) // the end of Run lets its answers be written (forward)
	return l
}

// hostLine is one long host request on its way to the server, in pieces: the
// correlation key is removed as it passes (jsonlex.ArgStrip), and interception is
// given it once it has all passed, just before the newline that lets the server act
// on it (an answer cannot come before), so a call is still known before its answer.
type hostLine struct {
	r      *Relay
	id     []byte // nil until known (it may come last), and for a notification
	readAt time.Time
	st     *jsonlex.ArgStrip // nil: nothing to remove (no interceptor)
	keep   bool              // interception records: the line is kept, once, for it
	msg    []byte            // the line as the host wrote it, when kept
	dig    *argsDigest       // or, when interception can take that, its arguments' digest

	out    upstream.LinePart // the message being written; nil before its first byte
	sentAt time.Time
	buf    []byte // the bytes one piece of the host's gives the server, gathered
	// whole holds what goes to the server when no message could begin in pieces
	// (no server serving: one is being replaced); it is written whole at the end,
	// and held by the upstream for the next server like any message.
	whole      []byte
	useWhole   bool
	registered bool  // the request is in hostReqs (from its first byte on)
	err        error // writing a piece failed: the rest is dropped
}

func (l *hostLine) Write(p []byte) {
	if l.st != nil {
		l.st.Write(p, l.gather)
		if l.st.Whole() {
			// Held is the line, forwarded whole at its end (nothing of it was
			// emitted): a copy kept for interception too would hold it twice.
			l.msg, l.keep = nil, false
			return
		}
	} else {
		l.send()
		l.write(p)
	}
	if l.keep {
		l.msg = append(l.msg, p...)
	}
	l.send()
}

// gather takes what the key's removal gives of a piece: the small parts (a key, a
// separator) are gathered, a long one is written as it is after them, not copied.
// (Gathered too, it grew the buffer to the read's size: 1.3× a 1 MB call's size in
// memory, with the read buffer and the heap's growth.)
func (l *hostLine) gather(b []byte) {
	if len(b) < directPart {
		l.buf = append(l.buf, b...)
		return
	}
	l.send()
	l.write(b)
}

// directPart is the length from which a part is written where it is, not gathered.
const directPart = 16 << 10

// maxGathered bounds the buffer kept from one piece to the next.
const maxGathered = 512 << 10

// send writes what the last piece gave, gathered.
func (l *hostLine) send() {
	b := l.buf
	if len(b) == 0 {
		return
	}
	l.buf = l.buf[:0]
	if cap(l.buf) > maxGathered {
		l.buf = nil
	}
	l.write(b)
}

// write writes b, the message's next bytes, beginning the message with its first
// byte. b is not kept (Part writes it before it returns).
func (l *hostLine) write(b []byte) {
	if len(b) == 0 {
		return
	}
	r := l.r
	if l.out == nil && !l.useWhole && l.err == nil {
		r.sendMu.Lock()
		// As noteHost does, under sendMu and before any of it reaches the server:
		// from here on the request is the registry's, and whoever settles a server
		// that went away answers it. (Registered only now: a line held whole after
		// all goes the usual way, registered there. An id not known yet is
		// registered at the end, before the newline.)
		if l.id != nil {
			r.hostReqs.add(l.id)
			l.registered = true
		}
		lw := r.caps.LineWriter
		var err error
		if lw != nil {
			l.out, err = lw.BeginLine()
		}
		if lw == nil || err != nil {
			l.useWhole = true
		} else {
			l.sentAt = r.now() // as the write starts, as forward takes it
		}
		r.sendMu.Unlock()
	}
	switch {
	case l.err != nil:
	case l.useWhole:
		l.whole = append(l.whole, b...)
	default:
		if err := l.out.Part(b); err != nil {
			l.err = err
		}
	}
}

func (l *hostLine) End(e framing.LineEnd) {
	r := l.r
	defer r.answering.Done()
	if l.dig != nil {
		defer l.dig.finish() // its goroutine ends, whatever became of the line
	}
	if l.st != nil && l.st.Whole() {
		// The head did not say it was a call before its arguments: read whole after
		// all, and forwarded as any message is (nothing of it was written, nor
		// registered).
		if e.Over {
			r.refuseTooLong(&framing.TooLongError{Size: e.Size, Max: e.Max, ID: l.id, Method: []byte(`"tools/call"`)}, l.readAt)
			return
		}
		r.forward(l.st.Held(), l.readAt)
		return
	}
	if l.st != nil && !e.Over {
		l.st.End(l.gather)
		if l.st.Inexact {
			r.log.Warn("a long call from the host was edited as it passed where the whole line's edit may differ (more whitespace than the proxy holds while streaming it, or a second value on the line); the correlation key's removal may have left a stray comma")
		}
	}
	// Past the cap (e.Over), the server has a prefix, ended below, which it cannot
	// parse; the host is answered below as for any message over the cap.
	l.send()
	r.sendMu.Lock()
	stopped := r.stopped
	if e.Peek != nil && e.Peek.ID != nil && !bytes.Equal(e.Peek.ID, l.id) {
		// The id the host's JSON.parse reads is the last one (the TypeScript SDK
		// writes it after the params): known only now.
		if l.registered {
			r.hostReqs.remove(l.id)
			l.registered = false
		}
		l.id = bytes.Clone(e.Peek.ID)
	}
	settled := l.registered && !r.hostReqs.hasKey(jsonlex.IDKey(l.id))
	if (l.keep || l.dig != nil) && !stopped && !e.Over {
		// Interception sees the call before the newline: as the host wrote it (and
		// removes the key from its copy, finding the correlation id), or reduced. A
		// line the host's end cut off too: the server gets it ended, as a last line
		// without its newline is a message read whole (framing.Reader), and may run
		// it.
		switch {
		case l.dig != nil:
			l.dig.finish()
			r.sic.FromHostStreamed(standIn(l.id, l.st, r.key), l.dig, l.readAt)
		case r.lic != nil:
			r.lx.Lex(l.msg)
			r.lic.FromHostLexed(l.msg, &r.lx, l.readAt)
		default:
			r.ic.FromHost(l.msg, l.readAt)
		}
		sentAt := l.sentAt
		if sentAt.IsZero() {
			sentAt = time.Now()
		}
		r.ic.Forwarded(sentAt)
		if settled {
			// Its server went away while it was being written, and the host was
			// answered then, before interception knew of the call: it ends here.
			r.ic.FromUpstream(ErrorResponse(l.id, ServerErrorCode, "bir-proxy: the server went away while the request was being passed on"), time.Now())
		}
	}
	l.msg = nil
	if !l.registered && l.id != nil && !stopped && !e.Cut && !e.Over && l.err == nil {
		// Its id came last: registered now, before the newline lets the server
		// answer, as noteHost does before a write.
		r.hostReqs.add(l.id)
		l.registered = true
	}
	var werr error
	switch {
	case stopped:
		// Run has ended, or is ending: it may have returned already (a host read
		// it cannot interrupt is not joined), and the upstream is the caller's to
		// close; as forward does, the line goes no further.
	case l.useWhole && settled:
		// Gathered while no server served, and settled since with a server that
		// died meanwhile (the host has its answer): written now, it would go to the
		// next server, which would run it and answer a second time.
	case l.useWhole && e.Over:
		// Gathered while no server served, and over the cap: refused below as any
		// line over the cap, which no server sees (its first --max-message bytes,
		// written as a message, are a line the server cannot parse and would
		// answer with a parse error the host gets).
	case l.useWhole:
		werr = r.up.Write(l.whole)
	case l.out != nil:
		cut := e.Over
		if cut {
			// Noted before the newline: the server may answer the line it cannot
			// parse, and the upstream pump read that answer, the moment it arrives.
			r.cuts.sent()
		}
		if werr = l.out.End(); werr != nil && cut {
			r.cuts.notSent()
		}
	}
	r.sendMu.Unlock()
	// waits says the host still waits for an answer to this request, which it is the
	// relay's to give: registered and not settled by another, or never registered.
	waits := func() bool {
		if l.id == nil {
			return false
		}
		if l.registered {
			return r.hostReqs.take(l.id)
		}
		return true
	}
	switch {
	case stopped:
		// Nor is interception touched: the host alone is told, if it still waits.
		if !e.Cut && waits() {
			r.answerHost([][]byte{l.id}, "bir-proxy: the session ended while the request was being passed on")
		}
		return
	case e.Cut:
		if l.registered {
			r.hostReqs.remove(l.id) // the host is gone; the server has the line, ended
		}
	case e.Over:
		if l.id == nil && e.Peek != nil && e.Peek.IDOver {
			// Its id was too long to keep: answered as null (JSON-RPC's id when it
			// cannot be told), not left waiting for ever as a notification would be.
			l.id = e.Peek.IDOrNull()
		}
		if waits() {
			// Early: Size is what passed by the cap, not the line's size.
			tl := &framing.TooLongError{Size: e.Size, Max: e.Max, ID: l.id, Method: []byte(`"tools/call"`), Early: true}
			if l.useWhole {
				r.refuseTooLong(tl, l.readAt)
				break
			}
			r.refuseTooLongSent(tl, l.readAt, fmt.Sprintf("it was streamed to the server as it came, and cut off there after %d bytes", e.Size))
		}
	case l.err != nil || werr != nil:
		if err := errors.Join(l.err, werr); waits() {
			r.log.Debug("could not forward a long host message", "err", err)
			why := "could not deliver the request to the server: " + err.Error()
			if errors.Is(err, framing.ErrLineCut) {
				why = fmt.Sprintf("bir-proxy: the request could not be passed on whole: the server stopped reading it with more than %d bytes of other messages waiting behind it", 16<<20)
			}
			r.answerInstead([][]byte{l.id}, why)
		}
	}
	if e.Size >= collectAfter {
		r.gc.collect()
	}
}

// standIn is the call interception is given for a call whose arguments were
// reduced as they passed: its id, name and _meta as the host wrote them, and as
// arguments only the correlation member (which interception removes, as from any
// call, to find the correlation id).
func standIn(id []byte, st *jsonlex.ArgStrip, key string) []byte {
	b := []byte(`{"jsonrpc":"2.0",`)
	if id != nil {
		b = append(append(append(b, `"id":`...), id...), ',')
	}
	b = append(b, `"method":"tools/call","params":{`...)
	if name := st.Name(); name != nil {
		b = append(append(append(b, `"name":`...), name...), ',')
	}
	if meta := st.Meta(); meta != nil {
		b = append(append(append(b, `"_meta":`...), meta...), ',')
	}
	b = append(b, `"arguments":{`...)
	if v := st.CallID(); v != nil {
		b = append(append(jsonlex.AppendString(b, key), ':'), v...)
	}
	return append(b, `}}}`...)
}

// cutAnswerWindow is how long after a host call passed the cap on its way to the
// server the server's parse error for it is looked for: a server reads the line at
// once, and a stale expectation must not eat a later parse error the host caused.
const cutAnswerWindow = 10 * time.Second

// cutLines counts the host calls cut at the cap on their way to the server whose
// parse error has not come (pending), the last cut at at (UnixNano): the error is not
// the host's (swallow).
type cutLines struct {
	pending, at atomic.Int64
}

// sent notes that the server was given the start of a host call that then passed
// --max-message, ended by a newline: a line it cannot parse, which a JSON-RPC server
// answers with a parse error of id null. The host was answered for the call already,
// as for any line over the cap, which the server never sees: that parse error is not
// the host's (swallow).
func (c *cutLines) sent() {
	c.at.Store(time.Now().UnixNano())
	c.pending.Add(1)
}

// notSent undoes sent when the cut line's newline could not be written: the server
// has no line to answer.
func (c *cutLines) notSent() {
	if c.pending.Add(-1) < 0 {
		c.pending.Store(0) // the pump gave up on it meanwhile
	}
}

// swallow says a server's answer is the parse error for a call cut at the cap
// (sent), which the host must not get: an error of id null, while a cut line is
// unanswered and recent. It runs on the upstream pump, which alone takes from
// pending.
func (c *cutLines) swallow(id []byte, isError bool, log *slog.Logger) bool {
	n := c.pending.Load()
	if n == 0 || !isError || string(id) != "null" {
		return false
	}
	if time.Since(time.Unix(0, c.at.Load())) > cutAnswerWindow {
		// The server answered none of them: given up on, unless a cut came since
		// the count was read (its time may not have been, and it is not stale).
		c.pending.CompareAndSwap(n, 0)
		return false
	}
	c.pending.Add(-1)
	log.Debug("dropped the server's error of id null for a host call cut at the cap on its way to it")
	return true
}
