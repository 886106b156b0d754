package jsonlex

import (
	"bytes"
	"encoding/binary"
)

// Line is what one pass of the lexer learns of a line of JSON-RPC: where each of its
// objects lies (the message, or each object element of a batch) and, in each, where
// its JSON-RPC members are. The host's path lexes every message once into a Line it
// reuses, and the key strip (intercept), the registry of requests in flight (relay)
// and revival's record of the handshake (upstream.Setup) all read it: lexed by each of
// them, a small tools/call was read four times on its way to the server.
//
// A Line holds spans, never a slice of the message, so reusing one pins nothing; after
// an edit of the message, Shift moves the spans with it.
type Line struct {
	// Objs are the objects on the line in order, each one whose members the lexer
	// can follow: what EachObject finds, less the objects TopFields could not read.
	Objs []Obj
	// args holds the members of each object's params.arguments (see Arguments).
	args []Member
	// rpc is how many of Objs EachRPC shows: it stops at the first top-level value
	// it cannot follow, where EachObject steps over an object whose members are
	// broken, or a batch whose elements are, when its brackets still match.
	rpc int
	// strict is set while LexValid lexes: keys and values are walked by the strict
	// check (validString, validEnd) instead of skipped; unchecked says a part was
	// skipped all the same (a params object), and the line is checked whole after.
	strict, unchecked bool
}

// Obj is one object of a Line and its JSON-RPC members, each the value of the last
// member of that name (the duplicate-key rule); a zero Span is an absent member.
type Obj struct {
	Span
	Method, ID, Params, Result, Error Span
	// Recheck says a reader that must look at every member of a name, not only the
	// last, reads the object itself: "method", "id" or "params" occurs more than
	// once, params has several "name" or "arguments", or their members cannot be
	// followed.
	Recheck bool
	// Name and Arguments are params' "name" and "arguments" values, when params is
	// an object this lexer follows (zero otherwise, or absent); read them only when
	// Recheck is not set. Bookkeeping takes a tools/call's tool and arguments from
	// them rather than reading the message again.
	Name, Arguments Span
	// args is where the members of params.arguments are in Line.args, when params
	// is an object with one "arguments" member, an object (hasArgs).
	args    [2]int32
	hasArgs bool
}

// maxKeptObjs and maxKeptArgs bound the arrays a Line keeps between two lines: one
// huge batch, or a call with a huge arguments object, must not pin its descriptor for
// the rest of the session.
const (
	maxKeptObjs = 1024
	maxKeptArgs = 4096
)

// Lex reads line (one message or a batch, as framing returns it) into l, replacing
// what l held. It allocates only when the line has more objects than any line l has
// held before.
func (l *Line) Lex(line []byte) {
	if cap(l.Objs) > maxKeptObjs {
		l.Objs = nil
	}
	if cap(l.args) > maxKeptArgs {
		l.args = nil
	}
	l.Objs, l.args = l.Objs[:0], l.args[:0]
	l.rpc = -1
	for i := SkipSpace(line, 0); i < len(line); {
		var end int
		switch line[i] {
		case '{':
			var o Obj
			e, ok := l.lexObj(line, i, &o)
			if ok {
				l.Objs = append(l.Objs, o)
				end = e
			} else {
				l.stopRPC()
				end = SkipValue(line, i)
			}
		case '[':
			e, ok := l.lexBatch(line, i)
			if ok {
				end = e
			} else {
				l.stopRPC()
				end = SkipValue(line, i)
			}
		default:
			end = SkipValue(line, i)
		}
		if end < 0 {
			break
		}
		i = SkipSpace(line, end)
	}
	if l.rpc < 0 {
		l.rpc = len(l.Objs)
	}
}

// LexValid is Lex of line, and reports whether line is a message a host can parse:
// one JSON object (or a batch array) that Valid accepts, with only JSON whitespace
// around it. It is one pass where Lex then Valid would be two: the object's members
// are walked by the strict check rather than skipped (an upstream reads every server
// line so, and the relay reads the lex). When it returns false, l is not necessarily
// what Lex would make of line; when true, it is.
func (l *Line) LexValid(line []byte) bool {
	i := SkipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		// A batch (rare from a server) or no message at all: lexed and checked apart.
		l.Lex(line)
		return i < len(line) && line[i] == '[' && Valid(line)
	}
	l.strict, l.unchecked = true, false
	l.Lex(line)
	unchecked := l.unchecked
	l.strict, l.unchecked = false, false
	if unchecked {
		return Valid(line)
	}
	return len(l.Objs) == 1 && l.Objs[0].Start == i && SkipSpace(line, l.Objs[0].End) == len(line)
}

func (l *Line) stopRPC() {
	if l.rpc < 0 {
		l.rpc = len(l.Objs)
	}
}

// RPC is the objects EachRPC would show for the line.
func (l *Line) RPC() []Obj {
	if l.rpc < 0 || l.rpc > len(l.Objs) {
		return l.Objs
	}
	return l.Objs[:l.rpc]
}

// lexBatch reads the array at b[i], appending its objects; on a broken array it
// appends nothing and returns ok false.
func (l *Line) lexBatch(b []byte, i int) (end int, ok bool) {
	n := len(l.Objs)
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var v int
		if i < len(b) && b[i] == '{' {
			var o Obj
			e, ok := l.lexObj(b, i, &o)
			if ok {
				l.Objs = append(l.Objs, o)
				v = e
			} else {
				v = SkipValue(b, i) // an element EachRPC steps over
			}
		} else {
			v = SkipValue(b, i)
		}
		if v < 0 {
			l.Objs = l.Objs[:n]
			return 0, false
		}
		i = SkipSpace(b, v)
		if i >= len(b) {
			l.Objs = l.Objs[:n]
			return 0, false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case ']':
			return i + 1, true
		default:
			l.Objs = l.Objs[:n]
			return 0, false
		}
	}
}

// Member names lexObj looks for, as bits of seen.
const (
	seenMethod = 1 << iota
	seenID
	seenParams
)

// lexObj reads the object at b[i] (b[i] == '{') into o, as EachMember walks it.
func (l *Line) lexObj(b []byte, i int, o *Obj) (end int, ok bool) {
	start, nargs := i, len(l.args)
	defer func() {
		if !ok {
			l.args = l.args[:nargs] // of an object that is not one
		}
	}()
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		o.Span = Span{start, i + 1}
		return i + 1, true
	}
	seen := 0
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		k, which := plainKey(b, i)
		if k < 0 {
			if l.strict {
				if k = validString(b, i); k < 0 {
					return 0, false
				}
			} else if k = skipShort(b, i); k < 0 {
				if k = SkipString(b, i); k < 0 {
					return 0, false
				}
			}
			which = rpcMember(b[i:k])
		}
		i = SkipSpace(b, k)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = SkipSpace(b, i+1)
		var v int
		switch {
		case which == memberJSONRPC && hasLiteral(b, i, `"2.0"`):
			v = i + len(`"2.0"`) // every message's: a string, in either mode
		case which == memberParams && i < len(b) && b[i] == '{':
			v = l.lexParams(b, i, o)
			if l.strict {
				l.unchecked = true // lexParams skips: the line is checked whole
			}
		case l.strict:
			v = validEnd(b, i)
		case i < len(b) && b[i] == '"':
			if v = skipShort(b, i); v < 0 {
				v = SkipString(b, i)
			}
		default:
			v = SkipValue(b, i)
		}
		if v < 0 {
			return 0, false
		}
		val := Span{i, v}
		switch which {
		case memberMethod:
			o.Method = val
			o.Recheck = o.Recheck || seen&seenMethod != 0
			seen |= seenMethod
		case memberID:
			o.ID = val
			o.Recheck = o.Recheck || seen&seenID != 0
			seen |= seenID
		case memberParams:
			o.Params = val
			o.Recheck = o.Recheck || seen&seenParams != 0
			seen |= seenParams
		case memberResult:
			o.Result = val
		case memberError:
			o.Error = val
		}
		i = SkipSpace(b, v)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			o.Span = Span{start, i + 1}
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// lexParams walks the params object at b[i], as SkipValue would, recording in o the
// members of its "arguments" (the key strip's business: so the message is read once).
// Anything unusual sets o.Recheck instead.
func (l *Line) lexParams(b []byte, i int, o *Obj) (end int) {
	if o.hasArgs {
		o.Recheck = true // a second params: its reader reads the object itself
		o.hasArgs = false
	}
	start := i
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	found := false
	for {
		if i >= len(b) || b[i] != '"' {
			break
		}
		var isName, isArgs bool
		k := plainParamsKey(b, i)
		switch {
		case k > 0:
			isName, isArgs = k-i == len(`"name"`), k-i == len(`"arguments"`)
		case k == 0:
			if k = skipShort(b, i); k < 0 {
				if k = SkipString(b, i); k < 0 {
					break
				}
			}
			isName, isArgs = paramsKey(b[i:k])
		}
		if k < 0 {
			break
		}
		i = SkipSpace(b, k)
		if i >= len(b) || b[i] != ':' {
			break
		}
		i = SkipSpace(b, i+1)
		var v int
		if isArgs {
			if found {
				o.Recheck = true
			}
			found = true
			if i < len(b) && b[i] == '{' && !o.Recheck {
				n := len(l.args)
				e, ok := EachMember(b, i, func(m Member) bool {
					l.args = append(l.args, m)
					return true
				})
				if ok {
					o.args, o.hasArgs, v = [2]int32{int32(n), int32(len(l.args))}, true, e
				} else {
					l.args = l.args[:n]
					o.Recheck = true
					v = SkipValue(b, i)
				}
			} else {
				v = SkipValue(b, i)
			}
		} else {
			v = SkipValue(b, i)
		}
		if v < 0 {
			break
		}
		if isName {
			// The last wins; a second one is read by a reader that must see each
			// (the tool policy: a server may act on the first).
			o.Recheck = o.Recheck || o.Name.End != 0
			o.Name = Span{i, v}
		} else if isArgs {
			o.Arguments = Span{i, v}
		}
		i = SkipSpace(b, v)
		if i >= len(b) {
			break
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
			continue
		case '}':
			return i + 1
		}
		break
	}
	// Members this walk cannot follow: the value may still be one SkipValue can
	// (it checks brackets, not separators), and the reader that cares looks itself.
	o.Recheck, o.hasArgs = true, false
	return SkipValue(b, start)
}

// paramsKey says whether the key literal k of a params member is "name" or
// "arguments" (KeyIs of each, in one look: the plain spellings by length, and the
// scan for a backslash once).
func paramsKey(k []byte) (isName, isArgs bool) {
	switch {
	case len(k) == len(`"name"`):
		return string(k) == `"name"`, false
	case len(k) == len(`"arguments"`) && string(k) == `"arguments"`:
		return false, true
	case len(k) < len(`"name"`) || bytes.IndexByte(k, '\\') < 0:
		return false, false
	}
	s, ok := DecodeString(k)
	return ok && s == "name", ok && s == "arguments"
}

// shiftOne is Shift by the one cut d, once the members of arguments are dropped.
func (l *Line) shiftOne(d Span) {
	n := d.End - d.Start
	for i := range l.Objs {
		o := &l.Objs[i]
		shiftSpan(&o.Span, d.End, n)
		shiftSpan(&o.Method, d.End, n)
		shiftSpan(&o.ID, d.End, n)
		shiftSpan(&o.Params, d.End, n)
		shiftSpan(&o.Result, d.End, n)
		shiftSpan(&o.Error, d.End, n)
		shiftSpan(&o.Name, d.End, n)
		shiftSpan(&o.Arguments, d.End, n)
	}
}

// shiftSpan moves s, unless it is absent, by a cut of n bytes ending at end.
func shiftSpan(s *Span, end, n int) {
	if s.End != 0 {
		if s.Start >= end {
			s.Start -= n
		}
		if s.End >= end {
			s.End -= n
		}
	}
}

// Arguments is the members of o's params.arguments, an object, when o has one params
// and it one arguments member; nil otherwise (none, or o.Recheck). Their spans are of
// the line as lexed: an edit (Shift) drops them.
func (l *Line) Arguments(o *Obj) []Member {
	if !o.hasArgs || o.Recheck {
		return nil
	}
	return l.args[o.args[0]:o.args[1]:o.args[1]]
}

type member uint8

const (
	memberOther   member = iota
	memberJSONRPC        // rpcMember says memberOther of it; only plainKey tells it
	memberMethod
	memberID
	memberParams
	memberResult
	memberError
)

// rpcMember says which JSON-RPC member the key literal k names. An escape is always
// longer than what it decodes to, and spelling a letter takes \uXXXX, five bytes more
// than the letter: so a key no longer than "method" with its quotes is one of these
// names only as its plain spelling, and is compared byte for byte (no scan for a
// backslash, which KeyIs would make of every key of every message).
func rpcMember(k []byte) member {
	switch len(k) {
	case 4:
		if k[1] == 'i' && k[2] == 'd' {
			return memberID
		}
	case 7:
		if string(k[1:6]) == "error" {
			return memberError
		}
	case 8:
		switch string(k[1:7]) {
		case "method":
			return memberMethod
		case "params":
			return memberParams
		case "result":
			return memberResult
		}
	default:
		if len(k) > 8 {
			return escapedMember(k)
		}
	}
	return memberOther
}

// escapedMember is rpcMember for a key too long to be a plain spelling. The names
// are lowercase letters, which JSON can escape only as \uXXXX: each escaped letter
// makes the literal five bytes longer, so a literal spells one of them only at a
// length of 2+n+5e (n its letters, 1 <= e <= n of them escaped), and starts with the
// name's first letter or a backslash. "jsonrpc", in every message, is neither.
func escapedMember(k []byte) member {
	if c := k[1]; c != '\\' && c != 'i' && c != 'e' && c != 'm' && c != 'p' && c != 'r' {
		return memberOther
	}
	if !escapedLength(len(k)-2, 2) && !escapedLength(len(k)-2, 5) && !escapedLength(len(k)-2, 6) {
		return memberOther
	}
	for _, c := range k {
		if c == '\\' {
			s, ok := DecodeString(k)
			if !ok {
				return memberOther
			}
			switch s {
			case "id":
				return memberID
			case "method":
				return memberMethod
			case "params":
				return memberParams
			case "result":
				return memberResult
			case "error":
				return memberError
			}
			return memberOther
		}
	}
	return memberOther
}

// escapedLength reports whether l bytes can spell a name of n letters, some escaped.
func escapedLength(l, n int) bool {
	e := l - n
	return e > 0 && e%5 == 0 && e/5 <= n
}

// Fields are o's members as subslices of line, the line o was lexed from.
func (o *Obj) Fields(line []byte) Fields {
	return Fields{
		Method: spanOf(line, o.Method),
		ID:     spanOf(line, o.ID),
		Params: spanOf(line, o.Params),
		Result: spanOf(line, o.Result),
		Error:  spanOf(line, o.Error),
	}
}

// Bytes is the object itself, a subslice of line.
func (o *Obj) Bytes(line []byte) []byte { return line[o.Start:o.End] }

func spanOf(line []byte, s Span) []byte {
	if s.End == 0 {
		return nil
	}
	return line[s.Start:s.End]
}

// Shift moves l's spans as an edit of its line moved their bytes: dels, sorted and
// disjoint, were cut out of it. No span of l starts or ends inside a cut (the cuts an
// editor makes are inside one member's value: the key strip's, inside arguments).
// The members of arguments are not kept: they are what such an edit changes.
func (l *Line) Shift(dels []Span) {
	if len(dels) == 0 {
		return
	}
	l.args = l.args[:0]
	for i := range l.Objs {
		l.Objs[i].hasArgs = false
	}
	if len(dels) == 1 {
		// The usual edit, one cut (the key strip's): no walk of the cuts per span.
		l.shiftOne(dels[0])
		return
	}
	at := func(p int) int {
		n := 0
		for _, d := range dels {
			if d.End > p {
				break
			}
			n += d.End - d.Start
		}
		return p - n
	}
	move := func(s *Span) {
		if s.End != 0 {
			s.Start, s.End = at(s.Start), at(s.End)
		}
	}
	l.eachSpan(move)
}

// eachSpan calls f with every span of every object of l (Arguments too: an edit's
// cuts are inside it, and its end moves).
func (l *Line) eachSpan(f func(s *Span)) {
	for i := range l.Objs {
		o := &l.Objs[i]
		f(&o.Span)
		f(&o.Method)
		f(&o.ID)
		f(&o.Params)
		f(&o.Result)
		f(&o.Error)
		f(&o.Name)
		f(&o.Arguments)
	}
}

// plainKey is the end of the key literal at b[i] == '"' and the member it names,
// when it is the plain spelling of a JSON-RPC member's name ("jsonrpc" included):
// the keys of almost every message, told by one comparison each rather than a scan
// and rpcMember. It returns -1 for any other key. The literal ends where the
// comparison says: no backslash comes before that quote, and the name's letters
// are no control characters, so the literal is one JSON allows (the strict lex's
// check too).
func plainKey(b []byte, i int) (int, member) {
	if i+9 > len(b) {
		return -1, memberOther // the generic path, for a key at the end of a line
	}
	// The eight bytes after the opening quote, as one word: the names with their
	// closing quote, masked to their length (little-endian: the first byte lowest).
	w := binary.LittleEndian.Uint64(b[i+1:])
	switch {
	case w == wordJSONRPC:
		return i + 9, memberJSONRPC
	case w&mask3 == wordID:
		return i + 4, memberID
	case w&mask7 == wordMethod:
		return i + 8, memberMethod
	case w&mask7 == wordParams:
		return i + 8, memberParams
	case w&mask7 == wordResult:
		return i + 8, memberResult
	case w&mask6 == wordError:
		return i + 7, memberError
	}
	return -1, memberOther
}

// The key literals plainKey and plainParamsKey know, as the words they start with
// after the opening quote ("argument" is the first eight bytes of `arguments"`).
const (
	wordJSONRPC  = 0x226370726e6f736a // jsonrpc"
	wordID       = 0x226469           // id"
	wordMethod   = 0x22646f6874656d   // method"
	wordParams   = 0x22736d61726170   // params"
	wordResult   = 0x22746c75736572   // result"
	wordError    = 0x22726f727265     // error"
	wordArgument = 0x746e656d75677261 // argument
	wordName     = 0x22656d616e       // name"
	mask3        = 1<<24 - 1
	mask5        = 1<<40 - 1
	mask6        = 1<<48 - 1
	mask7        = 1<<56 - 1
)

// plainParamsKey is the end of the key literal at b[i] == '"' when it is the plain
// spelling of "name" or "arguments" (plainKey's reasoning), and 0 otherwise.
func plainParamsKey(b []byte, i int) int {
	if i+11 > len(b) {
		return 0
	}
	switch w := binary.LittleEndian.Uint64(b[i+1:]); {
	case w == wordArgument && b[i+9] == 's' && b[i+10] == '"':
		return i + 11
	case w&mask5 == wordName:
		return i + 6
	}
	return 0
}
