package jcs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Fingerprint returns "sha256:" + hex(sha256(JCS(arguments))) exactly as SPEC §3.2 says.
// args is the raw JSON text of params.arguments with the correlation key already removed
// (nil, empty, or JSON null hash as {}). Any other non-object value hashes as its own JCS.
//
// The canonical bytes stream into the hash and are never held in memory, so
// a call carrying a 100 MB string costs little beyond the string itself.
func Fingerprint(args []byte) (string, error) {
	return new(Fingerprinter).Fingerprint(args)
}

func argumentsAbsent(args []byte) bool {
	return len(args) == 0 || string(bytes.Trim(args, " \t\r\n")) == "null"
}

// The flat index: what the validating pass records so the writing pass can
// visit object members in canonical order, in one []uint32 sized once from
// a bound (see flatArenaSize), so that memory stays a small multiple of the
// input for any shape. Nesting a million objects deep must cost a few words
// a level, not the ~60 bytes a level (times the growth of five slices by
// append) that separate object, member, pending, open and frame slices did.
//
// The arena a holds, from the front, one segment per non-empty object, in
// the order the objects close (an object's segment follows those of
// everything inside it):
//
//	a[s]           number of members kept (duplicates dropped)
//	a[s+1]         the key offset of the member whose value this object is,
//	               or, for an object no member owns (an array element, the
//	               top-level value), the offset just past its '}'
//	a[s+2 : s+2+n] the members in canonical order
//
// A member is the offset of its key's content (past the opening quote); the
// key's end and the value's start are found again from it. A member whose
// value is a non-empty object is instead flatChild|s, naming that object's
// segment, whose a[s+1] holds the key. So the writing pass needs no lookup
// for owned objects; the others, rarer, are found by '{' offset in objects.
//
// From the back, the arena holds what the scan has not finished: for each
// open object, a two-word marker (the previous marker's index, and the
// object's slot in objects) and below it the members read so far, newest
// lowest. An object's pending entries take as many words as its segment
// will, and every word is either pending or in a segment, so the two ends
// never meet in an arena of members + 2 × objects words.
//
// Arrays, strings and numbers are not recorded (the writing pass walks them
// again in the raw bytes), which keeps the index of big strings and long
// arrays near zero.
type flatIndex struct {
	a        []uint32
	objects  []flatObject // non-empty objects no member owns, by '{' offset
	suspect  int          // offset of the first lone surrogate or infinite number, or -1
	depth    int          // deepest container nesting
	objDepth int          // deepest object nesting
	// The writing pass's stacks, sized from depth and objDepth, for the
	// dry run and the real one in turn.
	frames []flatFrame
	kinds  []uint64
}

type flatObject struct {
	start, seg uint32 // offset of '{', its segment in the arena
}

const (
	flatChild = 1 << 31                // member entry names the segment of its object value
	flatNone  = uint32(math.MaxUint32) // no open object
)

// flatWorkspace backs small calls, so that typical arguments cost no
// allocation for the index; bigger inputs get exactly sized slices.
type flatWorkspace struct {
	arena   [128]uint32
	objects [4]flatObject
	frames  [8]flatFrame
	kinds   [2]uint64
	num     [32]byte
}

// Bounds, so that nothing grows by repeated copies during the scan: an
// input that outgrows the workspace gets its arena and objects sized once,
// from a look at the whole input at memchr speed. An input of few members
// (big strings, long arrays of numbers) never needs the look.
//
// Every member takes at least 5 bytes of its own (`"":`, its value's first
// byte, and the ',' or '}' after it) and every non-empty object has a
// member, so 3 × len/5 words always hold valid JSON. A member has a ':' and
// an object a '{', so counting those bounds the arena for any input (every
// word stands for one of them), counting inside strings too, which only
// overestimates: near exact for structure, near zero for text.
func flatArenaSize(raw []byte) (valid, any int) {
	any = bytes.Count(raw, []byte{':'}) + 2*bytes.Count(raw, []byte{'{'})
	return min(3*(len(raw)/5), any), any
}

// flatObjectsSize bounds the objects no member owns: each is the top-level
// value or an array element, after a '[' or ',' and taking 7 bytes with it
// (`{"":0}` and what follows it), and each has a '{'.
func flatObjectsSize(raw []byte) int {
	n := min(bytes.Count(raw, []byte{'{'}), len(raw)/7+1)
	return min(n, bytes.Count(raw, []byte{','})+bytes.Count(raw, []byte{'['})+1)
}

// flatScanner is the validating pass (jcsScanner's grammar) recording the
// flat index.
type flatScanner struct {
	jcsScanner // grammar: str, number, literal and their errors
	flat       flatIndex
	top, out   uint32 // pending entries are a[top:], segments a[:out]
	cur        uint32 // marker of the innermost open object, or flatNone
	objDepth   int
	// Whether the arena and objects have outgrown the workspace for
	// arrays sized from the whole input.
	arenaSized, objectsSized bool
}

// flatScan runs the validating pass over raw in s, whose index it returns.
// Nothing of an earlier call survives in ws or s.
func flatScan(raw []byte, ws *flatWorkspace, s *flatScanner) (*flatIndex, error) {
	if uint64(len(raw)) > math.MaxInt32 {
		return nil, &jcsError{offset: 0, reason: "input larger than 2 GiB"}
	}
	*s = flatScanner{
		jcsScanner: jcsScanner{raw: raw, kinds: jcsKinds{bits: ws.kinds[:0]}, suspectAt: -1},
		flat:       flatIndex{a: ws.arena[:], objects: ws.objects[:0]},
		top:        uint32(len(ws.arena)),
		cur:        flatNone,
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	s.flat.suspect = s.suspectAt
	s.flat.frames = ws.frames[:0]
	if s.flat.objDepth > len(ws.frames) {
		s.flat.frames = make([]flatFrame, 0, s.flat.objDepth)
	}
	s.flat.kinds = ws.kinds[:0]
	if n := s.flat.depth/64 + 1; n > len(ws.kinds) {
		s.flat.kinds = make([]uint64, 0, n)
	}
	return &s.flat, nil
}

func (s *flatScanner) run() error {
	s.pos = jsonlex.SkipSpace(s.raw, s.pos)
	for {
		opened, err := s.value()
		if err != nil {
			return err
		}
		if opened {
			continue
		}
		// A value is complete: close containers until one wants another value.
		for {
			s.pos = jsonlex.SkipSpace(s.raw, s.pos)
			if s.kinds.depth == 0 {
				if s.pos != len(s.raw) {
					return s.fail("data after the top-level value")
				}
				return nil
			}
			if s.pos == len(s.raw) {
				return s.fail("unexpected end of input")
			}
			c := s.raw[s.pos]
			inObject := s.kinds.topIsObject()
			if c == ',' {
				s.pos++
				s.pos = jsonlex.SkipSpace(s.raw, s.pos)
				if inObject {
					if err := s.memberKey(); err != nil {
						return err
					}
				}
				break
			}
			if inObject && c == '}' {
				s.closeObject()
				continue
			}
			if !inObject && c == ']' {
				s.pos++
				s.kinds.pop()
				continue
			}
			return s.fail("expected ',' or the end of the container")
		}
	}
}

// value consumes one value at s.pos. For a non-empty container it consumes
// only the opening (and, for an object, the first key) and reports opened,
// so the caller scans the first child next. An empty object is not
// recorded: the writing pass recognises it as the scan does.
func (s *flatScanner) value() (opened bool, err error) {
	if s.pos == len(s.raw) {
		return false, s.fail("unexpected end of input")
	}
	switch c := s.raw[s.pos]; {
	case c == '{':
		p := jsonlex.SkipSpace(s.raw, s.pos+1)
		if p < len(s.raw) && s.raw[p] == '}' {
			s.pos = p + 1
			return false, nil
		}
		s.openObject()
		s.pos = p
		return true, s.memberKey()
	case c == '[':
		s.kinds.push(false)
		s.depth()
		s.pos++
		s.pos = jsonlex.SkipSpace(s.raw, s.pos)
		if s.pos < len(s.raw) && s.raw[s.pos] == ']' {
			s.pos++
			s.kinds.pop()
			return false, nil
		}
		return true, nil
	case c == '"':
		_, err := s.str()
		return false, err
	case c == '-' || ('0' <= c && c <= '9'):
		return false, s.number()
	case c == 't':
		return false, s.literal("true")
	case c == 'f':
		return false, s.literal("false")
	case c == 'n':
		return false, s.literal("null")
	default:
		return false, s.fail("expected a value")
	}
}

func (s *flatScanner) depth() {
	s.flat.depth = max(s.flat.depth, s.kinds.depth)
}

func (s *flatScanner) openObject() {
	slot := uint32(0)
	if s.kinds.depth == 0 || !s.kinds.topIsObject() {
		objs := s.flat.objects
		if len(objs) == cap(objs) {
			// Past the workspace, the bound; past the bound (only input
			// that is not JSON), doubling, not append's 1.25 for big
			// slices, whose copies add up to five times the final size.
			n := 2 * cap(objs)
			if !s.objectsSized {
				s.objectsSized = true
				n = max(n, flatObjectsSize(s.raw))
			}
			objs = append(make([]flatObject, 0, n), objs...)
		}
		slot = uint32(len(objs))
		s.flat.objects = append(objs, flatObject{start: uint32(s.pos)})
	}
	s.reserve(2)
	s.top -= 2
	s.flat.a[s.top], s.flat.a[s.top+1] = s.cur, slot
	s.cur = s.top
	s.kinds.push(true)
	s.depth()
	s.objDepth++
	s.flat.objDepth = max(s.flat.objDepth, s.objDepth)
}

// memberKey consumes `"key" :` and records the member whose value follows.
func (s *flatScanner) memberKey() error {
	if s.pos == len(s.raw) || s.raw[s.pos] != '"' {
		return s.fail("expected a string key")
	}
	start := s.pos + 1
	if _, err := s.str(); err != nil {
		return err
	}
	s.pos = jsonlex.SkipSpace(s.raw, s.pos)
	if s.pos == len(s.raw) || s.raw[s.pos] != ':' {
		return s.fail("expected ':' after an object key")
	}
	s.pos++
	s.pos = jsonlex.SkipSpace(s.raw, s.pos)
	s.reserve(1)
	s.top--
	s.flat.a[s.top] = uint32(start)
	return nil
}

// reserve makes room for n more pending words: past the workspace, in an
// arena of flatArenaSize's bound for valid JSON. Only input that is not
// JSON outgrows that (an object never closed can hold more than valid JSON
// of its length could), and then the count bound, which holds anything; the
// error is found where it is, as for any other input.
func (s *flatScanner) reserve(n uint32) {
	if s.top-s.out >= n {
		return
	}
	old := s.flat.a
	size, any := flatArenaSize(s.raw)
	if used := int(s.out) + len(old) - int(s.top); s.arenaSized || size < used+int(n) {
		size = any
	}
	s.arenaSized = true
	a := make([]uint32, size)
	copy(a, old[:s.out])
	delta := uint32(len(a) - len(old))
	copy(a[s.top+delta:], old[s.top:])
	s.top += delta
	for mk := &s.cur; *mk != flatNone; mk = &a[*mk] {
		*mk += delta
	}
	s.flat.a = a
}

// closeObject turns the innermost open object's pending entries into its
// segment, sorted, and links it from its owner.
func (s *flatScanner) closeObject() {
	a := s.flat.a
	mk := s.cur
	prev, slot := a[mk], a[mk+1]
	seg := s.out
	n := mk - s.top
	// The segment never starts past the pending entries (see flatIndex), so
	// the move only overlaps entries already read.
	copy(a[seg+2:seg+2+n], a[s.top:mk])
	ms := a[seg+2 : seg+2+n]
	slices.Reverse(ms) // pending is newest first
	ms = flatMemberOrder(s.raw, a, ms)
	a[seg] = uint32(len(ms))
	s.out = seg + 2 + uint32(len(ms))
	s.top = mk + 2
	s.cur = prev
	s.pos++
	s.kinds.pop()
	s.objDepth--
	if s.kinds.depth > 0 && s.kinds.topIsObject() {
		// The parent's newest member is the one whose value this is.
		a[seg+1] = a[s.top]
		a[s.top] = flatChild | seg
		return
	}
	a[seg+1] = uint32(s.pos)
	s.flat.objects[slot].seg = seg
}

// flatKey is the key offset of member entry m.
func flatKey(a []uint32, m uint32) uint32 {
	if m&flatChild != 0 {
		return a[m&^flatChild+1]
	}
	return m
}

// flatMemberOrder sorts ms by key in UTF-16 code unit order and drops all
// but the last of each run of equal keys (JSON.parse keeps the last), in
// place, returning the kept prefix.
func flatMemberOrder(raw []byte, a []uint32, ms []uint32) []uint32 {
	if len(ms) < 2 {
		return ms
	}
	// Source order breaks ties so the last duplicate sorts last; key
	// offsets grow with source order.
	slices.SortFunc(ms, func(x, y uint32) int {
		kx, ky := flatKey(a, x), flatKey(a, y)
		if c := compareFlatKeys(raw, int(kx), int(ky)); c != 0 {
			return c
		}
		return int(kx) - int(ky)
	})
	out := ms[:0]
	for i := range ms {
		if i+1 < len(ms) && compareFlatKeys(raw, int(flatKey(a, ms[i])), int(flatKey(a, ms[i+1]))) == 0 {
			continue
		}
		out = append(out, ms[i])
	}
	return out
}

// flatKeyStops has the high bit set in each of the 8 bytes of x that is
// '"', '\\' or not ASCII: where plain byte comparison of two keys must stop.
// (A validated key holds no control characters.) The lowest flagged byte is
// exact; bytes above it may be flagged falsely, which only ends a fast path
// early.
func flatKeyStops(x uint64) uint64 {
	q := x ^ ('"' * swarOnes)
	q = (q - swarOnes) &^ q
	b := x ^ ('\\' * swarOnes)
	b = (b - swarOnes) &^ b
	return (q | b | x) & swarHighs
}

// compareFlatKeys compares, in UTF-16 code units, the validated keys whose
// content starts at raw[i] and raw[j] and ends at their closing quote.
func compareFlatKeys(raw []byte, i, j int) int {
	// Plain ASCII compares as bytes, 8 at a time where the input allows.
	for max(i, j)+8 <= len(raw) {
		x, y := binary.LittleEndian.Uint64(raw[i:]), binary.LittleEndian.Uint64(raw[j:])
		stops := flatKeyStops(x) | flatKeyStops(y)
		if x == y && stops == 0 {
			i += 8
			j += 8
			continue
		}
		d := bits.TrailingZeros64(x^y) / 8 // 8 when equal
		st := bits.TrailingZeros64(stops) / 8
		if d < st {
			// Differing plain bytes, after equal plain ones.
			return int(byte(x>>(8*d))) - int(byte(y>>(8*d)))
		}
		i += st
		j += st
		break
	}
	for {
		c, d := raw[i], raw[j]
		plain := c != '\\' && c < utf8.RuneSelf && d != '\\' && d < utf8.RuneSelf
		if !plain {
			break
		}
		switch {
		case c == d && c == '"':
			return 0
		case c == d:
			i++
			j++
			continue
		case c == '"':
			return -1
		case d == '"':
			return 1
		}
		return int(c) - int(d)
	}
	// An escape or a non-ASCII character at a code unit boundary both keys
	// share so far: decode the rest.
	ua := utf16Units{s: raw[i : jsonlex.SkipString(raw, i-1)-1]}
	ub := utf16Units{s: raw[j : jsonlex.SkipString(raw, j-1)-1]}
	for {
		x, okx := ua.next()
		y, oky := ub.next()
		switch {
		case !okx && !oky:
			return 0
		case !okx:
			return -1
		case !oky:
			return 1
		case x != y:
			return int(x) - int(y)
		}
	}
}

// flatEmitter is the writing pass (jcsEmitter's output) over the flat index.
type flatEmitter struct {
	jcsEmitter // strings, numbers, the writer and the first problem
	flat       *flatIndex
	frames     []flatFrame
}

// A flatFrame is an object being written: its segment and the next member.
type flatFrame struct{ seg, next uint32 }

func newFlatEmitter(raw []byte, ix *flatIndex, ws *flatWorkspace, w *bufio.Writer) *flatEmitter {
	return &flatEmitter{
		jcsEmitter: jcsEmitter{raw: raw, w: w, kinds: jcsKinds{bits: ix.kinds[:0]}, num: ws.num[:0]},
		flat:       ix,
		frames:     ix.frames[:0],
	}
}

func (e *flatEmitter) run() {
	a := e.flat.a
	e.pos = jsonlex.SkipSpace(e.raw, e.pos)
	for {
		if e.value() {
			continue
		}
		for {
			if e.kinds.depth == 0 {
				return
			}
			if e.kinds.topIsObject() {
				f := &e.frames[len(e.frames)-1]
				first := f.seg + 2
				if f.next < first+a[f.seg] {
					if f.next != first {
						e.w.WriteByte(',')
					}
					m := a[f.next]
					f.next++
					if m&flatChild != 0 {
						child := m &^ flatChild
						e.writeKey(a[child+1])
						e.w.WriteByte('{')
						e.push(child)
						continue
					}
					e.pos = e.writeKey(m)
					break
				}
				e.w.WriteByte('}')
				seg := f.seg
				e.frames = e.frames[:len(e.frames)-1]
				e.kinds.pop()
				if e.kinds.depth > 0 && !e.kinds.topIsObject() {
					e.pos = int(a[seg+1]) // an array goes on after the object
				}
				continue
			}
			e.pos = jsonlex.SkipSpace(e.raw, e.pos)
			if e.raw[e.pos] == ',' {
				e.w.WriteByte(',')
				e.pos++
				e.pos = jsonlex.SkipSpace(e.raw, e.pos)
				break
			}
			e.w.WriteByte(']')
			e.pos++
			e.kinds.pop()
		}
	}
}

func (e *flatEmitter) push(seg uint32) {
	e.frames = append(e.frames, flatFrame{seg: seg, next: seg + 2})
	e.kinds.push(true)
}

// writeKey writes `"key":` for the key whose content starts at k and
// returns the offset of the member's value.
func (e *flatEmitter) writeKey(k uint32) int {
	raw := e.raw
	// Most keys are short plain ASCII, written as they stand: one look at
	// each byte finds the end and proves it.
	i := int(k)
	for raw[i] != '"' && raw[i] != '\\' && raw[i] < utf8.RuneSelf {
		i++
	}
	var end int
	if raw[i] == '"' {
		end = i + 1
		e.w.WriteByte('"')
		e.w.Write(raw[k:end])
	} else {
		end = jsonlex.SkipString(raw, int(k)-1)
		e.writeString(int(k), end-1)
	}
	e.w.WriteByte(':')
	p := jsonlex.SkipSpace(raw, end) + 1 // past the ':'
	return jsonlex.SkipSpace(raw, p)
}

// value writes the value at e.pos. For an array it writes only '[' and
// reports opened when the first element should be written next; a
// non-empty object gets a frame whose members the run loop writes. (Only
// objects no member owns reach here non-empty.)
func (e *flatEmitter) value() (opened bool) {
	switch c := e.raw[e.pos]; {
	case c == '[':
		e.w.WriteByte('[')
		e.pos++
		e.pos = jsonlex.SkipSpace(e.raw, e.pos)
		if e.raw[e.pos] == ']' {
			e.w.WriteByte(']')
			e.pos++
			return false
		}
		e.kinds.push(false)
		return true
	case c == '{':
		p := jsonlex.SkipSpace(e.raw, e.pos+1)
		if e.raw[p] == '}' {
			e.w.WriteString("{}")
			e.pos = p + 1
			return false
		}
		e.w.WriteByte('{')
		e.push(e.lookup(e.pos))
		return false
	case c == '"':
		end := jsonlex.SkipString(e.raw, e.pos)
		e.writeString(e.pos+1, end-1)
		e.pos = end
	case c == 't':
		e.w.WriteString("true")
		e.pos += 4
	case c == 'f':
		e.w.WriteString("false")
		e.pos += 5
	case c == 'n':
		e.w.WriteString("null")
		e.pos += 4
	default:
		e.writeNumber()
	}
	return false
}

func (e *flatEmitter) lookup(pos int) uint32 {
	i, _ := slices.BinarySearchFunc(e.flat.objects, uint32(pos), func(o flatObject, p uint32) int {
		return int(o.start) - int(p)
	})
	return e.flat.objects[i].seg
}
