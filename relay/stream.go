package relay

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/upstream"
)

// DefaultStreamThreshold is the size from which a message is passed on as it arrives
// rather than whole (upstream.Streamer, docs/ARCHITECTURE.md "Long messages"). A
// streamed line a server's death cuts off reaches the host cut (ended by a newline,
// its call answered with an error); at 64 KiB, answers of 256 KiB to 4 MiB cut so
// reached it as lines that are not JSON. Up to 4 MiB a line is read whole: the host
// gets all of it or nothing, at the cost of holding it (docs/PERFORMANCE.md).
const DefaultStreamThreshold = 4 << 20

// DefaultHostStreamThreshold is the size from which a host's tools/call goes to the
// server as it arrives (hoststream.go): there a death cuts nothing the host sees (the
// host is answered with an error), so the first full read it stays.
const DefaultHostStreamThreshold = 64 << 10

// StartStream takes a long message of the server's to the host as it arrives
// (upstream.StreamHandler), when its head says it goes there unchanged. It runs on
// the upstream pump's goroutine, inside the upstream's Read. A message the relay must
// read whole first is declined: the proxy's own answers (deliverOwn), anything while
// Hooks are set (the tool policy edits tools/list answers, drops late ones), anything
// once the host's side failed.
func (r *Relay) StartStream(id, method []byte) upstream.StreamSink {
	if r.streamErr != nil || r.abandoned.Load() || r.hooks != nil && (r.hooks.LongAnswer == nil || method != nil || id == nil) {
		return nil
	}
	if method == nil && (r.mayBeOwn(id) || r.cuts.pending.Load() > 0 && string(id) == "null") {
		// (An answer of id null may be the parse error for a host call cut at the
		// cap, which is not the host's: noteUpstream reads it whole.)
		return nil
	}
	s := &hostStream{r: r}
	if r.hooks != nil {
		// A policy is on: only an answer it cuts as it passes (the result budget)
		// streams; held whole, a 64 MB one cost the proxy ~130 MB.
		if s.cut = r.hooks.LongAnswer(id); s.cut == nil {
			return nil
		}
	}
	if r.clock && r.ic != nil {
		// (A passive interceptor, a pure pipe, keeps nothing it is given: nothing is
		// kept for it.)
		s.keep = true
		if rsi := r.icaps.ResultStreaming; rsi != nil && method == nil && id != nil {
			// An answer, by its head: reduced as it passes, off this path, to what
			// its report needs, unless interception needs it whole or not at all.
			// (Its id is the head's; a later duplicate is looked at in End.)
			switch want, whole := rsi.AnswerWanted(id); {
			case !want:
				s.keep = false
			case !whole:
				s.keep, s.rsi, s.dig = false, rsi, newResultDigest(&r.resultsQueued)
			}
		}
	}
	// Held messages go first; from here until End what others write to the host
	// waits behind the line (framing.Writer.Begin), bounded. (A cut answer is
	// written whole at its end.)
	if s.cut == nil {
		s.err = r.hostOut.Begin()
	}
	return s
}

// mayBeOwn says an id could be in the proxy's own namespace: a string that starts
// with its prefix, or one with an escape (decoding it to be sure is the whole
// message's job, deliverOwn's).
func (r *Relay) mayBeOwn(id []byte) bool {
	if len(id) < 2 || id[0] != '"' {
		return false
	}
	body := id[1 : len(id)-1]
	return bytes.IndexByte(body, '\\') >= 0 || bytes.HasPrefix(body, []byte(r.idPrefix))
}

// hostStream is one streamed message on its way to the host.
type hostStream struct {
	r    *Relay
	keep bool   // interception reads answers: the message is also kept, once
	msg  []byte // what was kept
	err  error  // the host's side failed: the rest is dropped
	// Or, when interception takes it so, the answer is reduced as it passes.
	dig *resultDigest
	rsi ResultStreamingInterceptor
	// cut, a policy's, takes the pieces in the host's place (Hooks.LongAnswer).
	cut AnswerCut
}

func (s *hostStream) Write(p []byte) {
	if s.keep {
		s.msg = append(s.msg, p...)
	} else if s.dig != nil {
		s.dig.add(p, false) // one message: the digest follows its values itself
	}
	if s.cut != nil {
		s.cut.Write(p)
	} else if s.err == nil {
		s.err = s.r.hostOut.Part(p)
	}
}

func (s *hostStream) End(e upstream.StreamEnd) {
	r := s.r
	readAt := r.now()
	if s.dig != nil {
		s.dig.finish() // its goroutine ends, whatever became of the message
	}
	if e.OK && e.ID != nil {
		// As noteUpstream does for a whole message, before the host has all of it
		// (and can answer), by the id the host's JSON.parse reads: the last.
		switch {
		case e.Method == nil:
			if r.mayBeOwn(e.ID) {
				// The head's id was the host's, a later duplicate is in the proxy's
				// namespace: a server making ids up. The host has it already.
				r.log.Warn("a streamed answer from the server carried two ids, the last in the proxy's own namespace")
			}
			r.hostReqs.remove(e.ID)
		default:
			r.serverReqs.add(e.ID)
		}
	}
	if e.More {
		r.log.Debug("a streamed line from the server held more than one value")
	}
	if s.cut != nil && !s.endCut(e) {
		return
	}
	// The newline ends the line either way: one that was not a message must not run
	// into the next (the Conn then stands in for it with an error answer).
	if s.cut != nil {
		// Written whole by endCut.
	} else if err := r.hostOut.End(); errors.Is(err, framing.ErrLineCut) {
		// It stalled with too much of the proxy's own waiting behind it, and was
		// ended early: the host did not get it whole. As for a line the Conn stands
		// in for (when it was no message, the Conn does): the call it answered gets
		// an error answer, a request of the server's an error back.
		r.log.Warn("a message the server stalled in the middle of was ended early: too much was waiting behind it", "bytes", e.Size)
		if s.err != nil {
			r.streamErr = s.err // a piece before the cut could not be written
			return
		}
		if e.OK && e.ID != nil {
			why := fmt.Sprintf("bir-proxy: the server's message could not be passed on whole: it stalled after %d bytes with more than %d bytes of other messages waiting behind it", e.Size, 16<<20)
			if e.Method == nil {
				r.answerInstead([][]byte{e.ID}, why)
			} else {
				// Written here as the Conn writes its own refusals from its reader,
				// not through send: sendMu may be held by a forward the server is
				// slow to read, and this pump is what reads the server.
				r.serverReqs.remove(e.ID)
				if err := r.up.Write(ErrorResponse(e.ID, -32603, why)); err != nil {
					r.log.Debug("could not tell the server its request was not passed on", "err", err)
				}
			}
		}
		return
	} else if err != nil && s.err == nil {
		s.err = err
	}
	if s.err != nil {
		r.streamErr = s.err
		return
	}
	if s.dig != nil && e.OK && e.ID != nil && !r.abandoned.Load() {
		if e.Method == nil {
			s.rsi.FromUpstreamStreamed(answerStandIn(e.ID, e.Error), s.dig, readAt)
		} else {
			// A request after all (a later "method"): its params went by, and
			// interception has what the head and the end said.
			r.intercepted(requestStandIn(e.ID, e.Method), false, readAt)
		}
		return
	}
	if !e.OK || !s.keep || r.abandoned.Load() {
		return
	}
	r.intercepted(s.msg, false, readAt)
	if len(s.msg) >= collectAfter {
		s.msg = nil
		r.gc.collect()
	}
}

// endCut writes to the host what the policy's AnswerCut makes of the answer e ends
// (nothing for nil); false when the session's host side failed.
func (s *hostStream) endCut(e upstream.StreamEnd) bool {
	r := s.r
	if out := s.cut.End(e.OK); out != nil {
		if err := r.hostOut.Write(out); err != nil {
			r.streamErr = err
			return false
		}
	}
	return true
}

// intercepted hands a message written to the host to interception. lexed says
// r.upLx describes it already.
func (r *Relay) intercepted(msg []byte, lexed bool, readAt time.Time) {
	switch {
	case r.luc != nil:
		if !lexed {
			r.upLx.Lex(msg)
		}
		r.luc.FromUpstreamLexed(msg, &r.upLx, readAt)
	case r.ic != nil:
		r.ic.FromUpstream(msg, readAt)
	}
}

// answerStandIn is what interception is given of a long answer reduced as it
// passed: its id, and an empty result, or an error when it was an error (the rest is
// the StreamedResult's). Shed by bookkeeping, the stand-in is all that is left of it:
// a result's, a failed call was reported as having succeeded. The error's value is
// what is recorded when the StreamedResult has none (it fell behind before the
// error came): it says so, where `{}` was recorded as though the server sent it.
func answerStandIn(id []byte, isErr bool) []byte {
	b := make([]byte, 0, len(id)+len(standInError)+40)
	b = append(append(b, `{"jsonrpc":"2.0","id":`...), id...)
	if isErr {
		return append(append(append(b, `,"error":`...), standInError...), '}')
	}
	return append(b, `,"result":{}}`...)
}

// standInError is the error of an error answer's stand-in.
const standInError = `{"message":"bir-proxy: not recorded: the answer came faster than the proxy's bookkeeping could read it"}`

// requestStandIn is what interception is given of a long request of the server's
// that began like an answer: its id and method.
func requestStandIn(id, method []byte) []byte {
	b := make([]byte, 0, len(id)+len(method)+40)
	b = append(append(append(b, `{"jsonrpc":"2.0","id":`...), id...), `,"method":`...)
	return append(append(b, method...), '}')
}
