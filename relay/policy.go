package relay

import (
	"bytes"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/toolpolicy"
)

// ToolPolicy is the Hooks that enforce p, the tool policy (--ignore-tool,
// --allow-tool, --call-timeout, and what plugs into p's own hooks: the tool pins'
// block mode, the result budget); nil when p changes nothing, and the pumps then do
// not look. Each serves one relay.
func ToolPolicy(p *toolpolicy.Policy) *Hooks { return ToolPolicyCutting(p, nil) }

// ToolPolicyCutting is ToolPolicy with the long answers to the host's tools/call that
// p.Answer is asked for given, as they stream, to what cut returns for them (the
// result budget's budget.StreamCut; nil from it: read whole and given to p.Answer).
func ToolPolicyCutting(p *toolpolicy.Policy, cut func(id []byte) AnswerCut) *Hooks {
	pl := newPolicy(p)
	if pl == nil {
		return nil
	}
	h := &Hooks{Attach: pl.attach, FromHost: pl.fromHost, FromUpstream: pl.fromUpstream, FromProxy: pl.fromProxy}
	if cut != nil && p.Answer != nil {
		pl.cut = cut
		h.LongAnswer = pl.longAnswer
	}
	return h
}

// longAnswer is Hooks.LongAnswer: the answer of the raw id about to stream, when it
// is a noted call's that nothing else of the policy applies to, goes to pl.cut, and
// the call is settled as fromUpstream settles it. A late answer, or any while a list
// or a late call has a number id (which fromUpstream matches as a JavaScript host
// does), is read whole.
func (pl *policy) longAnswer(id []byte) AnswerCut {
	if pl.watching.Load() == 0 {
		return nil
	}
	k := jsonlex.IDKey(id)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if _, ok := pl.answers[k]; !ok || len(pl.listNums)+len(pl.lateNums) > 0 {
		return nil
	}
	if _, ok := pl.late[k]; ok {
		return nil
	}
	if _, ok := pl.lists[k]; ok {
		return nil
	}
	c := pl.cut(id)
	if c == nil {
		return nil
	}
	delete(pl.answers, k)
	pl.count()
	return &policyCut{pl: pl, key: k, c: c}
}

// policyCut is the AnswerCut of a long answer to a noted call: the call's deadline
// runs on while the answer streams (a server stalling in it is still cut off at
// --call-timeout), and an answer that ends after it is dropped, as fromUpstream drops
// a late one.
type policyCut struct {
	pl  *policy
	key string
	c   AnswerCut
}

func (pc *policyCut) Write(p []byte) { pc.c.Write(p) }

func (pc *policyCut) End(ok bool) []byte {
	out := pc.c.End(ok) // (its spill file is settled either way)
	pl := pc.pl
	pl.mu.Lock()
	_, late := pl.late[pc.key]
	switch {
	case late && !ok:
		// Not a message (past --max-message, cut off by the server's end, not
		// JSON): the Conn stands in for the line with an error answer of its id
		// next, the late answer fromUpstream drops. Forgotten here, the call was
		// not late any more and that error reached the host after its timeout
		// error: two answers to one request.
	case late:
		pl.forgetLate(pc.key)
		// The requests of its id that waited for it go now.
		for _, h := range pl.held[pc.key] {
			h.timer.Stop()
			pl.heldN--
			pl.heldBytes -= len(h.msg)
			pl.release = append(pl.release, h)
		}
		delete(pl.held, pc.key)
	default:
		if d, found := pl.calls[pc.key]; found {
			d.timer.Stop()
			pl.forget(d)
		}
	}
	pl.count()
	pl.mu.Unlock()
	if len(pl.release) > 0 { // (the upstream pump's, as End runs on it)
		go pl.sendHeld(pl.release)
		pl.release = nil
	}
	if late {
		pl.log.Debug("dropped a long answer for a call past its deadline")
		return nil
	}
	return out
}

// policy enforces a toolpolicy.Policy through the relay's Hooks: it knows which of
// the host's requests in flight are tools/list (whose answers lose the hidden tools)
// and tools/call with a deadline (answered in the server's place when it passes,
// their late answers dropped), and refuses the calls of hidden tools before they
// reach the server.
type policy struct {
	p    *toolpolicy.Policy
	port *Port // the relay's (attach)
	log  *slog.Logger

	// refused are the answers to hidden calls of the host message being forwarded,
	// which the relay writes once its send lock is let go (Hooks.FromHost). It and
	// host are the host pump's only; up is the upstream pump's: the two run at once.
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
	// cut takes the long answers of answers as they stream (ToolPolicyCutting).
	cut func(id []byte) AnswerCut
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

// attach is Hooks.Attach: pl acts on the relay through p.
func (pl *policy) attach(p *Port) {
	pl.port, pl.log = p, p.Logger()
}

func (pl *policy) count() {
	pl.watching.Store(int64(len(pl.lists) + len(pl.calls) + len(pl.late) + len(pl.answers)))
	pl.holding.Store(int64(len(pl.late) + len(pl.held)))
}

// fromHost is Hooks.FromHost: it applies the policy to the host message msg, which lx
// describes, under the relay's send lock: the calls of hidden tools are taken out of
// it (answers says what the host gets for them), the tools/list requests left are
// noted, and the tools/call left get their deadline. It returns what is left to
// forward, lexed into lx; nil for nothing.
func (pl *policy) fromHost(msg []byte, lx *jsonlex.Line) (out []byte, answers [][]byte) {
	pl.refused = pl.refused[:0] // written and cleared by the relay
	objs := lx.RPC()
	nHidden := 0
	pl.host.hide = pl.host.hide[:0]
	for i := range objs {
		o := &objs[i]
		hidden := false
		if o.ID.End != 0 && o.Method.End != 0 && pl.p.Answer != nil && pl.watching.Load() > 0 && !isMethod(msg, o, "tools/call") {
			// A request of another method reusing the id of a call noted for
			// Answer (one the relay answered): its answer is not the call's.
			pl.noteAnswer(msg[o.ID.Start:o.ID.End], false)
		}
		switch {
		case o.Method.End == 0:
		case isMethod(msg, o, "tools/call"):
			var nameLit []byte
			if hidden, nameLit = pl.hiddenCall(msg, o); hidden {
				if o.ID.End != 0 {
					pl.refused = append(pl.refused, pl.p.Refusal(msg[o.ID.Start:o.ID.End], nameLit))
				}
			} else if o.ID.End != 0 && pl.holding.Load() > 0 && pl.holdIfLate(msg, o) {
				hidden = true // held: cut out of what goes now
			} else if o.ID.End != 0 {
				if pl.p.CallTimeout > 0 {
					pl.startDeadline(msg, o)
				}
				if pl.p.Answer != nil {
					pl.noteAnswer(msg[o.ID.Start:o.ID.End], true)
				}
			}
		case o.ID.End != 0 && pl.holding.Load() > 0 && pl.holdIfLate(msg, o):
			hidden = true
		case o.ID.End != 0 && pl.p.Filters() && isMethod(msg, o, "tools/list"):
			pl.noteList(msg[o.ID.Start:o.ID.End], jsonlex.Get(o.Fields(msg).Params, "cursor") != nil)
		case o.ID.End == 0 && pl.holding.Load() > 0 && isMethod(msg, o, "notifications/cancelled"):
			pl.cancelHeld(jsonlex.Get(o.Fields(msg).Params, "requestId"))
		}
		pl.host.hide = append(pl.host.hide, hidden)
		if hidden {
			nHidden++
		}
	}
	if nHidden == 0 {
		return msg, pl.refused
	}
	start := jsonlex.SkipSpace(msg, 0)
	if nHidden == len(objs) && msg[start] == '{' {
		// The message is the hidden call: nothing goes to the server.
		return nil, pl.refused
	}
	// A batch: its hidden calls are cut out of it, and the rest goes (none of it, when
	// it is not a batch the lexer follows: it found the objects all the same).
	cuts, ok := batchCuts(msg, start, objs, pl.host.hide)
	if !ok || msg[start] != '[' {
		return nil, pl.refused
	}
	pl.host.cuts = cuts
	out = toolpolicy.Cut(msg, pl.host.cuts)
	lx.Lex(out)
	return out, pl.refused
}

// noteAnswer notes the host's tools/call of the raw id (call) for the Answer hook,
// or forgets the id (a request of another method).
func (pl *policy) noteAnswer(id []byte, call bool) {
	k := jsonlex.IDKey(id)
	pl.mu.Lock()
	switch {
	case !call:
		delete(pl.answers, k)
	case len(pl.answers) < answersMax:
		pl.answers[k] = struct{}{}
	default:
		pl.log.Debug("too many tool calls in flight: an answer passes without the result budget", "id", string(id))
	}
	pl.count()
	pl.mu.Unlock()
}

// noteList notes the host's tools/list of the raw id as in flight; paged says it
// asked for a page after the first (a cursor).
func (pl *policy) noteList(raw []byte, paged bool) {
	pl.mu.Lock()
	if len(pl.lists) >= pl.sweepAt {
		for k := range pl.lists {
			if !pl.port.Awaited(k) {
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
func (pl *policy) holdIfLate(msg []byte, o *jsonlex.Obj) bool {
	raw := msg[o.ID.Start:o.ID.End]
	k := jsonlex.IDKey(raw)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if _, late := pl.late[k]; !late && len(pl.held[k]) == 0 {
		if n := numOf(raw); n.ok && pl.lateNums[n.v] > 0 {
			if len(pl.clash) >= heldMax {
				for c := range pl.clash {
					if !pl.port.Awaited(c) {
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
	h.timer = time.AfterFunc(heldFor(pl.p), func() { pl.giveUpHeld(h) })
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
func (pl *policy) giveUpHeld(h *heldReq) {
	pl.port.Answer(false, func() (answer, cancel []byte) {
		pl.mu.Lock()
		found := pl.unhold(h)
		pl.count()
		pl.mu.Unlock()
		if found {
			answer = heldAnswer(h.id, pl.p.CallTimeout)
		}
		return answer, nil
	})
}

// cancelHeld drops the last held request of the raw id, under the send lock: the
// host cancelled it, and waits for no answer.
func (pl *policy) cancelHeld(raw []byte) {
	if raw == nil {
		return
	}
	pl.mu.Lock()
	if hs := pl.held[jsonlex.IDKey(raw)]; len(hs) > 0 {
		pl.unhold(hs[len(hs)-1])
		pl.count()
	}
	pl.mu.Unlock()
}

// sendHeld sends the held requests hs, whose late call's answer came: on a goroutine
// of its own, as the host pump's messages are sent (Port.Send).
func (pl *policy) sendHeld(hs []*heldReq) {
	msgs, ids := make([][]byte, len(hs)), make([][]byte, len(hs))
	for i, h := range hs {
		msgs[i], ids[i] = h.msg, h.id
	}
	pl.port.Send(msgs, ids, func(i int, lx *jsonlex.Line) {
		h := hs[i]
		if objs := lx.RPC(); len(objs) == 1 {
			o := &objs[0]
			switch {
			case isMethod(h.msg, o, "tools/call"):
				if pl.p.CallTimeout > 0 {
					pl.startDeadline(h.msg, o)
				}
				if pl.p.Answer != nil {
					pl.noteAnswer(h.id, true)
				}
			case pl.p.Filters() && isMethod(h.msg, o, "tools/list"):
				pl.noteList(h.id, jsonlex.Get(o.Fields(h.msg).Params, "cursor") != nil)
			}
		}
	})
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
func (pl *policy) hiddenCall(msg []byte, o *jsonlex.Obj) (bool, []byte) {
	p := pl.p
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
func (pl *policy) startDeadline(msg []byte, o *jsonlex.Obj) {
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
	d.timer = time.AfterFunc(pl.p.CallTimeout, func() { pl.deadlinePassed(d) })
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
// for it (Port.Answer). Its answer, if it comes, is dropped.
func (pl *policy) deadlinePassed(d *deadline) {
	pl.port.Answer(true, func() (answer, cancel []byte) {
		pl.mu.Lock()
		if pl.calls[d.key] != d {
			pl.mu.Unlock()
			return nil, nil // answered, or its id reused
		}
		if left := time.Until(d.due); left > 0 {
			d.timer.Reset(left) // progress moved it
			pl.mu.Unlock()
			return nil, nil
		}
		pl.forget(d)
		// Still in flight only if nobody answered it: the server (its answer is on
		// its way), the relay for a server that went away, or the host's own cancel.
		inFlight := pl.port.Settle(d.id)
		if inFlight {
			pl.addLate(d.key, d.token, numOf(d.id), d.tokNum)
		}
		pl.count()
		pl.mu.Unlock()
		if !inFlight {
			return nil, nil
		}
		answer = toolpolicy.Timeout(d.id, pl.p.CallTimeout)
		if pl.p.ResetOnProgress && !d.due.Before(d.last) {
			answer = toolpolicy.TotalTimeout(d.id, pl.p.CallTimeout)
		}
		pl.log.Debug("a tool call passed its deadline", "id", string(d.id), "timeout", pl.p.CallTimeout)
		return answer, toolpolicy.Cancel(d.id, pl.p.CallTimeout)
	})
}

// fromUpstream is Hooks.FromUpstream: it applies the policy to msg from the
// upstream, which lx describes, before it goes to the host: an answer to a tools/list
// loses the hidden tools, a late answer to a call the relay answered at its deadline
// is dropped, an answer to a call goes through p.Answer (the result budget), and a
// progress notification moves its call's deadline (ResetOnProgress). It returns what
// is left, lexed into lx; nil for nothing; replaced when p.Answer replaced msg.
func (pl *policy) fromUpstream(msg []byte, lx *jsonlex.Line) (out []byte, replaced bool) {
	if pl.watching.Load() == 0 {
		return msg, false
	}
	objs := lx.RPC()
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
		go pl.sendHeld(pl.release)
		pl.release = nil
	}
	if dropped == 0 && len(pl.up.cuts) == 0 {
		if answerID != nil && msg[jsonlex.SkipSpace(msg, 0)] == '{' {
			if out := pl.p.Answer(answerID, msg); out != nil {
				// lx still describes msg: interception is given it whole (the report
				// keeps the original result).
				return out, true
			}
		}
		return msg, false
	}
	if dropped > 0 {
		start := jsonlex.SkipSpace(msg, 0)
		if msg[start] == '{' {
			pl.log.Debug("dropped a message for a call past its deadline")
			return nil, false
		}
		cuts, ok := batchCuts(msg, start, objs, pl.up.hide)
		if !ok {
			return nil, false
		}
		// The late answers' cuts and the tool cuts, in order: a tool cut lies inside
		// an element that is kept.
		pl.up.cuts = mergeCuts(pl.up.cuts, cuts)
	}
	out = toolpolicy.Cut(msg, pl.up.cuts)
	lx.Lex(out)
	return out, false
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

// fromProxy is Hooks.FromProxy: a request of the proxy's own, msg (a replay
// dispatch), that calls a hidden tool is answered as the host's are: it never reaches
// the server (and interception sees the request and its answer). nil for any other.
func (pl *policy) fromProxy(msg []byte) (answer []byte) {
	if !pl.p.Filters() {
		return nil
	}
	var lx jsonlex.Line
	lx.Lex(msg)
	if len(lx.Objs) != 1 {
		return nil
	}
	o := &lx.Objs[0]
	if o.Method.End == 0 || o.ID.End == 0 || !isMethod(msg, o, "tools/call") {
		return nil
	}
	hidden, nameLit := pl.hiddenCall(msg, o)
	if !hidden {
		return nil
	}
	return toolpolicy.UnknownTool(msg[o.ID.Start:o.ID.End], nameLit)
}
