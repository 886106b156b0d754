package relay

import (
	"log/slog"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Hooks are the seam through which a policy on the messages passing plugs into the
// relay (Options.Hooks): documented fields, each optional, as
// net/http/httputil.ReverseProxy's Rewrite, ModifyResponse and ErrorHandler. A policy
// may answer the host itself, take a host message (or objects of a batch) out of what
// goes to the upstream, cut or replace what goes to the host, and cancel a request
// upstream; it acts outside the pumps (a timer) through the Port Attach gives it. The
// tool policy (ToolPolicy: --ignore-tool, --allow-tool, --call-timeout, and through
// toolpolicy.Policy's own hooks the tool pins' block mode and the result budget) is
// one. While Options.Hooks is set, no message is streamed (stream.go, hoststream.go):
// the hooks see each one whole, but for the long answers LongAnswer takes.
//
// A Hooks serves one relay. The hooks on a pump's path must not wait: the host's
// path never waits on a policy.
type Hooks struct {
	// Attach, when set, is called once, by New, with the relay's Port: what the
	// policy acts through outside the pumps.
	Attach func(p *Port)
	// FromHost, when set, is given each host message on its way to the upstream,
	// after interception, on the host pump under the relay's send lock (as
	// Interceptor.FromHost); lx describes msg. It returns out, what goes on: msg, msg
	// with objects of its batch cut out (then lx must describe out: Lex it), or nil
	// for nothing (interception is told the message was forwarded); and answers, the
	// host's answers in the server's place for requests it took out, written to the
	// host (and given to interception as the server's) once the lock is let go. The
	// relay clears the elements of answers once written.
	FromHost func(msg []byte, lx *jsonlex.Line) (out []byte, answers [][]byte)
	// FromUpstream, when set, is given each message of the upstream's for the host
	// (not the answers to the proxy's own requests), on the upstream pump before it
	// is written to the host; lx describes msg. It returns what the host gets: msg,
	// msg with parts cut out (then lx must describe out), another message in its place
	// (replaced: interception is given msg, as the server sent it), or nil for
	// nothing.
	FromUpstream func(msg []byte, lx *jsonlex.Line) (out []byte, replaced bool)
	// FromProxy, when set, is given each request of the proxy's own (Relay.Call)
	// before it is sent: a non-nil answer is the request's answer in the server's
	// place; nothing is sent, and interception sees the request and the answer.
	FromProxy func(msg []byte) (answer []byte)
	// LongAnswer, when set, is asked on the upstream pump for an answer of the
	// upstream's about to stream (past the stream threshold, stream.go), by its
	// head's raw id, after the relay's own reasons to read it whole: a non-nil
	// AnswerCut is given the answer's pieces in the host's place, and what its End
	// returns is what the host gets (FromUpstream is not asked). nil: the answer is
	// read whole, as every message while Hooks are set.
	LongAnswer func(id []byte) AnswerCut
}

// AnswerCut takes a long answer as it streams, for a policy that rewrites it without
// holding it whole (the result budget's budget.StreamCut, docs/budget.md).
type AnswerCut interface {
	// Write is given each piece of the answer, on the upstream pump: it must not
	// wait long.
	Write(p []byte)
	// End ends the answer: ok says it was whole and a message. It returns what the
	// host gets, nil for nothing (an answer dropped; one that was not whole is stood
	// in for by the Conn, as any cut-off line).
	End(ok bool) []byte
}

// TimeoutInterceptor is an Interceptor that can be told a host's tools/call ended at
// its deadline (--call-timeout): answer is the error the relay sent the host for it,
// and the call's report says timeout rather than rpc_error. Without it, interception
// is given answer as the upstream's (FromUpstream).
type TimeoutInterceptor interface {
	CallTimedOut(answer []byte, at time.Time)
}

// Port is what a policy's Hooks act through outside the pumps: the relay's session,
// to answer the host in the server's place, send the upstream what the policy held
// back or a cancel, and ask which of the host's requests await an answer.
type Port struct{ r *Relay }

// Logger is the relay's logger.
func (p *Port) Logger() *slog.Logger { return p.r.log }

// Awaited reports whether a request of the host's with the id of IDKey key awaits
// its answer.
func (p *Port) Awaited(key string) bool { return p.r.hostReqs.hasKey(key) }

// Settle takes the host's request of the raw id out of those awaiting an answer, for
// the policy to answer it; false when none did (the server answered it, the relay did
// for a server that went away, or the host cancelled it).
func (p *Port) Settle(id []byte) bool { return p.r.hostReqs.take(id) }

// Answer answers a host request in the server's place from outside the pumps (a
// timer): unless the session is over, f runs under the relay's send lock and returns
// the answer (nil for none) and cancel, a message for the upstream (nil for none: the
// notifications/cancelled of a call past its deadline). Interception is told the
// answer as the server's (as a call's deadline passing, TimeoutInterceptor, when
// timedOut) and cancel is written to the upstream, under the lock (after Run, neither
// is touched, as refuseTooLong); the answer is written to the host after it, as
// forward's are: a host that does not read must not hold the lock the end of Run
// takes.
func (p *Port) Answer(timedOut bool, f func() (answer, cancel []byte)) {
	r := p.r
	if answer := p.answerLocked(timedOut, f); answer != nil {
		if err := r.hostOut.Write(answer); err != nil {
			r.log.Debug("could not answer the host", "err", err)
		}
	}
}

// answerLocked is Answer under the send lock: it returns the host's answer.
func (p *Port) answerLocked(timedOut bool, f func() (answer, cancel []byte)) []byte {
	r := p.r
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if r.stopped {
		return nil
	}
	answer, cancel := f()
	if answer != nil {
		if ti := r.icaps.Timeout; ti != nil && timedOut {
			ti.CallTimedOut(answer, time.Now())
		} else if r.ic != nil {
			r.ic.FromUpstream(answer, time.Now())
		}
	}
	if cancel != nil {
		if err := r.up.Write(cancel); err != nil {
			r.log.Debug("could not cancel a call past its deadline", "err", err)
		}
	}
	return answer
}

// Send sends the host's messages msgs, which the policy held back, to the upstream as
// the host pump sends them (registered in flight, under the send lock; nothing once
// the session is over), on the caller's goroutine: never the upstream pump's, which
// the host pump may be waiting for while it holds the lock (writing to a server that
// waits for the upstream pump to read). Before msgs[i] goes, seen is told it, lexed
// into lx (valid during the call). A message that cannot go (the server ended before
// serving the session: ids[i], its raw id, is answered with why; the upstream could
// not take it: its requests are) is answered with an error.
func (p *Port) Send(msgs, ids [][]byte, seen func(i int, lx *jsonlex.Line)) {
	r := p.r
	r.sendMu.Lock()
	if r.stopped {
		r.sendMu.Unlock()
		return
	}
	var lx jsonlex.Line
	var failed [][]byte
	reason := r.endedWhy
	for i, msg := range msgs {
		lx.Lex(msg)
		if seen != nil {
			seen(i, &lx)
		}
		if r.endedWhy != "" {
			failed = append(failed, ids[i])
			continue
		}
		r.noteHost(msg, &lx)
		if err := r.up.Write(msg); err != nil {
			reason = "could not deliver the request to the server: " + err.Error()
			failed = append(failed, r.undeliveredIDs(msg)...)
		}
	}
	r.sendMu.Unlock()
	if len(failed) > 0 {
		r.answerInstead(failed, reason)
	}
}
