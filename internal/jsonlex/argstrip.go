package jsonlex

import "bytes"

// ArgStrip is the correlation key's removal (intercept's strip: every member named
// key of params.arguments of a tools/call) for a line that is read and forwarded in
// pieces rather than whole: a host request too long to hold (docs/ARCHITECTURE.md,
// "Long messages"). Write scans each piece as it comes and hands on, through emit,
// every byte of it but the removed members and the separators the whole-line edit
// removes with them, in order; so the bytes emitted for a line are the bytes strip
// would return for it, for any split of the line into pieces.
//
// What a piece cannot settle yet is held, a few bytes: the key being read in the
// arguments object (until it is known to be the one removed or not), the separator
// after the last kept member there (which goes with a removed member that ends the
// object), and the head of each top-level object, up to its "params" member (the
// edit applies only to a tools/call, and the method must be known before the
// arguments pass). When the head holds no method saying tools/call by then — the
// method after the params, or none — the first object cannot be edited as it passes:
// Whole then says so, and from there on everything is held (Held returns it), for
// the caller to read the line whole. A later object on the same line (a line holds
// one value; this is for a peer that sends more) is edited in that case anyway: the
// key must never pass (Inexact: the whole line's edit leaves one that is not a call).
//
// It follows structure only, like the rest of the package, is never recursive, and
// holds at most a few hundred bytes besides the head (maxHead) and a separator
// (maxSep): input past those bounds is passed on as it is, with Inexact set (a
// separator of more than maxSep bytes of whitespace before a removed last member
// leaves its comma). Invalid JSON is passed on with every member it can see removed,
// where strip would pass it unchanged.
type ArgStrip struct {
	key    string
	keyMax int // the longest key literal that can still spell a name looked for
	emit   func([]byte)

	p    []byte // the piece being scanned
	run  int    // where in p the bytes not yet routed start
	mode stripMode

	depth      int
	fr         [maxStripDepth + 1]stripFrame // fr[d]: the container at depth d, up to maxStripDepth
	inStr, esc bool
	capture    bool   // the string being read is kept in cap (a key, or a method value)
	cap        []byte // a key's (or method value's) literal, up to capMax
	capMax     int    // keyMax, or maxTraceValue for a trace member's value
	capOver    bool
	quote      int // index in p of the next '"' at or after the scan, -1 none, -2 unknown

	objs    int  // top-level objects begun
	head    bool // the current top-level object's head is being held
	anyCall bool // a "method" member of it said tools/call, before its params
	strip   bool // its arguments lose the key
	whole   bool // the line is to be read whole: all of it is held
	hold    []byte

	// The arguments object being read (one at a time).
	kept, inRun bool   // a member was kept; the last members read were removed
	pend        []byte // the separator after the last kept member
	tail        []byte // what followed the last removed member

	// Inexact says the edit may differ from the whole line's: a bound was passed, or
	// an object after the first on the line (a batch's) reached its params with no
	// method saying tools/call before them, and was edited all the same.
	Inexact bool

	// What is kept of the first object for its report (Capture): the arguments go
	// to capArgs as they are emitted; the small members are kept here, bounded.
	capArgs   func(p []byte, begin bool)
	teeArgs   bool // the bytes emitted are the arguments'
	argsDepth int
	tee       teeKind // a small member's value is being kept
	teeDepth  int
	small     [teeCallID + 1]smallValue
	// trace are the traceparent and tracestate members of params._meta, kept apart
	// from it: a _meta past its bound is not kept, and a span still needs them.
	trace   [2]traceValue
	metaBuf []byte // Meta's object of them
}

// traceValue is the raw value of a trace member of params._meta: bad when it is no
// string or longer than maxTraceValue (the span's reading of the whole line then
// ignores it too), seen when the member was.
type traceValue struct {
	raw       []byte
	bad, seen bool
}

// traceMembers are the members of params._meta kept apart (ArgStrip.trace).
var traceMembers = [2]string{"traceparent", "tracestate"}

// maxTraceValue is the longest trace member's value kept, quotes included: as long
// as any a span reads from the whole line (a tracestate of 1024 bytes; a
// traceparent of at most 256).
const maxTraceValue = 1024

// teeKind is which small value of a call is being kept.
type teeKind uint8

const (
	teeNone   teeKind = iota
	teeName           // params.name
	teeMeta           // params._meta
	teeCallID         // the removed correlation member's value (the last)
)

// smallValue is one small value of a call, kept up to its bound (maxSmall); over
// says it passed it, and nothing of it is kept.
type smallValue struct {
	raw  []byte
	over bool
	cut  bool // a long string: raw is its first part, closed
	seen bool
}

// Bounds on the small values Capture keeps. A name or correlation id that is a
// longer string keeps its first part (cut on an escape's and a character's
// boundary, and closed): at six bytes an escaped character, more than the most a
// report shows of it (redact.Label looks at 1024 bytes and its margin).
var maxSmall = [teeCallID + 1]int{teeName: 16 << 10, teeMeta: 16 << 10, teeCallID: 16 << 10}

// Capture asks for what the report of the line's call needs, as it passes: args
// gets the bytes of its params.arguments as emitted (the key removed), with begin
// set on the first bytes of each arguments value (a later one replaces an earlier,
// as in the host's JSON.parse); Name, Meta and CallID then give the raw values of
// params.name, params._meta and the removed correlation member (nil when absent or
// over their bounds). Only the line's first object is captured. Call it before the
// first Write.
func (a *ArgStrip) Capture(args func(p []byte, begin bool)) { a.capArgs = args }

// Name is the raw params.name of the captured call (Capture), nil when unknown.
func (a *ArgStrip) Name() []byte { return a.smallOf(teeName) }

// Meta is the raw params._meta of the captured call, nil when unknown. Of one past
// its bound (16 KiB) it is an object of its traceparent and tracestate members
// alone, which make the call's span a child of the host's (nil when it has neither):
// a call with a long _meta lost its trace parent when streamed, and had it read
// whole.
func (a *ArgStrip) Meta() []byte {
	if m := a.smallOf(teeMeta); m != nil {
		return m
	}
	if v := &a.small[teeMeta]; !v.seen || !v.over {
		return nil
	}
	b := append(a.metaBuf[:0], '{')
	for k, name := range traceMembers {
		v := &a.trace[k]
		if !v.seen || v.bad {
			continue // as the whole line's reading does: no such member, or one it ignores
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(append(append(append(b, '"'), name...), `":`...), v.raw...)
	}
	a.metaBuf = b
	if len(b) == 1 {
		return nil
	}
	return append(b, '}')
}

// CallID is the raw value of the last correlation member removed from the captured
// call's arguments, nil when none (or it was over its bound).
func (a *ArgStrip) CallID() []byte { return a.smallOf(teeCallID) }

func (a *ArgStrip) smallOf(k teeKind) []byte {
	if v := &a.small[k]; v.seen && !v.over {
		return v.raw
	}
	return nil
}

// startTee keeps the value starting at p[i] of the member in frame f, when it is
// one the capture wants.
func (a *ArgStrip) startTee(i int, f *stripFrame) {
	if a.capArgs == nil || a.objs != 1 {
		return
	}
	k := teeNone
	switch {
	case f.ctx == ctxParams && f.mk == mkArguments:
		a.flush(i)
		a.teeArgs, a.argsDepth = true, a.depth
		a.capArgs(nil, true)
		return
	case f.ctx == ctxParams && f.mk == mkName:
		k = teeName
	case f.ctx == ctxParams && f.mk == mkMeta:
		k = teeMeta
		a.trace = [2]traceValue{{raw: a.trace[0].raw[:0]}, {raw: a.trace[1].raw[:0]}} // a later _meta replaces an earlier
	case f.ctx == ctxArgs && f.mk == mkKey:
		k = teeCallID
	default:
		return
	}
	a.flush(i)
	a.tee, a.teeDepth = k, a.depth
	a.small[k] = smallValue{raw: a.small[k].raw[:0], seen: true}
}

// endTee stops keeping the value that ended at p[i-1], when it was kept.
func (a *ArgStrip) endTee(i int) {
	switch {
	case a.tee != teeNone && a.depth == a.teeDepth:
		a.flush(i)
		a.tee = teeNone
	case a.teeArgs && a.depth == a.argsDepth:
		a.flush(i)
		a.teeArgs = false
	}
}

// keepSmall adds b to the small value being kept.
func (a *ArgStrip) keepSmall(b []byte) {
	v := &a.small[a.tee]
	if v.over || v.cut {
		return
	}
	if m := maxSmall[a.tee]; len(v.raw)+len(b) > m {
		if v.raw = append(v.raw, b[:m-len(v.raw)]...); a.tee != teeMeta && len(v.raw) > 0 && v.raw[0] == '"' {
			v.raw = append(v.raw[:stringPrefix(v.raw)], '"')
			v.cut = true
			return
		}
		v.over, v.raw = true, v.raw[:0]
		return
	}
	v.raw = append(v.raw, b...)
}

// stringPrefix is how much of s, the first part of a string's literal (its
// opening quote first), ends on a whole escape and a whole character.
func stringPrefix(s []byte) int {
	n := len(s)
	for i := 1; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		l := 2
		if i+1 < len(s) && s[i+1] == 'u' {
			l = 6
		}
		if i+l > len(s) {
			n = i
			break
		}
		i += l - 1
	}
	for n > 1 && s[n-1]&0xC0 == 0x80 {
		n--
	}
	if n > 1 && s[n-1] >= 0xC0 {
		n--
	}
	return n
}

// send emits b, which goes on to the server, and gives it to the capture.
func (a *ArgStrip) send(b []byte) {
	a.emit(b)
	switch {
	case a.teeArgs:
		a.capArgs(b, false)
	case a.tee == teeName || a.tee == teeMeta:
		a.keepSmall(b)
	}
}

// Bounds on what ArgStrip holds.
const (
	maxHead = 1 << 20  // a top-level object's head, before its "params"
	maxSep  = 64 << 10 // a separator in the arguments object
	// maxStripDepth is as deep as containers are told apart: a batch's object's
	// params' arguments are at depth 4.
	maxStripDepth = 4
)

type stripMode uint8

const (
	modeEmit stripMode = iota
	modeDrop
	modeHold // the head
	modePend // after a kept member of the arguments
	modeTail // after a removed member of the arguments
)

type stripCtx uint8

const (
	ctxNone   stripCtx = iota // nothing in it is looked at
	ctxBatch                  // a top-level array: its objects are messages
	ctxTop                    // a message
	ctxParams                 // its params
	ctxArgs                   // params.arguments of a call
	ctxMeta                   // params._meta of the captured call: its trace members
)

type stripState uint8

const (
	stKey    stripState = iota // a key or the end is next
	stColon                    // after the key
	stValue                    // the value is next
	stScalar                   // in a number or literal
	stIn                       // in a string or container value
	stAfter                    // after the value
)

type memberKind uint8

const (
	mkOther memberKind = iota
	mkParams
	mkMethod
	mkArguments
	mkKey  // the correlation key: removed
	mkName // params.name (Capture)
	mkMeta // params._meta (Capture)
	// params._meta's traceparent and tracestate (Capture): mkTrace+k is traceMembers[k]
	mkTrace
	mkTrace1
)

type stripFrame struct {
	ctx stripCtx
	st  stripState
	mk  memberKind
}

// NewArgStrip returns an ArgStrip removing key, for one line.
func NewArgStrip(key string) *ArgStrip {
	// Until the first object's head is read, nothing goes on.
	a := &ArgStrip{key: key, mode: modeHold}
	a.keyMax = 6*max(len(key), len("tools/call"), len("traceparent")) + 2
	return a
}

// Whole reports that the line cannot be edited as it passes: from the first byte,
// all of it is held (Held), and nothing was emitted.
func (a *ArgStrip) Whole() bool { return a.whole }

// Held is what is held of a line to be read whole (Whole).
func (a *ArgStrip) Held() []byte { return a.hold }

// Write scans the next piece of the line and emits what of it goes on. emit's
// argument is valid only during the call.
func (a *ArgStrip) Write(p []byte, emit func([]byte)) {
	if a.whole {
		a.hold = append(a.hold, p...)
		return
	}
	a.emit, a.p, a.run, a.quote = emit, p, 0, -2
	for i := 0; i < len(p); {
		if a.whole {
			a.hold = append(a.hold, p[a.run:]...)
			a.run = len(p)
			break
		}
		if a.inStr {
			i = a.scanString(i)
			continue
		}
		a.byteAt(i, p[i])
		i++
	}
	a.flush(len(p))
	a.p, a.emit = nil, nil
}

// End ends the line: what is still held goes on (a line that ended where it is
// invalid or cut off).
func (a *ArgStrip) End(emit func([]byte)) {
	if a.whole {
		return
	}
	for _, b := range [][]byte{a.hold, a.pend, a.tail} {
		if len(b) > 0 {
			emit(b)
		}
	}
	if a.inStr && a.capture && a.fr[a.depth].ctx == ctxArgs && a.fr[a.depth].st == stKey {
		emit(a.cap) // a key cut off
	}
	a.hold, a.pend, a.tail = a.hold[:0], a.pend[:0], a.tail[:0]
}

// flush routes p[run:i] to where the current mode sends it.
func (a *ArgStrip) flush(i int) {
	if i <= a.run {
		return
	}
	b := a.p[a.run:i]
	a.run = i
	switch a.mode {
	case modeEmit:
		a.send(b)
	case modeDrop:
		if a.tee == teeCallID {
			a.keepSmall(b)
		}
	case modeHold:
		a.hold = append(a.hold, b...)
		if len(a.hold) > maxHead {
			a.headOver()
		}
	case modePend:
		a.pend = append(a.pend, b...)
		if len(a.pend) > maxSep {
			a.send(a.pend)
			a.pend = a.pend[:0]
			a.Inexact = true
		}
	case modeTail:
		if len(a.tail)+len(b) > maxSep {
			a.Inexact = true // whitespace before the end: not kept
			return
		}
		a.tail = append(a.tail, b...)
	}
}

// route sends bytes from i on to mode m.
func (a *ArgStrip) route(i int, m stripMode) {
	a.flush(i)
	a.mode = m
}

// headOver: a head passed maxHead before its params.
func (a *ArgStrip) headOver() {
	if !a.anyCall {
		if a.objs == 1 {
			a.whole = true
			return
		}
		a.Inexact = true // edited whatever it is, as in keyEnd
	}
	a.strip = true
	a.endHead()
}

// endHead lets the held head go: the object is known to be a call or not.
func (a *ArgStrip) endHead() {
	a.head = false
	if len(a.hold) > 0 {
		a.emit(a.hold)
		a.hold = a.hold[:0]
	}
	a.mode = modeEmit
}

// scanString moves through a string from p[i], to its closing quote or the piece's
// end, and returns where the scan goes on.
func (a *ArgStrip) scanString(i int) int {
	p := a.p
	if a.esc {
		a.esc = false
		a.keep(i, i+1)
		return i + 1
	}
	if a.quote == -2 || (a.quote >= 0 && a.quote < i) {
		a.quote = -1
		if k := bytes.IndexByte(p[i:], '"'); k >= 0 {
			a.quote = i + k
		}
	}
	end := len(p)
	if a.quote >= 0 {
		end = a.quote
	}
	if k := bytes.IndexByte(p[i:end], '\\'); k >= 0 {
		a.keep(i, i+k+1)
		a.esc = true
		return i + k + 1
	}
	if a.quote < 0 {
		a.keep(i, len(p))
		return len(p)
	}
	a.keep(i, end+1)
	a.inStr = false
	a.stringEnd(end + 1)
	return end + 1
}

// keep adds p[i:j], read in a string, to what is captured of it.
func (a *ArgStrip) keep(i, j int) {
	if !a.capture || a.capOver {
		return
	}
	if len(a.cap)+j-i > a.capMax {
		a.capOver = true
		if f := &a.fr[a.depth]; f.ctx == ctxArgs && f.st == stKey {
			// Too long to be the key: a kept member, whose key goes on as it is
			// read, after what was held of it.
			a.keptKey(i)
		}
		return
	}
	a.cap = append(a.cap, a.p[i:j]...)
}

// byteAt handles p[i], outside strings.
func (a *ArgStrip) byteAt(i int, c byte) {
	if a.depth > maxStripDepth {
		a.plain(i, c)
		return
	}
	f := &a.fr[a.depth]
	if a.depth == 0 || f.ctx == ctxNone || f.ctx == ctxBatch {
		a.plain(i, c)
		return
	}
	switch f.st {
	case stKey:
		switch c {
		case '"':
			a.startString(i, true)
			if f.ctx == ctxArgs {
				a.route(i, modeDrop) // held in cap until it is known
			}
		case '}':
			a.close(i)
		}
	case stColon:
		if c == ':' {
			f.st = stValue
		}
	case stValue:
		switch c {
		case ' ', '\t', '\r', '\n':
		case '"':
			a.startTee(i, f)
			trace := f.ctx == ctxMeta && f.mk >= mkTrace
			a.startString(i, f.ctx == ctxTop && f.mk == mkMethod && a.head || trace)
			if trace {
				a.capMax = maxTraceValue
			}
			f.st = stIn
		case '{', '[':
			a.startTee(i, f)
			a.badTrace(f)
			f.st = stIn
			a.open(i, c)
		default:
			a.startTee(i, f)
			a.badTrace(f)
			f.st = stScalar
		}
	case stScalar:
		switch c {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			a.valueEnd(i)
			a.byteAt(i, c) // once: the frame is stAfter now
		}
	case stAfter:
		switch c {
		case ',':
			f.st = stKey
		case '}':
			a.close(i)
		}
	}
}

// plain handles p[i] where no key is looked at: containers are counted.
func (a *ArgStrip) plain(i int, c byte) {
	switch c {
	case '"':
		a.startString(i, false)
	case '{', '[':
		a.open(i, c)
	case '}', ']':
		if a.depth == 0 {
			return
		}
		a.close(i)
	}
}

func (a *ArgStrip) startString(i int, capture bool) {
	a.inStr, a.esc = true, false
	a.capture, a.capOver, a.capMax = capture, false, a.keyMax
	a.cap = append(a.cap[:0], '"')
}

// badTrace notes that the value of a trace member of _meta (frame f) is no string.
func (a *ArgStrip) badTrace(f *stripFrame) {
	if f.ctx == ctxMeta && f.mk >= mkTrace {
		a.trace[f.mk-mkTrace].bad = true
	}
}

// open enters the container p[i] opens.
func (a *ArgStrip) open(i int, c byte) {
	parent := stripFrame{}
	if a.depth <= maxStripDepth {
		parent = a.fr[a.depth]
	}
	a.depth++
	if a.depth > maxStripDepth {
		return
	}
	ctx := ctxNone
	switch {
	case a.depth == 1 && c == '{', parent.ctx == ctxBatch && c == '{':
		ctx = ctxTop
		a.objs++
		a.head, a.anyCall, a.strip = true, false, false
		a.route(i, modeHold)
	case a.depth == 1 && c == '[':
		ctx = ctxBatch
	case c != '{':
	case parent.ctx == ctxTop && parent.mk == mkParams:
		ctx = ctxParams
		if a.capArgs != nil && a.objs == 1 {
			// A later params replaces an earlier one, as in the host's JSON.parse.
			a.flush(i)
			a.capArgs(nil, true)
			a.small[teeName], a.small[teeMeta] = smallValue{raw: a.small[teeName].raw[:0]}, smallValue{raw: a.small[teeMeta].raw[:0]}
		}
	case parent.ctx == ctxParams && parent.mk == mkMeta && a.capArgs != nil && a.objs == 1:
		ctx = ctxMeta // its trace members are kept apart (startTee emptied them)
	case parent.ctx == ctxParams && parent.mk == mkArguments && a.strip:
		ctx = ctxArgs
		a.kept, a.inRun = false, false
		a.pend, a.tail = a.pend[:0], a.tail[:0]
	}
	a.fr[a.depth] = stripFrame{ctx: ctx}
}

// close leaves the container p[i] closes.
func (a *ArgStrip) close(i int) {
	if a.depth <= maxStripDepth {
		switch f := a.fr[a.depth]; f.ctx {
		case ctxArgs:
			a.flush(i)
			switch {
			case a.inRun:
				// A removed run ends the object: the separator before it goes too,
				// what followed it stays.
				a.emitHeld(&a.tail)
				a.pend = a.pend[:0]
			default:
				a.emitHeld(&a.pend)
			}
			a.tail = a.tail[:0]
			a.mode = modeEmit
		case ctxTop:
			if a.head {
				a.flush(i)
				a.endHead()
			}
		}
	}
	a.depth--
	if a.depth >= 1 && a.depth <= maxStripDepth && a.fr[a.depth].ctx != ctxNone && a.fr[a.depth].ctx != ctxBatch {
		a.valueEnd(i + 1)
	}
}

func (a *ArgStrip) emitHeld(b *[]byte) {
	if len(*b) > 0 {
		a.send(*b)
		*b = (*b)[:0]
	}
}

// stringEnd follows a string that ended at p[i-1].
func (a *ArgStrip) stringEnd(i int) {
	if a.depth == 0 || a.depth > maxStripDepth {
		return
	}
	f := &a.fr[a.depth]
	if f.ctx == ctxNone || f.ctx == ctxBatch {
		return
	}
	if f.st == stKey {
		a.keyEnd(i, f)
		return
	}
	if f.ctx == ctxTop && f.mk == mkMethod && a.head && a.capture && !a.capOver && KeyIs(a.cap, "tools/call") {
		a.anyCall = true
	}
	if f.ctx == ctxMeta && f.mk >= mkTrace && a.capture {
		v := &a.trace[f.mk-mkTrace]
		if v.bad = a.capOver; !v.bad {
			v.raw = append(v.raw[:0], a.cap...)
		}
	}
	a.capture = false
	a.valueEnd(i)
}

// keyEnd classifies the member whose key ended at p[i-1].
func (a *ArgStrip) keyEnd(i int, f *stripFrame) {
	f.st, f.mk = stColon, mkOther
	k := a.cap
	over := a.capOver
	a.capture = false
	switch f.ctx {
	case ctxTop:
		switch {
		case over:
		case KeyIs(k, "params"):
			f.mk = mkParams
			if a.head {
				a.flush(i)
				if !a.anyCall {
					if a.objs == 1 {
						a.whole = true
						return
					}
					// Not the first value on the line: it passes edited, whatever it
					// is, though the whole line's edit leaves an object that is not a
					// call as it is (the key must never pass): Inexact.
					a.Inexact = true
				}
				a.strip = true
				a.endHead()
			}
		case KeyIs(k, "method"):
			f.mk = mkMethod
		}
	case ctxParams:
		switch {
		case over:
		case KeyIs(k, "arguments"):
			f.mk = mkArguments
		case a.capArgs != nil && KeyIs(k, "name"):
			f.mk = mkName
		case a.capArgs != nil && KeyIs(k, "_meta"):
			f.mk = mkMeta
		}
	case ctxMeta:
		for n, name := range traceMembers {
			if !over && KeyIs(k, name) {
				f.mk = mkTrace + memberKind(n)
				a.trace[n] = traceValue{raw: a.trace[n].raw[:0], seen: true} // the last one wins
			}
		}
	case ctxArgs:
		if over {
			return // keptKey ran when it went over
		}
		if KeyIs(k, a.key) {
			f.mk = mkKey
			a.flush(i) // dropped: the key is in cap
			if a.inRun {
				a.tail = a.tail[:0] // between two removed members: removed
			}
			a.inRun = true
			return
		}
		a.keptKey(i)
	}
}

// keptKey lets a kept member's key in the arguments go on, with what was held
// before it; the bytes of the key before p[i] are in cap.
func (a *ArgStrip) keptKey(i int) {
	a.flush(i)
	if a.inRun {
		// The removed run before it goes, with what followed it; the separator
		// before the run stays.
		a.tail = a.tail[:0]
		a.inRun = false
	}
	a.emitHeld(&a.pend)
	if len(a.cap) > 0 {
		a.send(a.cap)
	}
	a.cap = a.cap[:0]
	a.kept = true
	a.mode = modeEmit
}

// valueEnd follows a member's value that ended at p[i-1].
func (a *ArgStrip) valueEnd(i int) {
	a.endTee(i)
	f := &a.fr[a.depth]
	f.st = stAfter
	if f.ctx == ctxArgs {
		if f.mk == mkKey {
			a.route(i, modeTail)
		} else {
			a.route(i, modePend)
		}
	}
}
