package relay

import (
	"bytes"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/toolpolicy"
)

// TimeoutInterceptor is an Interceptor that can be told a host's tools/call ended at
// its deadline (--call-timeout): answer is the error the relay sent the host for it,
// and the call's report says timeout rather than rpc_error. Without it, interception
// is given answer as the upstream's (FromUpstream).
type TimeoutInterceptor interface {
	CallTimedOut(answer []byte, at time.Time)
}

// policy is the relay's part in a toolpolicy.Policy: it knows which of the host's
// requests in flight are tools/list (whose answers lose the hidden tools) and
// tools/call with a deadline (answered by the relay when it passes, their late
// answers dropped), and refuses the calls of hidden tools before they reach the
// server. A relay with no policy has none (Relay.pol is nil), and the pumps do not
// look.
type policy struct {
	p *toolpolicy.Policy

	// refused are the answers to hidden calls of the host message being forwarded,
	// written once sendMu is released. It and host are the host pump's only; up is
	// the upstream pump's: the two run at once.
	refused  [][]byte
	host, up scratch

	// watching counts the entries of lists, calls and late: while it is zero an
	// upstream message is not looked at.
	watching atomic.Int64
	mu       sync.Mutex
	lists    map[string]hostNum   // the host's tools/list in flight, by IDKey
	listNums map[float64]int      // how many lists have each number id, as a JavaScript host reads it
	sweepAt  int                  // len(lists) at which answered ones are swept out
	calls    map[string]*deadline // the host's tools/call with a deadline, by IDKey
	tokens   map[string]string    // progress token IDKey → its call's key
	// late are the calls answered at their deadline, by key, with their progress
	// tokens (lateTokens): their answers and progress notifications are dropped, the
	// host's request being over.
	late        map[string]lateCall
	lateTokens  map[string]struct{}
	lateNums    map[float64]int // how many late calls have each number id, as lists
	lateTokNums map[float64]int // and each number progress token
	// lateOrder is the late calls by when they passed their deadline, oldest from
	// lateHead on (with entries of calls answered since: their seq differs or they
	// are gone), so that past lateMax the oldest is forgotten, one for one.
	lateOrder []lateRef
	lateHead  int
	lateSeq   uint64
	// held are the host's requests whose id is a late call's, by key, in order: sent
	// once that call's answer has come (and been dropped), or answered by the relay
	// after heldFor (heldAnswer). Forwarded at once, the late answer would be theirs
	// too: two answers to one request. heldBytes counts their bytes; holding is
	// len(late)+len(held), for the host pump to look without the lock.
	// clash are the host's requests in flight whose number id is a late call's but
	// whose exact id is not (1.0000000000000001 while 1 is late), by key: their
	// answers are theirs, not dropped as the late call's.
	clash     map[string]struct{}
	held      map[string][]*heldReq
	heldN     int
	heldBytes int
	holding   atomic.Int64
	// release is the upstream pump's: the held requests a late answer let go.
	release []*heldReq
	// answers are the host's tools/call in flight whose answers the policy's
	// Answer hook is asked for (the result budget), by IDKey; at most answersMax:
	// past it a call's answer passes as it is.
	answers map[string]struct{}
	// whole is the upstream pump's: the answer as the server sent it when Answer
	// replaced it, for interception (the report keeps the original result).
	whole []byte
}

// answersMax bounds pl.answers: a host keeps far fewer calls in flight.
const answersMax = 1 << 16

// heldReq is one held host request: the object alone, copied.
type heldReq struct {
	msg, id []byte
	key     string
	timer   *time.Timer
}

// Bounds of what is held: past them a request of a late call's id is answered at
// once (heldAnswer).
const (
	heldMax      = 4096
	heldMaxBytes = 64 << 20
)

// lateRef is one entry of lateOrder.
type lateRef struct {
	key string
	seq uint64
}

// hostNum is the number a JavaScript host reads a number id as (jsonlex.JSNumber);
// ok is false for an id that is not a number literal. A TypeScript SDK host matches
// an answer to its request by Number(response.id): an answer of 1.0000000000000001,
// 0.1e1 or "1" is its request 1's, where IDKey tells them apart.
type hostNum struct {
	v  float64
	ok bool
	// paged: a tools/list asking for a page after the first (pl.lists only).
	paged bool
}

// numOf is the hostNum of the host's id raw: only a number literal is one.
func numOf(raw []byte) hostNum {
	if len(raw) == 0 || raw[0] == '"' {
		return hostNum{}
	}
	v, ok := jsonlex.JSNumber(raw)
	return hostNum{v: v, ok: ok}
}

// lateCall is a call answered at its deadline: the IDKey of its progress token
// ("" for none) and its number.
type lateCall struct {
	token       string
	num, tokNum hostNum
	seq         uint64
}

// scratch is what one pump reuses from message to message: the cuts of a message,
// and which of its objects go.
type scratch struct {
	cuts []jsonlex.Span
	hide []bool
}

// deadline is one host tools/call with a deadline.
type deadline struct {
	id     []byte // raw, copied
	key    string
	token  string // IDKey of its progress token; "" for none
	tokNum hostNum
	due    time.Time
	// last is when progress can no longer move due: MaxTotalFactor × CallTimeout
	// after the call went.
	last  time.Time
	timer *time.Timer
}

// Bounds of the policy's sets, which a host or server controls: past them answered
// entries are swept (lists), or the oldest generation is forgotten (late, as stale).
const (
	listsSweep = 4096
	lateMax    = 4096
)

func newPolicy(p *toolpolicy.Policy) *policy {
	if !p.Active() {
		return nil
	}
	return &policy{p: p, lists: make(map[string]hostNum), listNums: make(map[float64]int), sweepAt: listsSweep,
		calls: make(map[string]*deadline), tokens: make(map[string]string),
		late: make(map[string]lateCall), lateTokens: make(map[string]struct{}), lateNums: make(map[float64]int), lateTokNums: make(map[float64]int),
		held: make(map[string][]*heldReq), clash: make(map[string]struct{}), answers: make(map[string]struct{})}
}

func (pl *policy) count() {
	pl.watching.Store(int64(len(pl.lists) + len(pl.calls) + len(pl.late) + len(pl.answers)))
	pl.holding.Store(int64(len(pl.late) + len(pl.held)))
}

// policyFromHost applies the policy to the host message msg, which r.lx describes,
// under sendMu: the calls of hidden tools are taken out of it (their answers wait in
// pol.refused for writeRefused), the tools/list requests left are noted, and the
// tools/call left get their deadline. It returns what is left to forward, lexed into
// r.lx; all says nothing is (interception was told it was forwarded).
func (r *Relay) policyFromHost(msg []byte) (out []byte, all bool) {
	pl := r.pol
	objs := r.lx.RPC()
	nHidden := 0
	pl.host.hide = pl.host.hide[:0]
	for i := range objs {
		o := &objs[i]
		hidden := false
		if o.ID.End != 0 && o.Method.End != 0 && pl.p.Answer != nil && pl.watching.Load() > 0 && !isMethod(msg, o, "tools/call") {
			// A request of another method reusing the id of a call noted for
			// Answer (one the relay answered): its answer is not the call's.
			r.noteAnswer(msg[o.ID.Start:o.ID.End], false)
		}
		switch {
		case o.Method.End == 0:
		case isMethod(msg, o, "tools/call"):
			var nameLit []byte
			if hidden, nameLit = r.hiddenCall(msg, o); hidden {
				if o.ID.End != 0 {
					pl.refused = append(pl.refused, pl.p.Refusal(msg[o.ID.Start:o.ID.End], nameLit))
				}
			} else if o.ID.End != 0 && pl.holding.Load() > 0 && r.holdIfLate(msg, o) {
				hidden = true // held: cut out of what goes now
			} else if o.ID.End != 0 {
				if pl.p.CallTimeout > 0 {
					r.startDeadline(msg, o)
				}
				if pl.p.Answer != nil {
					r.noteAnswer(msg[o.ID.Start:o.ID.End], true)
				}
			}
		case o.ID.End != 0 && pl.holding.Load() > 0 && r.holdIfLate(msg, o):
			hidden = true
		case o.ID.End != 0 && pl.p.Filters() && isMethod(msg, o, "tools/list"):
			r.noteList(msg[o.ID.Start:o.ID.End], jsonlex.Get(o.Fields(msg).Params, "cursor") != nil)
		case o.ID.End == 0 && pl.holding.Load() > 0 && isMethod(msg, o, "notifications/cancelled"):
			r.cancelHeld(jsonlex.Get(o.Fields(msg).Params, "requestId"))
		}
		pl.host.hide = append(pl.host.hide, hidden)
		if hidden {
			nHidden++
		}
	}
	if nHidden == 0 {
		return msg, false
	}
	start := jsonlex.SkipSpace(msg, 0)
	if nHidden == len(objs) && msg[start] == '{' {
		// The message is the hidden call: nothing goes to the server.
		if r.ic != nil {
			r.ic.Forwarded(time.Now())
		}
		return nil, true
	}
	// A batch: its hidden calls are cut out of it, and the rest goes (none of it, when
	// it is not a batch the lexer follows: it found the objects all the same).
	cuts, ok := batchCuts(msg, start, objs, pl.host.hide)
	if !ok || msg[start] != '[' {
		if r.ic != nil {
			r.ic.Forwarded(time.Now())
		}
		return nil, true
	}
	pl.host.cuts = cuts
	out = toolpolicy.Cut(msg, pl.host.cuts)
	r.lx.Lex(out)
	return out, false
}

// noteAnswer notes the host's tools/call of the raw id (call) for the Answer hook,
// or forgets the id (a request of another method).
func (r *Relay) noteAnswer(id []byte, call bool) {
	pl := r.pol
	k := jsonlex.IDKey(id)
	pl.mu.Lock()
	switch {
	case !call:
		delete(pl.answers, k)
	case len(pl.answers) < answersMax:
		pl.answers[k] = struct{}{}
	default:
		r.log.Debug("too many tool calls in flight: an answer passes without the result budget", "id", string(id))
	}
	pl.count()
	pl.mu.Unlock()
}

// noteList notes the host's tools/list of the raw id as in flight; paged says it
// asked for a page after the first (a cursor).
func (r *Relay) noteList(raw []byte, paged bool) {
	pl := r.pol
	pl.mu.Lock()
	if len(pl.lists) >= pl.sweepAt {
		for k := range pl.lists {
			if !r.hostReqs.hasKey(k) {
				pl.listDone(k)
			}
		}
		pl.sweepAt = max(listsSweep, 2*len(pl.lists))
	}
	k := jsonlex.IDKey(raw)
	pl.listDone(k) // a list of the same id again: counted once
	n := numOf(raw)
	n.paged = paged
	pl.lists[k] = n
	if n.ok {
		pl.listNums[n.v]++
	}
	pl.count()
	pl.mu.Unlock()
}

// holdIfLate holds the host's request o when its id is a late call's (or one held
// already): it goes once that call's answer has come and been dropped, or is
// answered by the relay after heldFor. Past heldMax or heldMaxBytes it is answered
// at once. It reports whether o is taken out of what goes now.
func (r *Relay) holdIfLate(msg []byte, o *jsonlex.Obj) bool {
	pl := r.pol
	raw := msg[o.ID.Start:o.ID.End]
	k := jsonlex.IDKey(raw)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if _, late := pl.late[k]; !late && len(pl.held[k]) == 0 {
		if n := numOf(raw); n.ok && pl.lateNums[n.v] > 0 {
			if len(pl.clash) >= heldMax {
				for c := range pl.clash {
					if !r.hostReqs.hasKey(c) {
						delete(pl.clash, c)
					}
				}
			}
			pl.clash[k] = struct{}{}
		}
		return false
	}
	obj := o.Bytes(msg)
	if pl.heldN >= heldMax || pl.heldBytes+len(obj) > heldMaxBytes {
		pl.refused = append(pl.refused, heldAnswer(raw, pl.p.CallTimeout))
		return true
	}
	h := &heldReq{msg: bytes.Clone(obj), id: bytes.Clone(raw), key: k}
	pl.held[k] = append(pl.held[k], h)
	pl.heldN++
	pl.heldBytes += len(h.msg)
	h.timer = time.AfterFunc(heldFor(pl.p), func() { r.giveUpHeld(h) })
	pl.count()
	return true
}

// heldFor is how long a request of a late call's id waits for that call's answer: a
// server told to cancel a request should not answer it at all.
func heldFor(p *toolpolicy.Policy) time.Duration { return p.CallTimeout }

// heldAnswer is the relay's answer to a request of the raw id that waited heldFor
// for the late answer of the call that had the id before, or could not be held.
func heldAnswer(id []byte, d time.Duration) []byte {
	return jsonlex.ErrorResponse(id, toolpolicy.CodeTimeout, "bir-proxy: the request was not sent: its id is still that of a tool call that passed its --call-timeout "+d.String()+
		" and whose answer has not come (the server could not tell the two answers apart); send it with another id")
}

// unhold takes h out of the held requests, under mu; false when it was not there.
func (pl *policy) unhold(h *heldReq) bool {
	hs := pl.held[h.key]
	for i, x := range hs {
		if x == h {
			hs = append(hs[:i], hs[i+1:]...)
			if len(hs) == 0 {
				delete(pl.held, h.key)
			} else {
				pl.held[h.key] = hs
			}
			pl.heldN--
			pl.heldBytes -= len(h.msg)
			h.timer.Stop()
			return true
		}
	}
	return false
}

// giveUpHeld answers the held request h, which waited heldFor: it is not sent.
func (r *Relay) giveUpHeld(h *heldReq) {
	pl := r.pol
	r.sendMu.Lock()
	if r.stopped {
		r.sendMu.Unlock()
		return
	}
	pl.mu.Lock()
	found := pl.unhold(h)
	pl.count()
	pl.mu.Unlock()
	var answer []byte
	if found {
		answer = heldAnswer(h.id, pl.p.CallTimeout)
		if r.ic != nil {
			r.ic.FromUpstream(answer, time.Now())
		}
	}
	r.sendMu.Unlock()
	if answer != nil {
		if err := r.hostOut.Write(answer); err != nil {
			r.log.Debug("could not answer the host", "err", err)
		}
	}
}

// cancelHeld drops the last held request of the raw id, under sendMu: the host
// cancelled it, and waits for no answer.
func (r *Relay) cancelHeld(raw []byte) {
	if raw == nil {
		return
	}
	pl := r.pol
	pl.mu.Lock()
	if hs := pl.held[jsonlex.IDKey(raw)]; len(hs) > 0 {
		pl.unhold(hs[len(hs)-1])
		pl.count()
	}
	pl.mu.Unlock()
}

// sendHeld sends the held requests hs, whose late call's answer came: on a goroutine
// of its own, as the host pump's messages are sent, under sendMu (the upstream pump
// must not wait for it: the host pump may hold it, writing to a server that waits
// for the upstream pump to read).
func (r *Relay) sendHeld(hs []*heldReq) {
	pl := r.pol
	r.sendMu.Lock()
	if r.stopped {
		r.sendMu.Unlock()
		return
	}
	var lx jsonlex.Line
	var failed [][]byte
	reason := r.endedWhy
	for _, h := range hs {
		lx.Lex(h.msg)
		if objs := lx.RPC(); len(objs) == 1 {
			o := &objs[0]
			switch {
			case isMethod(h.msg, o, "tools/call"):
				if pl.p.CallTimeout > 0 {
					r.startDeadline(h.msg, o)
				}
				if pl.p.Answer != nil {
					r.noteAnswer(h.id, true)
				}
			case pl.p.Filters() && isMethod(h.msg, o, "tools/list"):
				r.noteList(h.id, jsonlex.Get(o.Fields(h.msg).Params, "cursor") != nil)
			}
		}
		if r.endedWhy != "" {
			failed = append(failed, h.id)
			continue
		}
		r.noteHost(h.msg, &lx)
		if err := r.up.Write(h.msg); err != nil {
			reason = "could not deliver the request to the server: " + err.Error()
			failed = append(failed, r.undeliveredIDs(h.msg)...)
		}
	}
	r.sendMu.Unlock()
	if len(failed) > 0 {
		r.answerInstead(failed, reason)
	}
}

func isMethod(msg []byte, o *jsonlex.Obj, name string) bool {
	if o.Recheck {
		// Several "method" members: a server may act on any of them.
		found := false
		jsonlex.EachMember(msg, o.Start, func(m jsonlex.Member) bool {
			if jsonlex.KeyIs(msg[m.Key.Start:m.Key.End], "method") && jsonlex.KeyIs(msg[m.Value.Start:m.Value.End], name) {
				found = true
			}
			return !found
		})
		return found
	}
	return jsonlex.KeyIs(msg[o.Method.Start:o.Method.End], name)
}

// hiddenCall reports whether the tools/call o calls a hidden tool, and the literal of
// the name it calls. An object with duplicate members is hidden when any "name" of
// any "params" is: a server that reads the first of them must not be reached either.
func (r *Relay) hiddenCall(msg []byte, o *jsonlex.Obj) (bool, []byte) {
	p := r.pol.p
	if !p.Filters() {
		return false, nil
	}
	if !o.Recheck {
		lit := msg[o.Name.Start:o.Name.End]
		return p.HiddenLit(lit), lit
	}
	var hit []byte
	jsonlex.EachMember(msg, o.Start, func(m jsonlex.Member) bool {
		if !jsonlex.KeyIs(msg[m.Key.Start:m.Key.End], "params") || msg[m.Value.Start] != '{' {
			return true
		}
		jsonlex.EachMember(msg, m.Value.Start, func(n jsonlex.Member) bool {
			if jsonlex.KeyIs(msg[n.Key.Start:n.Key.End], "name") && p.HiddenLit(msg[n.Value.Start:n.Value.End]) {
				hit = msg[n.Value.Start:n.Value.End]
			}
			return hit == nil
		})
		return hit == nil
	})
	return hit != nil, hit
}

// startDeadline gives the host's tools/call o its deadline, from now.
func (r *Relay) startDeadline(msg []byte, o *jsonlex.Obj) {
	pl := r.pol
	raw := msg[o.ID.Start:o.ID.End]
	now := time.Now()
	d := &deadline{id: append([]byte(nil), raw...), key: jsonlex.IDKey(raw), due: now.Add(pl.p.CallTimeout)}
	d.last = d.due.Add(min(pl.p.CallTimeout, math.MaxInt64/toolpolicy.MaxTotalFactor) * (toolpolicy.MaxTotalFactor - 1))
	if o.Params.End != 0 {
		if tok := jsonlex.Get(jsonlex.Get(msg[o.Params.Start:o.Params.End], "_meta"), "progressToken"); tok != nil {
			d.token, d.tokNum = jsonlex.IDKey(tok), numOf(tok)
		}
	}
	pl.mu.Lock()
	if old, ok := pl.calls[d.key]; ok {
		// The host reused an id in flight: the new call's deadline is the one kept.
		old.timer.Stop()
		pl.forget(old)
	}
	pl.forgetLate(d.key)
	pl.calls[d.key] = d
	if d.token != "" {
		pl.tokens[d.token] = d.key
	}
	d.timer = time.AfterFunc(pl.p.CallTimeout, func() { r.deadlinePassed(d) })
	pl.count()
	pl.mu.Unlock()
}

// addLate remembers the late call key, under mu: past lateMax the oldest is
// forgotten (all of them were, at once: of 10,000 calls timing out together 8,192
// late answers reached the host where 5,904 may).
func (pl *policy) addLate(key, token string, n, tokNum hostNum) {
	pl.forgetLate(key)
	for len(pl.late) >= lateMax && pl.lateHead < len(pl.lateOrder) {
		old := pl.lateOrder[pl.lateHead]
		pl.lateOrder[pl.lateHead] = lateRef{}
		pl.lateHead++
		if lc, ok := pl.late[old.key]; ok && lc.seq == old.seq {
			pl.forgetLate(old.key)
		}
	}
	if pl.lateHead > len(pl.lateOrder)/2 || len(pl.lateOrder)-pl.lateHead > 2*lateMax {
		// Compacted: the entries before lateHead, and those of calls answered since,
		// go; what is left is at most lateMax, so this is amortized O(1).
		live := pl.lateOrder[:0]
		for _, ref := range pl.lateOrder[pl.lateHead:] {
			if lc, ok := pl.late[ref.key]; ok && lc.seq == ref.seq {
				live = append(live, ref)
			}
		}
		clear(pl.lateOrder[len(live):])
		pl.lateOrder, pl.lateHead = live, 0
	}
	pl.lateSeq++
	if token == "" {
		tokNum = hostNum{}
	}
	pl.late[key] = lateCall{token: token, num: n, tokNum: tokNum, seq: pl.lateSeq}
	if tokNum.ok {
		pl.lateTokNums[tokNum.v]++
	}
	pl.lateOrder = append(pl.lateOrder, lateRef{key, pl.lateSeq})
	if token != "" {
		pl.lateTokens[token] = struct{}{}
	}
	if n.ok {
		pl.lateNums[n.v]++
	}
}

// listDone forgets the list key, under mu.
func (pl *policy) listDone(key string) {
	n, ok := pl.lists[key]
	if !ok {
		return
	}
	delete(pl.lists, key)
	if n.ok {
		uncount(pl.listNums, n.v)
	}
}

func uncount(m map[float64]int, v float64) {
	if m[v] <= 1 {
		delete(m, v)
	} else {
		m[v]--
	}
}

// forgetLate stops dropping what comes for the late call key, under mu.
func (pl *policy) forgetLate(key string) {
	if lc, ok := pl.late[key]; ok {
		delete(pl.late, key)
		if lc.token != "" {
			delete(pl.lateTokens, lc.token)
		}
		if lc.num.ok {
			uncount(pl.lateNums, lc.num.v)
		}
		if lc.tokNum.ok {
			uncount(pl.lateTokNums, lc.tokNum.v)
		}
	}
}

// forget removes d from the calls, under mu.
func (pl *policy) forget(d *deadline) {
	delete(pl.calls, d.key)
	if d.token != "" && pl.tokens[d.token] == d.key {
		delete(pl.tokens, d.token)
	}
}

// deadlinePassed answers the host's call d, if it is still in flight, with the
// timeout error; tells interception; and sends the server notifications/cancelled
// for it. Its answer, if it comes, is dropped. The upstream and interception are
// touched under sendMu, as refuseTooLong does (after Run, neither is); the host's
// answer is written after it, as forward's are: a host that does not read must not
// hold the lock the end of Run takes.
func (r *Relay) deadlinePassed(d *deadline) {
	if answer := r.timeOut(d); answer != nil {
		if err := r.hostOut.Write(answer); err != nil {
			r.log.Debug("could not answer the host", "err", err)
		}
	}
}

// timeOut is deadlinePassed under sendMu: it returns the host's answer, nil for
// none.
func (r *Relay) timeOut(d *deadline) []byte {
	pl := r.pol
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if r.stopped {
		return nil
	}
	pl.mu.Lock()
	if pl.calls[d.key] != d {
		pl.mu.Unlock()
		return nil // answered, or its id reused
	}
	if left := time.Until(d.due); left > 0 {
		d.timer.Reset(left) // progress moved it
		pl.mu.Unlock()
		return nil
	}
	pl.forget(d)
	// Still in flight only if nobody answered it: the server (its answer is on its
	// way), the relay for a server that went away, or the host's own cancel.
	inFlight := r.hostReqs.take(d.id)
	if inFlight {
		pl.addLate(d.key, d.token, numOf(d.id), d.tokNum)
	}
	pl.count()
	pl.mu.Unlock()
	if !inFlight {
		return nil
	}
	answer := toolpolicy.Timeout(d.id, pl.p.CallTimeout)
	if pl.p.ResetOnProgress && !d.due.Before(d.last) {
		answer = toolpolicy.TotalTimeout(d.id, pl.p.CallTimeout)
	}
	if ti, ok := r.ic.(TimeoutInterceptor); ok {
		ti.CallTimedOut(answer, time.Now())
	} else if r.ic != nil {
		r.ic.FromUpstream(answer, time.Now())
	}
	if err := r.up.Write(toolpolicy.Cancel(d.id, pl.p.CallTimeout)); err != nil {
		r.log.Debug("could not cancel a call past its deadline", "err", err)
	}
	r.log.Debug("a tool call passed its deadline", "id", string(d.id), "timeout", pl.p.CallTimeout)
	return answer
}

// flushHeld writes out what the upstream held for the next host message, under
// sendMu, when that message writes nothing to it.
func (r *Relay) flushHeld() {
	if r.batch == nil {
		return
	}
	if err := r.batch.Flush(); err != nil {
		r.log.Debug("could not forward a held host message", "err", err)
	}
}

// writeRefused writes the answers to the hidden calls of the message just forwarded.
func (r *Relay) writeRefused() {
	pl := r.pol
	if pl == nil || len(pl.refused) == 0 {
		return
	}
	for i, a := range pl.refused {
		if err := r.hostOut.Write(a); err != nil {
			r.log.Debug("could not answer the host", "err", err)
		} else if r.ic != nil {
			r.ic.FromUpstream(a, time.Now())
		}
		pl.refused[i] = nil
	}
	pl.refused = pl.refused[:0]
}

// policyFromUpstream applies the policy to msg from the upstream, which r.upLx
// describes, before it goes to the host: an answer to a tools/list loses the hidden
// tools, a late answer to a call the relay answered at its deadline is dropped, and a
// progress notification moves its call's deadline (ResetOnProgress). It returns what
// is left, lexed into r.upLx; nil for nothing.
func (r *Relay) policyFromUpstream(msg []byte) []byte {
	pl := r.pol
	if pl.watching.Load() == 0 {
		return msg
	}
	objs := r.upLx.RPC()
	pl.up.cuts = pl.up.cuts[:0]
	pl.up.hide = pl.up.hide[:0]
	dropped := 0
	var answerID []byte // the id of a single answer to a call noted for Answer
	pl.mu.Lock()
	for i := range objs {
		o := &objs[i]
		drop := false
		f := o.Fields(msg)
		switch {
		case f.IsResponse():
			k := jsonlex.IDKey(f.ID)
			if _, ok := pl.answers[k]; ok {
				delete(pl.answers, k)
				if len(objs) == 1 && f.Error == nil {
					answerID = f.ID
				}
			}
			if _, ok := pl.late[k]; ok {
				answerID = nil
				pl.forgetLate(k)
				// The requests of its id that waited for it go now.
				for _, h := range pl.held[k] {
					h.timer.Stop()
					pl.heldN--
					pl.heldBytes -= len(h.msg)
					pl.release = append(pl.release, h)
				}
				delete(pl.held, k)
				drop = true
				break
			}
			// The number a JavaScript host reads the id as, looked for only while a
			// list or a late call has a number id: a string or a long number is
			// read on the server's pump, before the answer goes to the host.
			var num hostNum
			if len(pl.listNums)+len(pl.lateNums) > 0 {
				num.v, num.ok = jsonlex.JSNumber(f.ID)
			}
			if num.ok && pl.lateNums[num.v] > 0 {
				if _, ok := pl.clash[k]; ok {
					delete(pl.clash, k) // the answer to the host's request of that exact id
				} else {
					// A late call's answer to such a host (1.0000000000000001 for the
					// late 1): dropped, or it would answer the host's next request of
					// that number. The late call is still awaited by its exact id.
					drop = true
					break
				}
			}
			if d, ok := pl.calls[k]; ok {
				d.timer.Stop()
				pl.forget(d)
			}
			if n, ok := pl.lists[k]; ok {
				pl.listDone(k)
				if pl.p.Listed != nil {
					pl.p.Listed(f.Result, !n.paged)
				}
				pl.up.cuts = pl.p.ToolCuts(msg, o.Span, pl.up.cuts)
			} else if num.ok && pl.listNums[num.v] > 0 {
				// An id a TypeScript SDK host takes for the list's number ("1",
				// 1.0000000000000001, 0.1e1 for 1): cut as the list's answer, which is
				// still awaited by its exact id (an exact one is cut too).
				pl.up.cuts = pl.p.ToolCuts(msg, o.Span, pl.up.cuts)
			}
		case len(pl.tokens)+len(pl.lateTokens) > 0 && f.Method != nil && f.ID == nil && jsonlex.KeyIs(f.Method, "notifications/progress"):
			rawTok := jsonlex.Get(f.Params, "progressToken")
			tok := jsonlex.IDKey(rawTok)
			if _, ok := pl.lateTokens[tok]; ok {
				drop = true // of a call the host has its answer to
				break
			}
			if _, live := pl.tokens[tok]; !live && len(pl.lateTokNums) > 0 {
				// A token a TypeScript SDK host reads as a late call's (it matches
				// progress by Number(progressToken)), of no call in flight: dropped
				// too.
				if v, ok := jsonlex.JSNumber(rawTok); ok && pl.lateTokNums[v] > 0 {
					drop = true
					break
				}
			}
			if key, ok := pl.tokens[tok]; ok && pl.p.ResetOnProgress {
				if d := pl.calls[key]; d != nil {
					// Never past d.last: a server sending progress for ever would
					// keep the call open for ever.
					d.due = time.Now().Add(pl.p.CallTimeout)
					if d.due.After(d.last) {
						d.due = d.last
					}
				}
			}
		}
		pl.up.hide = append(pl.up.hide, drop)
		if drop {
			dropped++
		}
	}
	pl.count()
	pl.mu.Unlock()
	if len(pl.release) > 0 {
		go r.sendHeld(pl.release)
		pl.release = nil
	}
	if dropped == 0 && len(pl.up.cuts) == 0 {
		if answerID != nil && msg[jsonlex.SkipSpace(msg, 0)] == '{' {
			if out := pl.p.Answer(answerID, msg); out != nil {
				// r.upLx still describes msg: interception is given it whole.
				pl.whole = msg
				return out
			}
		}
		return msg
	}
	if dropped > 0 {
		start := jsonlex.SkipSpace(msg, 0)
		if msg[start] == '{' {
			r.log.Debug("dropped a message for a call past its deadline")
			r.flushHost()
			return nil
		}
		cuts, ok := batchCuts(msg, start, objs, pl.up.hide)
		if !ok {
			r.flushHost()
			return nil
		}
		// The late answers' cuts and the tool cuts, in order: a tool cut lies inside
		// an element that is kept.
		pl.up.cuts = mergeCuts(pl.up.cuts, cuts)
	}
	out := toolpolicy.Cut(msg, pl.up.cuts)
	r.upLx.Lex(out)
	return out
}

// flushHost writes out what the upstream pump held for the host (it holds a message
// when the next is already read): the next message, dropped, will not. A failed
// write fails the pump's next one too, which says so.
func (r *Relay) flushHost() {
	if err := r.hostOut.Flush(); err != nil {
		r.log.Debug("could not write to the host", "err", err)
	}
}

// batchCuts are the cuts that take out of the batch at msg[start] the elements that
// are objs[i] with drop[i] set. ok is false when it is not a batch the lexer follows,
// or no element is left.
func batchCuts(msg []byte, start int, objs []jsonlex.Obj, drop []bool) (cuts []jsonlex.Span, ok bool) {
	elems, ok := jsonlex.Elements(msg, start)
	if !ok {
		return nil, false
	}
	remove := make([]bool, len(elems))
	kept := len(elems)
	for i, j := 0, 0; i < len(elems) && j < len(objs); i++ {
		for j < len(objs) && objs[j].Start < elems[i].Start {
			j++
		}
		if j < len(objs) && objs[j].Start == elems[i].Start && drop[j] {
			remove[i] = true
			kept--
		}
	}
	if kept == 0 {
		return nil, false
	}
	return toolpolicy.ElementCuts(elems, remove, nil), true
}

// mergeCuts merges two sorted lists of disjoint cuts that do not overlap each other.
func mergeCuts(a, b []jsonlex.Span) []jsonlex.Span {
	out := make([]jsonlex.Span, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || len(a) > 0 && a[0].Start < b[0].Start {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// refuseOwn answers a request of the proxy's own, msg (a replay dispatch), that calls
// a hidden tool, as the host's are answered: it never reaches the server, and
// interception sees the request and its answer. ok is false for any other request.
func (r *Relay) refuseOwn(msg []byte, req Request) (answer []byte, ok bool) {
	if r.pol == nil || req.Method != "tools/call" || !r.pol.p.Filters() {
		return nil, false
	}
	var lx jsonlex.Line
	lx.Lex(msg)
	if len(lx.Objs) != 1 {
		return nil, false
	}
	o := &lx.Objs[0]
	hidden, nameLit := r.hiddenCall(msg, o)
	if !hidden {
		return nil, false
	}
	answer = toolpolicy.UnknownTool(msg[o.ID.Start:o.ID.End], nameLit)
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
	return answer, true
}
