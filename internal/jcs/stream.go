package jcs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// ErrNeedsWhole is Stream.Sum's answer (wrapped, with the reason) when the streamed
// fingerprint could not be computed exactly in bounded memory: the arguments were
// longer than the exact bound, and either an object's key arrived after a member that
// sorts after it had already been hashed (or duplicated one), or more was held back
// than the bounds allow. The arguments may well have a fingerprint; only the whole
// value (Fingerprint) could tell, and a caller that streams reports none.
var ErrNeedsWhole = errors.New("fingerprint needs the whole arguments")

// Bounds of a Stream (see Stream).
const (
	// StreamExactBound is how many bytes a Stream holds as they are: up to it,
	// Sum is Fingerprint of them, always exact.
	StreamExactBound = 1 << 20
	// streamMemberBound: an object member held back longer than this is hashed
	// as it streams (promoted), when the key order allows.
	streamMemberBound = 256 << 10
	// streamHeldBound: members held back (canonical, with their keys) and the
	// bookkeeping of the open objects, together.
	streamHeldBound = 1 << 20
	// streamKeyBound: the longest key of a held member.
	streamKeyBound = 64 << 10
	// streamNumberBound: the longest number literal read in pieces.
	streamNumberBound = 4 << 10
	// streamMaxDepth: nesting past the exact bound.
	streamMaxDepth = 1 << 18
)

// A Stream is Fingerprint of arguments handed over in pieces, in bounded memory: Write
// the raw JSON text of the arguments (exactly the bytes forwarded, in any
// fragmentation), then Sum.
//
// Up to StreamExactBound bytes are held and Sum is exactly Fingerprint of them. Past
// it, the value is canonicalized as it arrives: arrays, strings and numbers are hashed
// as they come; an object's members are held back (canonical, written sorted when the
// object closes) until one grows past 256 KiB, which is then hashed as it streams,
// after the held members that sort before it. That speculates that no later key of
// that object sorts before that member's or repeats it: a later one that does makes
// Sum return ErrNeedsWhole, as does holding more than 1 MiB of members (or a key over
// 64 KiB, a number over 4 KiB, nesting past 2^18 levels). Whenever Sum returns no
// error, it is what Fingerprint returns for the same bytes; input with no canonical
// form (not JSON, or a lone surrogate or overflowing number in what survives) fails as
// it fails Fingerprint.
//
// Nothing recurses on the input. A fresh Stream allocates under 6 MB whatever the
// input and however long (1 MiB of input held, two 256 KiB member buffers, the held
// members and open objects up to their 1 MiB, with growth), 1.7 MB for 64 MB of
// {"path":…,"content":…}, and a reused one nothing: Reset keeps the buffers. The zero
// value is ready; a Stream is not safe for concurrent use.
type Stream struct {
	fp     Fingerprinter // the exact path
	buf    []byte        // the input, while within the exact bound
	total  int64
	err    error
	bad    error // see noCanonical
	done   bool
	sum    string
	sumErr error

	// Bounds, zero for the defaults; tests set small ones.
	exactBound, memberBound, heldBound int

	streaming bool
	h         hash.Hash
	w         *bufio.Writer
	canon     Canonicalizer

	// The grammar.
	st    streamState
	kinds jcsKinds
	isKey bool
	lit   string // the literal being matched, litAt bytes of it seen
	litAt int
	uni   rune // a \u escape's value, uniN digits of it seen
	uniN  int
	num   []byte // the number being read

	// Writing strings: a high surrogate escape waiting for its low half, and the
	// start of a UTF-8 sequence that the next piece completes or breaks.
	high   rune
	carry  [4]byte
	carryN int
	numOut []byte

	// The member being held back: hold has its raw bytes from the key's quote, and
	// path, one entry per object open in it (the first for the member itself), the
	// offset in hold of that object's member being read (-1 between members).
	holding    bool
	hold       []byte
	replay     []byte
	holdDepth  int
	keyEnd     int // offset in hold past the key's closing quote, 0 before it
	valStart   int // offset in hold of the value
	path       []int32
	key        []byte // the held member's key as UTF-16 code units, big-endian
	replaying  bool
	replayBase int     // offset in the replayed hold of the replay's first byte
	chain      []int32 // offsets in it of the members to promote as they start
	chainAt    int
	forced     bool

	frames []streamFrame // the objects being written, innermost last
	recs   []streamRecord
	arena  byteSink // held members: each one's key (UTF-16) then `"key":value`
	keys   []byte   // the frontier keys of the frames, a stack
	order  []int32  // scratch: records to write, by key
	sumBuf [sha256.Size]byte
}

type streamState uint8

const (
	stValue    streamState = iota // a value must come
	stArrFirst                    // after '[': a value or ']'
	stObjFirst                    // after '{': a key or '}'
	stKey                         // after ',' in an object: a key
	stColon
	stAfter // after a value in a container: ',' or its end
	stEnd   // after the top-level value
	stString
	stEscape
	stUnicode
	stNumber
	stLiteral
)

// A streamFrame is an object being written. Its held members are recs[recBase:] and
// arena[arenaBase:], its frontier (the key of the member written last, that every
// later key must sort after) keys[keyBase:].
type streamFrame struct {
	recBase, arenaBase, keyBase int
	hasFront, wrote             bool
	dead                        int // arena bytes of records written or replaced
}

const streamFrameSize = 48

type streamRecord struct {
	key, keyLen, canon, canonLen int32 // in the arena
	bad                          bool  // no canonical form (lone surrogate, overflow)
}

const streamRecordSize = 20

// byteSink is an io.Writer appending to a slice of at most limit bytes; past it,
// it refuses and notes over (a held member's canonical form can be six times its
// text: 1e20 is 100000000000000000000).
type byteSink struct {
	b     []byte
	limit int
	over  bool
}

var errSinkFull = errors.New("held members past their bound")

func (s *byteSink) Write(p []byte) (int, error) {
	if len(s.b)+len(p) > s.limit {
		s.over = true
		return 0, errSinkFull
	}
	if len(s.b)+len(p) > cap(s.b) {
		s.b = append(make([]byte, 0, min(max(2*cap(s.b), len(s.b)+len(p), 1<<10), s.limit)), s.b...) // see holdBytes
	}
	s.b = append(s.b, p...)
	return len(p), nil
}

// doubled returns b with room for n more, grown twofold when it has none: append
// grows big slices by 1.25, and its copies would add up to five times the bound.
func doubled[T any](b []T, n int) []T {
	if len(b)+n <= cap(b) {
		return b
	}
	return append(make([]T, 0, max(2*cap(b), len(b)+n, 16)), b...)
}

// Reset makes s ready for another value, keeping its buffers.
func (s *Stream) Reset() {
	if cap(s.replay) > cap(s.hold) {
		s.hold, s.replay = s.replay, s.hold // the big one holds first
	}
	*s = Stream{
		fp: s.fp, buf: s.buf[:0], exactBound: s.exactBound, memberBound: s.memberBound, heldBound: s.heldBound,
		h: s.h, w: s.w, canon: s.canon,
		kinds: jcsKinds{bits: s.kinds.bits[:0]}, num: s.num[:0], numOut: s.numOut[:0],
		hold: s.hold[:0], replay: s.replay[:0], path: s.path[:0], key: s.key[:0], chain: s.chain[:0],
		frames: s.frames[:0], recs: s.recs[:0], arena: byteSink{b: s.arena.b[:0]}, keys: s.keys[:0], order: s.order[:0],
	}
}

func (s *Stream) bounds() (exact, member, held int) {
	exact, member, held = StreamExactBound, streamMemberBound, streamHeldBound
	if s.exactBound > 0 || s.memberBound > 0 {
		exact, member, held = s.exactBound, s.memberBound, s.heldBound
	}
	return exact, member, held
}

// Write takes the next piece of the arguments' text. It never fails: a problem is
// Sum's answer.
func (s *Stream) Write(p []byte) (int, error) {
	n := len(p)
	s.total += int64(n)
	if s.done {
		s.setErr(errors.New("write after Sum"))
	}
	if s.err != nil {
		return n, nil
	}
	if s.total > math.MaxInt32 {
		s.setErr(&jcsError{offset: math.MaxInt32, reason: "input larger than 2 GiB"})
		return n, nil
	}
	if !s.streaming {
		exact, _, _ := s.bounds()
		if len(s.buf)+len(p) <= exact {
			if len(s.buf)+len(p) > cap(s.buf) {
				// ×4, so that reaching the bound allocates 1.33 times it, not 2.
				c := min(max(4*cap(s.buf), 4<<10, len(s.buf)+len(p)), exact)
				s.buf = append(make([]byte, 0, c), s.buf...)
			}
			s.buf = append(s.buf, p...)
			return n, nil
		}
		s.startStreaming()
		s.feed(s.buf)
	}
	s.feed(p)
	return n, nil
}

func (s *Stream) setErr(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *Stream) needsWhole(why string) {
	s.setErr(fmt.Errorf("%w: %s", ErrNeedsWhole, why))
}

// noCanonical notes that what was written has no canonical form. It is not the
// answer yet: a later key may show that what was written does not survive (a
// duplicate replaces it), and then the answer is ErrNeedsWhole.
func (s *Stream) noCanonical(why string) {
	if s.bad != nil {
		return
	}
	s.bad = &jcsError{offset: int(s.total), reason: why + " (streamed, at or before this byte)"}
}

func (s *Stream) syntax(why string) {
	s.setErr(&jcsError{offset: int(s.total), reason: why + " (streamed, at or before this byte)"})
}

func (s *Stream) startStreaming() {
	s.streaming = true
	if s.h == nil {
		s.h = sha256.New()
		s.w = bufio.NewWriterSize(s.h, 32<<10)
	}
	s.h.Reset()
	s.w.Reset(s.h)
	s.st = stValue
}

// Sum returns the fingerprint of everything written, as Fingerprint would, or why
// there is none (ErrNeedsWhole: not decidable in bounded memory). It ends the value:
// Reset starts another.
func (s *Stream) Sum() (string, error) {
	if !s.done {
		s.done = true
		s.sum, s.sumErr = s.finish()
	}
	if s.sumErr == nil && s.err != nil {
		return "", fmt.Errorf("fingerprint arguments: %w", s.err) // written after Sum
	}
	return s.sum, s.sumErr
}

func (s *Stream) finish() (string, error) {
	if s.err == nil && !s.streaming {
		return s.fp.Fingerprint(s.buf)
	}
	if s.err == nil && s.st == stNumber {
		s.endNumber()
	}
	if s.err == nil && s.st != stEnd {
		s.syntax("unexpected end of input")
	}
	s.setErr(s.bad)
	if s.err != nil {
		return "", fmt.Errorf("fingerprint arguments: %w", s.err)
	}
	if err := s.w.Flush(); err != nil {
		return "", fmt.Errorf("fingerprint arguments: %w", err)
	}
	return sumString(s.h, &s.sumBuf), nil
}

// keep adds c to the held member, if one is being held.
func (s *Stream) keep(c byte) {
	if s.holding {
		s.holdBytes(c)
	}
}

// holdBytes appends to the held member. Its buffer grows fourfold, not by append's
// 1.25 for big slices, whose copies would add up to five times the bound.
func (s *Stream) holdBytes(p ...byte) {
	if len(s.hold)+len(p) > cap(s.hold) {
		_, member, _ := s.bounds()
		c := max(len(s.hold)+len(p), min(max(4*cap(s.hold), 1<<10), member+2))
		s.hold = append(make([]byte, 0, c), s.hold...)
	}
	s.hold = append(s.hold, p...)
}

// out writes c, unless a member is being held.
func (s *Stream) out(c byte) {
	if !s.holding {
		s.w.WriteByte(c)
	}
}

// feed runs the grammar over p. Called again, once, by promote to replay what was held.
func (s *Stream) feed(p []byte) {
	_, member, _ := s.bounds()
	i := 0
	for i < len(p) && s.err == nil {
		c := p[i]
		switch s.st {
		case stString:
			i = s.stringRun(p, i, member)
		case stValue, stArrFirst:
			switch {
			case jsonlex.IsSpace(c):
				s.keep(c)
			case c == ']' && s.st == stArrFirst:
				s.closeContainer(c)
			default:
				s.beginValue(c)
			}
			i++
		case stObjFirst, stKey:
			switch {
			case jsonlex.IsSpace(c):
				s.keep(c)
			case c == '}' && s.st == stObjFirst:
				s.closeContainer(c)
			case c == '"':
				s.beginKey(i)
			default:
				s.syntax("expected a string key")
			}
			i++
		case stColon:
			switch {
			case jsonlex.IsSpace(c):
				s.keep(c)
			case c == ':':
				s.keep(c)
				s.out(c)
				s.st = stValue
			default:
				s.syntax("expected ':' after an object key")
			}
			i++
		case stAfter:
			obj := s.kinds.topIsObject()
			switch {
			case jsonlex.IsSpace(c):
				s.keep(c)
			case c == ',':
				s.keep(c)
				if obj {
					s.st = stKey
					if s.holding {
						s.path[len(s.path)-1] = -1
					}
				} else {
					s.out(c)
					s.st = stValue
				}
			case (c == '}') == obj && (c == '}' || c == ']'):
				s.closeContainer(c)
			default:
				s.syntax("expected ',' or the end of the container")
			}
			i++
		case stEnd:
			if !jsonlex.IsSpace(c) {
				s.syntax("data after the top-level value")
			}
			i++
		case stEscape:
			s.keep(c)
			if c == 'u' {
				s.st, s.uni, s.uniN = stUnicode, 0, 0
			} else if v, ok := jsonlex.Unescape(c); ok {
				s.st = stString
				s.writeEscape(v)
			} else {
				s.syntax("invalid escape")
			}
			i++
		case stUnicode:
			v := hexDigit(c)
			if v < 0 {
				s.syntax("invalid \\u escape")
				break
			}
			s.keep(c)
			s.uni = s.uni<<4 | v
			if s.uniN++; s.uniN == 4 {
				s.st = stString
				if !s.holding {
					s.writeUnit(s.uni)
				}
			}
			i++
		case stNumber:
			if ('0' <= c && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
				if len(s.num) == streamNumberBound {
					s.needsWhole("a number longer than 4 KiB")
					break
				}
				s.num = append(s.num, c)
				s.keep(c)
				i++
				continue
			}
			s.endNumber() // c is the next token's
		case stLiteral:
			if c != s.lit[s.litAt] {
				s.syntax("expected a value")
				break
			}
			s.keep(c)
			if s.litAt++; s.litAt == len(s.lit) {
				if !s.holding {
					if s.kinds.depth == 0 && s.lit == "null" {
						s.w.WriteString("{}") // absent arguments hash as {}
					} else {
						s.w.WriteString(s.lit)
					}
				}
				s.valueDone()
			}
			i++
		}
		if s.holding && !s.replaying && len(s.hold) > member && s.err == nil {
			if s.keyEnd != 0 {
				s.promote()
			} else if len(s.hold) > streamKeyBound {
				s.needsWhole("a key longer than 64 KiB")
			}
		}
	}
}

func hexDigit(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

func (s *Stream) push(isObject bool) bool {
	if s.kinds.depth == streamMaxDepth {
		s.needsWhole("nesting deeper than 2^18")
		return false
	}
	s.kinds.push(isObject)
	return true
}

func (s *Stream) beginValue(c byte) {
	if s.holding && s.kinds.depth == s.holdDepth {
		s.valStart = len(s.hold)
	}
	switch {
	case c == '{', c == '[':
		obj := c == '{'
		if !s.push(obj) {
			return
		}
		s.keep(c)
		s.out(c)
		s.st = stArrFirst
		if obj {
			s.st = stObjFirst
		}
		if s.holding && obj {
			s.path = append(doubled(s.path, 1), -1)
		} else if obj {
			s.pushFrame()
		}
	case c == '"':
		s.keep(c)
		s.out(c)
		s.st, s.isKey = stString, false
	case c == '-' || ('0' <= c && c <= '9'):
		s.keep(c)
		s.num = append(s.num[:0], c)
		s.st = stNumber
	case c == 't' || c == 'f' || c == 'n':
		s.keep(c)
		s.lit, s.litAt, s.st = "true", 1, stLiteral
		if c == 'f' {
			s.lit = "false"
		} else if c == 'n' {
			s.lit = "null"
		}
	default:
		s.syntax("expected a value")
	}
}

// beginKey starts a key at offset i of the piece being fed: in a held member, one
// more byte; in an object being written, a member to hold.
func (s *Stream) beginKey(i int) {
	if s.holding {
		s.path[len(s.path)-1] = int32(len(s.hold))
	} else {
		s.holding = true
		s.hold = s.hold[:0]
		s.holdDepth = s.kinds.depth
		s.keyEnd, s.valStart = 0, 0
		s.path = append(s.path[:0], 0)
		s.forced = false
		if s.replaying && s.chainAt < len(s.chain) && int32(s.replayBase+i) == s.chain[s.chainAt] {
			s.forced = true
			s.chainAt++
		}
	}
	s.holdBytes('"')
	s.st, s.isKey = stString, true
}

// stringRun reads string content from p[i], in bulk up to the next quote,
// backslash or control character.
func (s *Stream) stringRun(p []byte, i, member int) int {
	start := i
	end := len(p)
	if s.holding && !s.replaying {
		// Promote before holding more (past the key).
		if s.keyEnd == 0 {
			member = max(member, streamKeyBound)
		}
		end = min(end, i+member+1-len(s.hold))
	}
	for {
		for i+8 <= end && !jcsStringStop(binary.LittleEndian.Uint64(p[i:])) {
			i += 8
		}
		for i < end && p[i] != '"' && p[i] != '\\' && p[i] >= 0x20 {
			i++
		}
		if run := p[start:i]; len(run) > 0 {
			if s.holding {
				s.holdBytes(run...)
			} else {
				s.noHigh()
				s.writeText(run)
			}
		}
		if i == end {
			return i
		}
		// An escape whole in this piece is read here, not byte by byte (source
		// code in a file's content is full of \n, \t and \").
		n := 0
		if p[i] == '\\' && i+1 < end && p[i+1] != 'u' {
			n = 2
		} else if p[i] == '\\' && i+5 < end {
			n = 6
		}
		if n == 0 {
			break
		}
		if s.holding {
			s.holdBytes(p[i : i+n]...)
		} else {
			s.endText()
		}
		if n == 2 {
			v, ok := jsonlex.Unescape(p[i+1])
			if !ok {
				s.syntax("invalid escape")
				return i + n
			}
			s.writeEscape(v)
		} else {
			cu, ok := jsonlex.Hex4(p, i+2)
			if !ok {
				s.syntax("invalid \\u escape")
				return i + n
			}
			if !s.holding {
				s.writeUnit(cu)
			}
		}
		i += n
		start = i
	}
	switch c := p[i]; {
	case c == '"':
		s.keep(c)
		if s.isKey {
			s.st = stColon
			if s.holding && s.kinds.depth == s.holdDepth {
				s.keyEnd = len(s.hold)
				s.memberKey()
			}
			return i + 1
		}
		if !s.holding {
			s.endText()
			s.noHigh()
			s.w.WriteByte('"')
		}
		s.valueDone()
	case c == '\\':
		s.keep(c)
		if !s.holding {
			s.endText()
		}
		s.st = stEscape
	default:
		s.syntax("control character in string")
	}
	return i + 1
}

// writeEscape writes the character of an escape other than \u, unless holding.
func (s *Stream) writeEscape(v byte) {
	if !s.holding {
		s.noHigh()
		jcsWriteChar(s.w, rune(v))
	}
}

// noHigh: a high surrogate escape not followed by a low one is lone.
func (s *Stream) noHigh() {
	if s.high != 0 {
		s.noCanonical("lone surrogate")
		s.high = 0
	}
}

// writeUnit writes the UTF-16 code unit of a \u escape, pairing surrogates.
func (s *Stream) writeUnit(u rune) {
	hi := s.high
	s.high = 0
	switch {
	case hi != 0 && 0xDC00 <= u && u <= 0xDFFF:
		jcsWriteChar(s.w, utf16.DecodeRune(hi, u))
	case hi != 0:
		s.noCanonical("lone surrogate")
		s.writeUnit(u) // u starts afresh
	case 0xD800 <= u && u <= 0xDBFF:
		s.high = u
	case 0xDC00 <= u && u <= 0xDFFF:
		s.noCanonical("lone surrogate")
	default:
		jcsWriteChar(s.w, u)
	}
}

// writeText writes unescaped string content, which may end or start inside a UTF-8
// sequence: what the WHATWG decoder makes of the whole, piece by piece.
func (s *Stream) writeText(t []byte) {
	for s.carryN > 0 && len(t) > 0 {
		need, _, lo, hi := whatwgLead(s.carry[0])
		if s.carryN > 1 {
			lo, hi = 0x80, 0xBF
		}
		if t[0] < lo || t[0] > hi {
			s.w.WriteString("\uFFFD") // t[0] starts afresh
			s.carryN = 0
			break
		}
		s.carry[s.carryN] = t[0]
		s.carryN++
		t = t[1:]
		if s.carryN == need+1 {
			s.w.Write(s.carry[:s.carryN])
			s.carryN = 0
		}
	}
	if len(t) == 0 {
		return
	}
	k := incompleteTail(t)
	writeText(s.w, t[:len(t)-k])
	s.carryN = copy(s.carry[:], t[len(t)-k:])
}

// endText ends a stretch of text: a sequence still open is one U+FFFD.
func (s *Stream) endText() {
	if s.carryN > 0 {
		s.w.WriteString("\uFFFD")
		s.carryN = 0
	}
}

// incompleteTail is how many bytes at the end of t are the valid start of a UTF-8
// sequence that needs more bytes.
func incompleteTail(t []byte) int {
	for k := min(3, len(t)); k >= 1; k-- {
		need, _, lo, hi := whatwgLead(t[len(t)-k])
		if need < k {
			continue
		}
		ok := true
		for j, b := range t[len(t)-k+1:] {
			if j > 0 {
				lo, hi = 0x80, 0xBF
			}
			if b < lo || b > hi {
				ok = false
				break
			}
		}
		if ok {
			return k
		}
	}
	return 0
}

func (s *Stream) endNumber() {
	sc := jcsScanner{raw: s.num, suspectAt: -1}
	if err := sc.number(); err != nil || sc.pos != len(s.num) {
		s.syntax("invalid number")
		return
	}
	if !s.holding {
		var ok bool
		s.numOut, ok = appendESNumber(s.numOut[:0], s.num)
		if !ok {
			s.noCanonical("number overflows a double")
		}
		s.w.Write(s.numOut)
	}
	s.valueDone()
}

// valueDone follows a complete value: a held member may be complete.
func (s *Stream) valueDone() {
	s.st = stAfter
	if s.kinds.depth == 0 {
		s.st = stEnd
	}
	if s.holding && s.kinds.depth == s.holdDepth {
		s.finishMember()
	}
}

func (s *Stream) closeContainer(c byte) {
	if s.holding {
		s.keep(c)
		if c == '}' {
			s.path = s.path[:len(s.path)-1]
		}
	} else if c == '}' {
		s.writeRecords(nil, false)
		s.w.WriteByte('}')
		f := s.frames[len(s.frames)-1]
		s.recs, s.arena.b, s.keys = s.recs[:f.recBase], s.arena.b[:f.arenaBase], s.keys[:f.keyBase]
		s.frames = s.frames[:len(s.frames)-1]
	} else {
		s.w.WriteByte(']')
	}
	s.kinds.pop()
	s.valueDone()
}

func (s *Stream) held() int {
	return len(s.arena.b) + streamRecordSize*len(s.recs) + len(s.keys) + streamFrameSize*len(s.frames)
}

func (s *Stream) overHeld() bool {
	if _, _, bound := s.bounds(); s.held() > bound {
		s.needsWhole("more than 1 MiB of members held back")
		return true
	}
	return false
}

func (s *Stream) pushFrame() {
	s.frames = append(doubled(s.frames, 1), streamFrame{recBase: len(s.recs), arenaBase: len(s.arena.b), keyBase: len(s.keys)})
	s.overHeld()
}

// memberKey follows the key of the held member: it must sort after the member
// written last in its object.
func (s *Stream) memberKey() {
	s.key = s.key[:0]
	u := utf16Units{s: s.hold[1 : s.keyEnd-1]}
	for {
		c, ok := u.next()
		if !ok {
			break
		}
		s.key = append(s.key, byte(c>>8), byte(c))
	}
	f := &s.frames[len(s.frames)-1]
	if f.hasFront && bytes.Compare(s.key, s.keys[f.keyBase:]) <= 0 {
		s.needsWhole("a key came after a member that sorts after it was hashed")
		return
	}
	if s.forced {
		s.startMember()
	}
}

// finishMember keeps the complete held member, canonical, to write when its place
// comes.
func (s *Stream) finishMember() {
	s.holding = false
	_, _, bound := s.bounds()
	s.arena.limit = bound
	r := streamRecord{key: int32(len(s.arena.b)), keyLen: int32(len(s.key))}
	s.arena.Write(s.key)
	r.canon = int32(len(s.arena.b))
	if !s.canonicalTo(&s.arena, s.hold[:s.keyEnd]) {
		r.bad = true
	} else {
		s.arena.Write([]byte{':'})
		if !s.canonicalTo(&s.arena, s.hold[s.valStart:]) {
			r.bad = true
		}
	}
	if r.bad {
		s.arena.b = s.arena.b[:r.canon]
	}
	if s.arena.over {
		s.needsWhole("more than 1 MiB of members held back")
		return
	}
	r.canonLen = int32(len(s.arena.b)) - r.canon
	s.recs = append(doubled(s.recs, 1), r)
	s.hold = s.hold[:0]
	s.overHeld()
}

// canonicalTo appends the canonical form of the validated value v and reports
// whether it has one. The usual small member (a plain string, a literal, a number)
// is written without a Canonicalizer, whose set-up costs more than it.
func (s *Stream) canonicalTo(w *byteSink, v []byte) bool {
	switch c := v[0]; {
	case c == '"':
		for _, b := range v[1 : len(v)-1] {
			if b == '\\' || b >= utf8.RuneSelf {
				return s.canon.Canonicalize(w, v) == nil
			}
		}
		w.Write(v) // validated: no control characters
		return true
	case c == 't' || c == 'f' || c == 'n':
		w.Write(v)
		return true
	case c == '-' || ('0' <= c && c <= '9'):
		var ok bool
		s.numOut, ok = appendESNumber(s.numOut[:0], v)
		w.Write(s.numOut)
		return ok
	}
	return s.canon.Canonicalize(w, v) == nil
}

// startMember writes the held member's key, after the held members that sort before
// it, and writes the rest as it comes.
func (s *Stream) startMember() {
	s.writeRecords(s.key, true)
	if s.err != nil {
		return
	}
	f := &s.frames[len(s.frames)-1]
	if f.wrote {
		s.w.WriteByte(',')
	}
	f.wrote = true
	if err := s.canon.Canonicalize(s.w, s.hold[:s.keyEnd]); err != nil {
		s.noCanonical("lone surrogate")
	}
	s.keys = append(doubled(s.keys[:f.keyBase], len(s.key)), s.key...)
	f.hasFront = true
	s.holding = false
	s.overHeld()
}

// promote hashes the held member from here on: it writes its key (startMember),
// then feeds again what was held after it, this time writing. Members inside it
// that are open and longer than half the member bound (the path to the present
// byte) are promoted as they start (chain), so what is held again is at most half
// the bound and every promotion replays bytes that are at least half new.
func (s *Stream) promote() {
	_, member, _ := s.bounds()
	s.chain = s.chain[:0]
	for _, off := range s.path[1:] {
		if off < 0 || len(s.hold)-int(off) <= member/2 {
			break
		}
		s.chain = append(s.chain, off)
	}
	s.kinds.depth = s.holdDepth
	s.st, s.isKey, s.high, s.carryN = stColon, false, 0, 0
	s.startMember() // reads the key from s.hold
	if s.err != nil {
		return
	}
	held := s.hold
	s.hold, s.replay = s.replay[:0], held // the replay's own holds go to the other buffer
	s.replaying, s.replayBase, s.chainAt = true, s.keyEnd, 0
	s.feed(held[s.keyEnd:])
	s.replaying = false
}

// writeRecords writes the held members of the innermost object that sort before
// key (all of them unless below), in order, the last of equal keys winning; a member
// equal to key is dropped (key comes later and wins). The rest stay held.
func (s *Stream) writeRecords(key []byte, below bool) {
	f := &s.frames[len(s.frames)-1]
	recs := s.recs[f.recBase:]
	arena := s.arena.b
	keyOf := func(i int32) []byte { r := recs[i]; return arena[r.key : r.key+r.keyLen] }
	s.order = s.order[:0]
	for i := range recs {
		if !below || bytes.Compare(keyOf(int32(i)), key) < 0 {
			s.order = append(doubled(s.order, 1), int32(i))
		}
	}
	// Stable: of equal keys the last held sorts last.
	slices.SortStableFunc(s.order, func(a, b int32) int { return bytes.Compare(keyOf(a), keyOf(b)) })
	for j, i := range s.order {
		if j+1 < len(s.order) && bytes.Equal(keyOf(i), keyOf(s.order[j+1])) {
			continue // replaced by a later duplicate
		}
		r := recs[i]
		if r.bad {
			s.noCanonical("lone surrogate or number overflowing a double")
		}
		if f.wrote {
			s.w.WriteByte(',')
		}
		f.wrote = true
		s.w.Write(arena[r.canon : r.canon+r.canonLen])
	}
	if !below {
		return // the object ends: the caller drops its records
	}
	n := 0
	for i, r := range recs {
		if bytes.Compare(keyOf(int32(i)), key) > 0 {
			recs[n] = r
			n++
		} else {
			f.dead += int(r.keyLen + r.canonLen)
		}
	}
	s.recs = s.recs[:f.recBase+n]
	if live := len(arena) - f.arenaBase - f.dead; f.dead > live {
		// Copy the kept ones down (in arena order, so never over one unread).
		at := int32(f.arenaBase)
		for i := range s.recs[f.recBase:] {
			r := &s.recs[f.recBase+i]
			size := r.keyLen + r.canonLen
			copy(arena[at:at+size], arena[r.key:r.key+size])
			r.canon = at + r.keyLen
			r.key = at
			at += size
		}
		s.arena.b = arena[:at]
		f.dead = 0
	}
}
