package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"hash"
	"sort"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// A Reducer is Report for a value that arrives in fragments and is too big to hold:
// it keeps a bounded stand-in of the value, and Report renders the stand-in into the
// report Report would give for the whole value, byte for byte.
//
// The stand-in is the value's JSON text with what no pass of the renderer shows taken
// out, and a note of what was there: a long string keeps its first part (the most any
// pass shows, with the margin the secret rules look past it) and the length and sha256
// of its decoded text; an array keeps 100 items and an object 1000 members (16 more
// for the look-ahead for "type" and "name") and a container nested 32 deep its first
// 120 bytes, then the rest of it is counted and hashed; every container whose text
// changed keeps its count and sha256. A long string whose decoded text starts like
// JSON is read, as it arrives, by a Reducer of its own, so that the JSON it holds is
// shown and redacted as JSON whatever its size, as the renderer does up to innerMax.
//
// What it holds is bounded by maxStandIn, whatever the value's size. A value whose
// stand-in would outgrow it (a million short members nested ten deep, say, or bytes
// that are not JSON at all after the first megabyte) gets the summary marker for
// the whole text instead: nothing of it is shown, so nothing can leak; that is the one
// case where the report differs from Report's.
//
// The zero value is ready. Write never fails. Report ends the value; Reset starts the
// next one. It is not safe for concurrent use.
type Reducer struct {
	red reducer
	sh  reduceShared
	z   Redactor
}

// maxStandIn bounds the bytes a Reducer holds for one value, its embedded JSON
// included: sixteen default budgets.
const maxStandIn = 16 * DefaultBudget

// ReducerHolds is about the most a Reducer keeps of a value once it has read it (its
// stand-ins, and the first bytes kept in case it is not JSON): what a reduction
// waiting to be reported costs in memory.
const ReducerHolds = maxStandIn + plainKeep

// plainKeep is how much of the value's first bytes is kept for the case it is not JSON
// (rendered as text then: the most a pass shows of a string, its margin, and more).
const plainKeep = 4096

// maxValidDepth bounds the nesting of embedded JSON the validator follows (its stack
// is a bit a level).
const maxValidDepth = 1 << 16

const (
	// stubAt is the decoded length from which a string is kept as a stand-in: more
	// than the longest part any pass decodes (levels[0].str + margin), so that the
	// renderer finds it incomplete, as it would the whole.
	stubAt = 2048 + margin + 32
	// keepItems and keepMembers are what the widest pass shows of an array and an
	// object; lookahead reads lookaheadMembers more of an object.
	keepItems   = 100
	keepMembers = 1000
	// keepDepth is the widest pass's depth: a container this deep is cut whole.
	keepDepth = 32
	// maxFrames bounds the containers a reducer follows one by one (past keepDepth
	// only those inside a container shorter than markerRoom).
	maxFrames = keepDepth + markerRoom + 8
	// maxEmbed bounds how many levels of JSON held in strings are followed.
	maxEmbed = maxNested
)

type reduceShared struct {
	size int  // bytes held by all the reducers of one value
	over bool // the stand-in outgrew maxStandIn: the report is the summary
}

// Write adds the next bytes of the value.
func (r *Reducer) Write(p []byte) (int, error) {
	if r.red.sh == nil {
		r.red.sh = &r.sh
		r.red.top = true
	}
	r.red.write(p)
	return len(p), nil
}

// Reset forgets the value, keeping the buffers that are not too big.
func (r *Reducer) Reset() {
	out := r.red.out[:0]
	if cap(out) > maxKept {
		out = nil
	}
	pre := r.red.pre[:0]
	r.red = reducer{out: out, pre: pre}
	r.sh = reduceShared{}
}

// Retained is how many bytes the Reducer holds for the value so far (its stand-in,
// notes and embedded JSON): what maxStandIn bounds.
func (r *Reducer) Retained() int { return r.sh.size + cap(r.red.pre) }

// Report returns what the package's Report returns for the whole value written: see
// the type's comment for the one case where it does not. The bytes are the caller's.
func (r *Reducer) Report(budget int) (out json.RawMessage, clipped bool) {
	if r.red.sh == nil {
		r.Write(nil)
	}
	if budget <= 0 {
		budget = DefaultBudget
	}
	t := &r.red
	if r.sh.over {
		return summaryOf("text", t.total, sum(t.plainH), budget), true
	}
	d := t.doc()
	pd := &doc{src: t.pre, plain: true}
	if t.total > int64(len(t.pre)) {
		n, s := t.total, sum(t.plainH)
		pd.digests = map[int]digest{0: {n, s}}
		pd.red = &reduced{plainN: n, plainSum: s}
	}
	out, clipped = r.z.reportDoc(d, pd, budget)
	out = bytes.Clone(out)
	r.z.trim()
	return out, clipped
}

// reduced is what a stand-in doc knows of the value it stands for.
type reduced struct {
	holes    map[int]uint8 // where a pass showing more than was kept must give way
	stubPos  []int         // where each cut part starts in the stand-in, in order
	cum      []int64       // cum[i] is how many bytes the cuts before stubPos[i] took out
	plainN   int64         // a plain doc's whole length and sha256
	plainSum [32]byte
}

// shrink is how many bytes of the original the cuts in src[p:e] took out.
func (x *reduced) shrink(p, e int) int64 {
	i := sort.SearchInts(x.stubPos, p)
	j := sort.SearchInts(x.stubPos, e)
	return x.cum[j] - x.cum[i]
}

// reducer is one JSON text being reduced: the value, or the text a string holds.
type reducer struct {
	sh    *reduceShared
	top   bool // the value itself (not embedded JSON)
	base  int  // the renderer's depth of this text's value
	embed int  // levels of embedding above
	val   jsonlex.Validator
	dead  bool  // embedded text that turned out not to be JSON
	probe bool  // embedded too deep to follow: only looks whether it is JSON
	held  int   // bytes of sh.size this reducer accounts for
	extra int   // of which the embedded JSON kept in stubs
	next  int64 // the first pos at which watch may have to cut

	out    []byte // the stand-in
	pos    int64  // bytes of the original read
	stubs  []stub
	exts   []extRec
	holes  []holeRec
	frames []frame
	nLive  int // frames[:nLive] hash what they read
	flushd int // out[:flushd] is in the live frames' hashes

	mode    uint8
	started bool

	// a string in keep mode
	inStr  bool
	esc    bool
	hex    uint8
	lower  int // a lower bound of its decoded length
	strPos int // its quote in out

	t  strTail
	sk skipState

	// the value itself
	plainH hash.Hash
	pre    []byte
	total  int64
	freed  bool
}

const (
	mKeep uint8 = iota // copying into the stand-in
	mTail              // the rest of a long string: decoded and hashed
	mSkip              // the rest of a container: counted and hashed
)

type frame struct {
	obj     bool
	pos     int   // its bracket in out
	real    int64 // its bracket in the original
	h       hash.Hash
	commas  int
	seen    bool
	await   bool  // the next non-space byte starts an item
	itemPos int   // where the current item starts, in out and in the original
	itemRl  int64 //
	tail    int64 // where item keepItems (member keepMembers) starts, or -1
	over    bool  // the tail is too long to show: cut at the next item that may be
	deep    bool  // nested keepDepth deep: cut whole once longer than markerRoom
}

// stub is a cut part of the stand-in: a string's tail, a container's.
type stub struct {
	pos, end int   // in out
	delta    int64 // bytes of the original it took out
	str      bool
	n        int64
	sum      [32]byte
	inner    *doc
	held     int // what inner holds
}

type holeRec struct {
	pos  int
	kind uint8
}

type extRec struct {
	pos int
	x   extent
}

type strTail struct {
	on    bool
	bs    bool  // the last byte read was an escaping backslash
	raw   int64 // bytes of its body
	kept  int   // bytes of the body in out
	dec   strDecoder
	child *reducer
}

type skipState struct {
	fi    int // the frame whose rest is cut
	depth int
	inStr bool
	bs    bool
	cut   int // the cut's start in out and in the original
	cutRl int64
	synth int // bytes written in its place
}

func (t *reducer) write(p []byte) {
	if t.top {
		if t.plainH == nil {
			t.plainH = sha256.New()
			t.next = noWatch
		}
		t.plainH.Write(p)
		t.total += int64(len(p))
		if len(t.pre) < plainKeep {
			if t.pre == nil {
				t.pre = make([]byte, 0, plainKeep)
			}
			t.pre = append(t.pre, p[:min(len(p), plainKeep-len(t.pre))]...)
		}
	}
	if t.sh.over && t.top && !t.freed {
		t.freed = true
		t.drop()
	}
	if t.dead || t.sh.over {
		return
	}
	if t.probe {
		if w := jsonlex.SkipSpace(p, 0); w < len(p) {
			if p[w] == '{' || p[w] == '[' {
				t.sh.over = true // JSON held deeper than followed: never shown as text
			}
			t.drop()
		}
		return
	}
	if !t.top {
		t.val.Write(p)
		if t.val.Depth() > maxValidDepth {
			t.sh.over = true // more nesting than followed: given up on, not judged
			return
		}
		if t.val.Broken() {
			t.drop()
			return
		}
	}
	for len(p) > 0 && !t.dead && !t.sh.over {
		var k int
		switch t.mode {
		case mKeep:
			k = t.keepBytes(p)
		case mTail:
			k = t.tailBytes(p)
		case mSkip:
			k = t.skipBytes(p)
		}
		p = p[k:]
		t.account()
	}
}

// account keeps sh.size up to date with what this reducer holds.
func (t *reducer) account() {
	h := cap(t.out) + 64*(len(t.stubs)+len(t.exts)+len(t.holes)) + t.t.dec.held() + t.extra
	t.sh.size += h - t.held
	t.held = h
	if t.sh.size > maxStandIn {
		t.sh.over = true
	}
}

// drop ends an embedded text that is not JSON: it is shown as text, so nothing of it
// is needed.
func (t *reducer) drop() {
	t.dead = true
	if t.t.child != nil {
		t.t.child.drop()
		t.t.child = nil
	}
	t.sh.size -= t.held
	t.held = 0
	t.out, t.stubs, t.exts, t.holes, t.frames = nil, nil, nil, nil, nil
	t.val, t.extra = jsonlex.Validator{}, 0
}

func (t *reducer) keepBytes(p []byte) int {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if t.inStr {
			if !t.esc && t.hex == 0 && t.lower >= stubAt && c != '"' {
				t.startTail()
				return i
			}
			if !t.esc && t.hex == 0 {
				j, lim := i, min(len(p), i+stubAt-t.lower)
				for j < lim && p[j] != '"' && p[j] != '\\' {
					j++
				}
				if j > i {
					t.out = append(t.out, p[i:j]...)
					t.lower += j - i
					t.pos += int64(j - i)
					i = j - 1
					if t.watch() {
						return j
					}
					continue
				}
			}
			t.out = append(t.out, c)
			t.pos++
			switch {
			case t.esc:
				t.esc = false
				t.lower++
				if c == 'u' {
					t.hex = 4
				}
			case c == '"':
				t.inStr = false
				t.endString()
			case c == '\\':
				t.esc, t.hex = true, 0
			case t.hex > 0:
				t.hex--
			default:
				t.lower++
			}
			if t.watch() {
				return i + 1
			}
			continue
		}
		if jsonlex.IsSpace(c) {
			t.out = append(t.out, c)
			t.pos++
			continue
		}
		if c != ',' && c != '}' && c != ']' {
			if t.itemStart() {
				return i
			}
		}
		switch c {
		case '"':
			t.inStr, t.esc, t.hex, t.lower, t.strPos = true, false, 0, 0, len(t.out)
			t.out = append(t.out, c)
			t.pos++
		case '{', '[':
			if len(t.frames) == maxFrames {
				t.sh.over = true
				return i
			}
			depth := t.base + len(t.frames)
			deep := depth >= keepDepth
			for k := range t.frames {
				deep = deep && !t.frames[k].deep
			}
			t.frames = append(t.frames, frame{obj: c == '{', pos: len(t.out), real: t.pos, await: true, tail: -1, deep: deep})
			if deep {
				t.next = min(t.next, t.pos+markerRoom)
			}
			t.out = append(t.out, c)
			t.pos++
		case '}', ']':
			t.out = append(t.out, c)
			t.pos++
			if len(t.frames) > 0 {
				t.closeFrame()
			}
		case ',':
			t.out = append(t.out, c)
			t.pos++
			if n := len(t.frames); n > 0 {
				f := &t.frames[n-1]
				f.commas++
				f.await = true
			}
		default:
			t.out = append(t.out, c)
			t.pos++
		}
		if t.watch() {
			return i + 1
		}
	}
	return len(p)
}

// itemStart notes a non-space byte at the level of the innermost container (or of the
// text): the start of an item when one is awaited. It says when the item is the start
// of a tail that is cut: the byte is then read in skip mode.
func (t *reducer) itemStart() bool {
	n := len(t.frames)
	if n == 0 {
		t.started = true
		return false
	}
	f := &t.frames[n-1]
	f.seen = true
	if !f.await {
		return false
	}
	f.await = false
	item := f.commas
	if item == t.keepOf(f) {
		f.tail = t.pos
		t.next = min(t.next, t.pos+markerRoom)
	}
	if f.over && item >= t.holeOf(f) {
		t.cut(n-1, len(t.out), t.pos, f.obj)
		return true
	}
	f.itemPos, f.itemRl = len(t.out), t.pos
	return false
}

func (t *reducer) keepOf(f *frame) int {
	if f.obj {
		return keepMembers
	}
	return keepItems
}

// holeOf is the first item that may be cut from a container's tail.
func (t *reducer) holeOf(f *frame) int {
	if f.obj {
		return keepMembers + lookaheadMembers
	}
	return keepItems
}

// watch cuts what has grown too long to be shown: a tail past markerRoom, a deep
// container past markerRoom. It says when the reducer went to skip mode.
func (t *reducer) watch() bool {
	if t.pos < t.next {
		return false
	}
	defer t.rewatch()
	for i := range t.frames {
		f := &t.frames[i]
		switch {
		case f.deep && t.pos-f.real >= markerRoom:
			t.cut(i, f.pos+1, f.real+1, false)
			t.holes = append(t.holes, holeRec{f.pos, holeWhole})
			return true
		case f.tail >= 0 && !f.over && t.pos-f.tail >= markerRoom:
			if !f.await && f.commas >= t.holeOf(f) {
				t.cut(i, f.itemPos, f.itemRl, f.obj)
				return true
			}
			f.over = true
		}
	}
	return false
}

// noWatch is next when nothing is watched.
const noWatch = 1<<63 - 1

func (t *reducer) rewatch() {
	t.next = noWatch
	for i := range t.frames {
		f := &t.frames[i]
		if f.deep {
			t.next = min(t.next, f.real+markerRoom)
		}
		if f.tail >= 0 && !f.over {
			t.next = min(t.next, f.tail+markerRoom)
		}
	}
}

// cut makes the rest of frame fi, from out[at] (the original's byte real), a cut
// part: what was kept of it goes, a placeholder item stands in its place (for a
// tail: a pass that reaches it gives way), and the rest is read in skip mode.
func (t *reducer) cut(fi, at int, real int64, obj bool) {
	t.live(fi)
	t.sk = skipState{fi: fi, depth: len(t.frames) - 1 - fi, inStr: t.inStr, bs: t.inStr && t.esc, cut: at, cutRl: real}
	t.frames = t.frames[:fi+1]
	t.inStr = false
	t.truncate(at)
	if !t.frames[fi].deep {
		t.holes = append(t.holes, holeRec{at, holeTail})
		if obj {
			t.out = append(t.out, `"":0`...)
		} else {
			t.out = append(t.out, '0')
		}
	}
	t.sk.synth = len(t.out) - at
	t.flushd = len(t.out)
	t.mode = mSkip
	t.rewatch()
}

// truncate drops out[at:] and the notes about it.
func (t *reducer) truncate(at int) {
	t.out = t.out[:at]
	for len(t.stubs) > 0 && t.stubs[len(t.stubs)-1].pos >= at {
		t.extra -= t.stubs[len(t.stubs)-1].held
		t.stubs = t.stubs[:len(t.stubs)-1]
	}
	for len(t.exts) > 0 && t.exts[len(t.exts)-1].pos >= at {
		t.exts = t.exts[:len(t.exts)-1]
	}
	for len(t.holes) > 0 && t.holes[len(t.holes)-1].pos >= at {
		t.holes = t.holes[:len(t.holes)-1]
	}
}

// live makes frames[:fi+1] hash what they read: each catches up on its text so far,
// which is in out unchanged (a frame is not live only while nothing in it was cut).
func (t *reducer) live(fi int) {
	t.flush()
	for i := t.nLive; i <= fi; i++ {
		f := &t.frames[i]
		f.h = sha256.New()
		f.h.Write(t.out[f.pos:])
	}
	t.nLive = max(t.nLive, fi+1)
	t.flushd = len(t.out)
}

// flush feeds the live frames what was copied to out since the last time.
func (t *reducer) flush() {
	if t.flushd < len(t.out) {
		for i := 0; i < t.nLive; i++ {
			t.frames[i].h.Write(t.out[t.flushd:])
		}
	}
	t.flushd = len(t.out)
}

// feed gives the live frames bytes of the original that are not in out.
func (t *reducer) feed(b []byte) {
	t.flush()
	for i := 0; i < t.nLive; i++ {
		t.frames[i].h.Write(b)
	}
}

func (t *reducer) closeFrame() {
	n := len(t.frames) - 1
	f := &t.frames[n]
	if n < t.nLive {
		t.flush()
		count := f.commas
		if f.seen {
			count++
		}
		t.exts = append(t.exts, extRec{pos: f.pos, x: extent{end: len(t.out), count: count, sum: sum(f.h)}})
		t.nLive = n
	}
	t.frames = t.frames[:n]
	if f.deep || f.tail >= 0 {
		t.rewatch()
	}
}

// startTail makes the string being copied a stand-in: what is in out is its kept
// part; the rest is decoded, hashed and, if it may be JSON, reduced as it comes.
func (t *reducer) startTail() {
	if n := len(t.frames); n > 0 {
		t.live(n - 1)
	}
	kept := t.out[t.strPos+1:]
	t.t = strTail{on: true, kept: len(kept), raw: int64(len(kept))}
	t.t.dec.start()
	t.t.child = &reducer{sh: t.sh, base: t.base + len(t.frames), embed: t.embed + 1, probe: t.embed >= maxEmbed, next: noWatch}
	t.t.dec.child = t.t.child
	t.t.dec.write(kept)
	t.mode = mTail
}

func (t *reducer) tailBytes(p []byte) int {
	q, bs := stringEnd(p, t.t.bs)
	body := p
	if q >= 0 {
		body = p[:q]
	}
	t.feed(body)
	t.t.raw += int64(len(body))
	t.pos += int64(len(body))
	if t.t.child != nil && t.t.raw > innerMax {
		t.t.child.drop()
		t.t.child, t.t.dec.child = nil, nil
	}
	t.t.dec.write(body)
	if q < 0 {
		t.t.bs = bs
		return len(p)
	}
	// the closing quote is copied in keep mode, as a short string's is
	t.mode, t.esc, t.hex = mKeep, false, 0
	return q
}

// endString notes a string just closed in keep mode.
func (t *reducer) endString() {
	if !t.t.on {
		return
	}
	st := &t.t
	st.dec.finish()
	var inner *doc
	held := 0
	if c := st.child; c != nil {
		if !c.dead && !c.probe && st.dec.strict && c.val.Valid() && c.mode == mKeep && len(c.frames) == 0 {
			inner = c.doc()
			// from now on this reducer accounts for what the child holds
			held = c.held
			t.sh.size -= held
			t.extra += held
		} else {
			c.drop()
		}
	}
	t.stubs = append(t.stubs, stub{pos: t.strPos, end: len(t.out), delta: st.raw - int64(st.kept), str: true, n: st.dec.n, sum: sum(st.dec.h), inner: inner, held: held})
	t.t = strTail{dec: strDecoder{small: st.dec.small[:0], h: st.dec.h}}
}

func (t *reducer) skipBytes(p []byte) int {
	s := &t.sk
	f := &t.frames[s.fi]
	for i := 0; i < len(p); i++ {
		if s.inStr {
			q, bs := stringEnd(p[i:], s.bs)
			if q < 0 {
				s.bs = bs
				break
			}
			i += q
			s.inStr = false
			continue
		}
		c := p[i]
		if !structural[c] {
			if s.depth == 0 && c > ' ' {
				f.seen = true
			}
			continue
		}
		switch c {
		case '"':
			s.inStr, s.bs = true, false
			if s.depth == 0 {
				f.seen = true
			}
		case '{', '[':
			if s.depth == 0 {
				f.seen = true
			}
			s.depth++
		case ',':
			if s.depth == 0 {
				f.commas++
			}
		case '}', ']':
			if s.depth > 0 {
				s.depth--
				continue
			}
			t.feed(p[:i])
			t.pos += int64(i)
			t.stubs = append(t.stubs, stub{pos: s.cut, end: s.cut + s.synth, delta: t.pos - s.cutRl - int64(s.synth)})
			t.mode = mKeep
			return i
		}
	}
	t.feed(p)
	t.pos += int64(len(p))
	return len(p)
}

// stringEnd returns the index of the quote that ends a string whose body goes on in
// p, or -1; bs says the byte before p was a backslash escaping p[0]. It also returns
// whether p's last byte escapes the byte after it.
func stringEnd(p []byte, bs bool) (int, bool) {
	i := 0
	for {
		j := bytes.IndexByte(p[i:], '"')
		if j < 0 {
			return -1, escapesNext(p, bs)
		}
		q := i + j
		n := 0
		for k := q - 1; k >= 0 && p[k] == '\\'; k-- {
			n++
		}
		if n == q && bs {
			n++
		}
		if n%2 == 0 {
			return q, false
		}
		i = q + 1
	}
}

// escapesNext says whether the run of backslashes ending p is odd (counting the
// escape carried in by bs when the run is all of p).
func escapesNext(p []byte, bs bool) bool {
	n := 0
	for k := len(p) - 1; k >= 0 && p[k] == '\\'; k-- {
		n++
	}
	if n == len(p) && bs {
		n++
	}
	return n%2 == 1
}

// doc is the stand-in as a doc for the renderer.
func (t *reducer) doc() *doc {
	d := &doc{src: t.out}
	if len(t.stubs) == 0 && len(t.exts) == 0 && len(t.holes) == 0 {
		return d
	}
	x := &reduced{holes: make(map[int]uint8, len(t.holes)), stubPos: make([]int, len(t.stubs)), cum: make([]int64, len(t.stubs)+1)}
	for _, h := range t.holes {
		x.holes[h.pos] |= h.kind
	}
	for i, s := range t.stubs {
		x.stubPos[i] = s.pos
		x.cum[i+1] = x.cum[i] + s.delta
		if s.str {
			if d.digests == nil {
				d.digests, d.inner = make(map[int]digest), make(map[int]*doc)
			}
			d.digests[s.pos] = digest{s.n, s.sum}
			d.inner[s.pos] = s.inner
		}
	}
	if len(t.exts) > 0 {
		d.extents = make(map[int]extent, len(t.exts))
		for _, e := range t.exts {
			d.extents[e.pos] = e.x
		}
	}
	d.red = x
	return d
}

// strDecoder is digestString fed in fragments: the decoded length and sha256 of a
// string's body, with what the decoded text is given to (the reducer of the JSON it
// may hold) and whether it decodes strictly (jsonlex.AppendUnescaped's rules).
type strDecoder struct {
	h      hash.Hash
	n      int64
	strict bool
	pend   [12]byte
	np     int
	ebuf   [8]byte
	small  []byte // decoded bytes not yet hashed: escapes come a few bytes at a time
	child  *reducer
}

func (d *strDecoder) start() {
	if d.h == nil {
		d.h = sha256.New()
	} else {
		d.h.Reset()
	}
	d.n, d.strict, d.np = 0, true, 0
	if d.small == nil {
		d.small = make([]byte, 0, 1024)
	}
	d.small = d.small[:0]
}

func (d *strDecoder) held() int { return cap(d.small) }

func (d *strDecoder) write(b []byte) {
	for len(b) > 0 {
		if d.np > 0 {
			k := copy(d.pend[d.np:], b)
			d.np += k
			b = b[k:]
			if d.np < len(d.pend) {
				return
			}
			d.escapes(false)
			continue
		}
		k := bytes.IndexByte(b, '\\')
		if k < 0 {
			d.plain(b)
			return
		}
		d.plain(b[:k])
		b = b[k:]
		if len(b) >= len(d.pend) {
			// the whole escape is here (AppendEscape reads at most a \u pair)
			b = b[d.escape(b):]
			continue
		}
		k = copy(d.pend[:], b)
		d.np = k
		b = b[k:]
		if d.np == len(d.pend) {
			d.escapes(false)
		}
	}
}

// escapes decodes what is pending: an escape once it is whole (a \u pair is twelve
// bytes) or the body ended, and the plain bytes after it.
func (d *strDecoder) escapes(final bool) {
	for d.np > 0 {
		pend := d.pend[:d.np]
		if pend[0] != '\\' {
			k := bytes.IndexByte(pend, '\\')
			if k < 0 {
				k = len(pend)
			}
			d.plain(pend[:k])
			d.shift(k)
			continue
		}
		if d.np < len(d.pend) && !final {
			return
		}
		d.shift(d.escape(pend))
	}
}

// escape decodes the escape b starts with (b holds all of it, or ends where the body
// does) and returns its length; an invalid one stands for its backslash.
func (d *strDecoder) escape(b []byte) int {
	out, next, ok := jsonlex.AppendEscape(d.ebuf[:0], b, 0)
	if !ok {
		out, next = append(d.ebuf[:0], '\\'), 1
		d.strict = false
	}
	d.emit(out)
	return next
}

func (d *strDecoder) shift(k int) {
	copy(d.pend[:], d.pend[k:d.np])
	d.np -= k
}

func (d *strDecoder) plain(b []byte) {
	// Strictness only matters to the JSON the string may hold.
	if d.strict && d.child != nil {
		for _, c := range b {
			if c < 0x20 {
				d.strict = false
				break
			}
		}
	}
	d.emit(b)
}

func (d *strDecoder) emit(b []byte) {
	if len(b) == 0 {
		return
	}
	d.n += int64(len(b))
	if len(d.small)+len(b) <= cap(d.small) {
		d.small = append(d.small, b...)
		return
	}
	d.flushSmall()
	if len(b) < cap(d.small)/2 {
		d.small = append(d.small, b...)
		return
	}
	d.out(b)
}

func (d *strDecoder) flushSmall() {
	if len(d.small) > 0 {
		d.out(d.small)
		d.small = d.small[:0]
	}
}

func (d *strDecoder) out(b []byte) {
	d.h.Write(b)
	if c := d.child; c != nil {
		if !d.strict {
			c.drop()
			d.child = nil
			return
		}
		if !c.started && !c.dead {
			if w := jsonlex.SkipSpace(b, 0); w < len(b) && b[w] != '{' && b[w] != '[' {
				c.drop()
				d.child = nil
				return
			}
		}
		c.write(b)
		if c.dead {
			d.child = nil
		}
	}
}

// finish decodes what is pending at the end of the body.
func (d *strDecoder) finish() {
	d.escapes(true)
	d.flushSmall()
}
