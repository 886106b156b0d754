// Package jcs is the JSON Canonicalization Scheme (RFC 8785) as the host applies it,
// and the argument fingerprint of SPEC §3.2 built on it. It is a package of its own
// because its reader differs from the proxy's lexer on purpose: it validates every
// byte and must emit canonical bytes, where jsonlex only follows structure.
package jcs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Canonicalize writes the RFC 8785 form of the JSON value raw to w.
//
// The value is read the way JavaScript's JSON.parse reads it (numbers are
// IEEE doubles, of duplicate keys the last wins, invalid UTF-8 decodes to
// U+FFFD as a WHATWG UTF-8 decoder does) and written the way the npm
// canonicalize package writes it, because the host computes its fingerprint
// with exactly those two. Input with no canonical form is an error, and then
// nothing has been written to w: the whole input is checked before the first
// byte goes out. No canonical form means not JSON, or a number JSON.parse
// makes ±Infinity of, or a lone surrogate (canonicalize rejects both, as RFC
// 8785 asks) in a part of the value that survives duplicate-key removal: in
// a member a later duplicate replaces, the host never sees them.
//
// Nesting depth is not limited and no recursion is used, so hostile depth
// costs heap proportional to the input, never the goroutine stack (whose
// overflow would kill the process, not fail the call).
func Canonicalize(w io.Writer, raw []byte) error {
	return new(Canonicalizer).Canonicalize(w, raw)
}

// A Canonicalizer is Canonicalize with its workspace, scanner and write buffer kept
// from one value to the next, for a goroutine that canonicalizes one value after
// another (the proxy's bookkeeping, which fingerprints every call: the workspace, the
// scanner, a bufio.Writer and its buffer were four allocations per call). Its zero
// value is ready; it is not safe for concurrent use.
type Canonicalizer struct {
	ws   flatWorkspace
	scan flatScanner
	bw   *bufio.Writer
	dry  *bufio.Writer
}

// Canonicalize is the package's Canonicalize.
func (c *Canonicalizer) Canonicalize(w io.Writer, raw []byte) error {
	// The scanner's index may have outgrown the workspace on a big value: it must not
	// be kept for the next one.
	defer func() { c.scan = flatScanner{} }()
	ix, err := flatScan(raw, &c.ws, &c.scan)
	if err != nil {
		return err
	}
	if ix.suspect >= 0 {
		// Whether a lone surrogate or an infinite number survives depends on
		// which duplicates win, which only the writing pass works out; a dry
		// run finds out before anything reaches w. Rare, so it may cost a
		// second walk.
		if c.dry == nil {
			c.dry = bufio.NewWriterSize(io.Discard, 512)
		}
		c.dry.Reset(io.Discard)
		dry := newFlatEmitter(raw, ix, &c.ws, c.dry)
		dry.run()
		if dry.bad != nil {
			return dry.bad
		}
	}
	// The buffer grows to what the values need (up to jcsBufferSize's cap), and is
	// then kept: a small one for small arguments, large chunks for big payloads.
	if size := jcsBufferSize(len(raw)); c.bw == nil || c.bw.Size() < size {
		// Made on io.Discard, not w: given a big enough *bufio.Writer, NewWriterSize
		// returns that one, which this would then keep and reset under its owner.
		c.bw = bufio.NewWriterSize(io.Discard, size)
	}
	bw := c.bw
	bw.Reset(w)
	defer bw.Reset(io.Discard) // w must not be kept past the call
	e := newFlatEmitter(raw, ix, &c.ws, bw)
	// bufio.Writer keeps the first write error, so the writing pass need
	// not check each write; Flush reports it.
	e.run()
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write canonical JSON: %w", err)
	}
	return nil
}

// jcsBufferSize keeps the per-call buffer small for the common small arguments
// while letting big payloads reach the writer in large chunks.
func jcsBufferSize(n int) int {
	return min(max(n+16, 512), 64<<10)
}

// A jcsError says why raw has no canonical form and where.
type jcsError struct {
	offset int
	reason string
}

func (e *jcsError) Error() string {
	return fmt.Sprintf("no canonical JSON form: %s at byte %d", e.reason, e.offset)
}

// jcsKinds records, per nesting level, whether the container is an object,
// at one bit a level so that even absurd depth stays cheap.
type jcsKinds struct {
	bits  []uint64
	depth int
}

func (s *jcsKinds) push(isObject bool) {
	w, b := s.depth/64, uint(s.depth%64)
	if w == len(s.bits) {
		s.bits = append(s.bits, 0)
	}
	if isObject {
		s.bits[w] |= 1 << b
	} else {
		s.bits[w] &^= 1 << b
	}
	s.depth++
}

func (s *jcsKinds) pop() { s.depth-- }

func (s *jcsKinds) topIsObject() bool {
	d := s.depth - 1
	return s.bits[d/64]&(1<<uint(d%64)) != 0
}

// jcsScanner is the grammar of the validating pass: exactly that of
// JSON.parse (RFC 8259). flatScanner walks the structure with it and records
// the index.
type jcsScanner struct {
	raw       []byte
	pos       int
	kinds     jcsKinds
	suspectAt int // offset of the first lone surrogate or infinite number, or -1
}

func (s *jcsScanner) fail(reason string) error {
	return &jcsError{offset: s.pos, reason: reason}
}

func (s *jcsScanner) suspect(at int) {
	if s.suspectAt < 0 {
		s.suspectAt = at
	}
}

func (s *jcsScanner) literal(word string) error {
	if !bytes.HasPrefix(s.raw[s.pos:], []byte(word)) {
		return s.fail("expected a value")
	}
	s.pos += len(word)
	return nil
}

const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

// jcsStringStop reports whether any of the 8 bytes in x is a control character,
// '"' or '\\', the only bytes that end the fast path through a string.
func jcsStringStop(x uint64) bool {
	ctl := (x - 0x20*swarOnes) &^ x & swarHighs
	q := x ^ ('"' * swarOnes)
	q = (q - swarOnes) &^ q & swarHighs
	b := x ^ ('\\' * swarOnes)
	b = (b - swarOnes) &^ b & swarHighs
	return ctl|q|b != 0
}

// str consumes a string starting at its opening quote and reports whether
// it holds escapes. Invalid UTF-8 is not an error (it decodes to U+FFFD), and
// neither is a lone surrogate escape yet (see Canonicalize).
func (s *jcsScanner) str() (escaped bool, err error) {
	raw := s.raw
	i := s.pos + 1
	for {
		for i+8 <= len(raw) && !jcsStringStop(binary.LittleEndian.Uint64(raw[i:])) {
			i += 8
		}
		if i == len(raw) {
			s.pos = i
			return escaped, s.fail("unterminated string")
		}
		switch c := raw[i]; {
		case c == '"':
			s.pos = i + 1
			return escaped, nil
		case c == '\\':
			escaped = true
			s.pos = i
			n, err := s.escape()
			if err != nil {
				return escaped, err
			}
			i += n
		case c < 0x20:
			s.pos = i
			return escaped, s.fail("control character in string")
		default:
			i++
		}
	}
}

// escape validates the escape at s.pos and returns its length in bytes.
func (s *jcsScanner) escape() (int, error) {
	rest := s.raw[s.pos:]
	if len(rest) < 2 {
		return 0, s.fail("unterminated string")
	}
	if rest[1] != 'u' {
		if _, ok := jsonlex.Unescape(rest[1]); !ok {
			return 0, s.fail("invalid escape")
		}
		return 2, nil
	}
	cu, ok := jsonlex.Hex4(rest, 2)
	if !ok {
		return 0, s.fail("invalid \\u escape")
	}
	if utf16.IsSurrogate(cu) {
		if _, ok := jcsSurrogatePair(rest); !ok {
			s.suspect(s.pos)
			return 6, nil
		}
		return 12, nil
	}
	return 6, nil
}

// jcsSurrogatePair decodes s when it starts with the escapes of a well-formed
// surrogate pair. The first \u escape must already be known to be valid.
func jcsSurrogatePair(s []byte) (rune, bool) {
	hi, _ := jsonlex.Hex4(s, 2)
	if hi < 0xD800 || hi > 0xDBFF || len(s) < 12 || s[6] != '\\' || s[7] != 'u' {
		return 0, false
	}
	lo, ok := jsonlex.Hex4(s, 8)
	if !ok || lo < 0xDC00 || lo > 0xDFFF {
		return 0, false
	}
	return utf16.DecodeRune(hi, lo), true
}

// number consumes -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and notes
// values JSON.parse turns into ±Infinity, which canonicalize rejects. It is
// jsonlex.NumberEnd's grammar, kept here because the overflow check needs what
// this pass learns on the way (an exponent, the integer digits): finding them
// again after NumberEnd cost 5% more instructions on an array of numbers.
func (s *jcsScanner) number() error {
	raw := s.raw
	start, i := s.pos, s.pos
	if raw[i] == '-' {
		i++
	}
	intStart := i
	if i < len(raw) && raw[i] == '0' {
		i++
	} else if j := jcsSkipDigits(raw, i); j > i {
		i = j
	} else {
		s.pos = i
		return s.fail("invalid number")
	}
	intDigits := i - intStart
	exp := false
	if i < len(raw) && raw[i] == '.' {
		j := jcsSkipDigits(raw, i+1)
		if j == i+1 {
			s.pos = j
			return s.fail("invalid number")
		}
		i = j
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		exp = true
		i++
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		j := jcsSkipDigits(raw, i)
		if j == i {
			s.pos = j
			return s.fail("invalid number")
		}
		i = j
	}
	// Below 10^308 nothing overflows; only look closer when it might.
	if exp || intDigits > 308 {
		if f, _ := strconv.ParseFloat(string(raw[start:i]), 64); math.IsInf(f, 0) {
			s.suspect(start)
		}
	}
	s.pos = i
	return nil
}

func jcsSkipDigits(raw []byte, i int) int {
	for i < len(raw) && '0' <= raw[i] && raw[i] <= '9' {
		i++
	}
	return i
}

// jcsEmitter is the output of the writing pass: strings, numbers and
// literals as the host writes them. flatEmitter walks the validated input
// again with it, streaming arrays and scalars in order and visiting object
// members in canonical order through the index.
type jcsEmitter struct {
	raw   []byte
	w     *bufio.Writer
	pos   int
	kinds jcsKinds
	num   []byte
	bad   *jcsError // first value written that has no canonical form
}

func (e *jcsEmitter) fail(at int, reason string) {
	if e.bad == nil {
		e.bad = &jcsError{offset: at, reason: reason}
	}
}

// utf16Units yields the UTF-16 code units of validated string content, decoding
// escapes and UTF-8 (invalid UTF-8 as U+FFFD) on the fly, so comparing keys
// needs no decoded copies.
type utf16Units struct {
	s   []byte
	i   int
	low uint16 // second half of a surrogate pair still to yield; never 0 when pending
}

func (u *utf16Units) next() (uint16, bool) {
	if u.low != 0 {
		c := u.low
		u.low = 0
		return c, true
	}
	if u.i >= len(u.s) {
		return 0, false
	}
	c := u.s[u.i]
	if c == '\\' {
		e := u.s[u.i+1]
		if e == 'u' {
			cu, _ := jsonlex.Hex4(u.s, u.i+2)
			u.i += 6
			return uint16(cu), true
		}
		u.i += 2
		c, _ := jsonlex.Unescape(e)
		return uint16(c), true
	}
	if c < utf8.RuneSelf {
		u.i++
		return uint16(c), true
	}
	r, n := decodeRuneWHATWG(u.s[u.i:])
	u.i += n
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		u.low = uint16(lo)
		return uint16(hi), true
	}
	return uint16(r), true
}

// decodeRuneWHATWG decodes one UTF-8 sequence from non-empty b as the WHATWG
// decoder does, which is how the host turned bytes into text: an invalid
// sequence yields one U+FFFD for its maximal valid prefix (at least one
// byte). utf8.DecodeRune differs: it yields one U+FFFD per byte of a
// truncated sequence, which would change the hash.
func decodeRuneWHATWG(b []byte) (rune, int) {
	c := b[0]
	if c < utf8.RuneSelf {
		return rune(c), 1
	}
	need, r, lo, hi := whatwgLead(c)
	if need == 0 {
		return utf8.RuneError, 1
	}
	i := 1
	for ; need > 0; need-- {
		if i == len(b) || b[i] < lo || b[i] > hi {
			return utf8.RuneError, i
		}
		r = r<<6 | rune(b[i]&0x3F)
		lo, hi = 0x80, 0xBF
		i++
	}
	return r, i
}

// whatwgLead says what the WHATWG decoder expects after the non-ASCII byte
// c: need continuation bytes (0 when c cannot start a sequence), the first
// of them in lo..hi (the rest in 0x80..0xBF), and the bits c contributes.
func whatwgLead(c byte) (need int, r rune, lo, hi byte) {
	lo, hi = 0x80, 0xBF
	switch {
	case 0xC2 <= c && c <= 0xDF:
		return 1, rune(c & 0x1F), lo, hi
	case c == 0xE0:
		return 2, rune(c & 0x0F), 0xA0, hi
	case c == 0xED:
		return 2, rune(c & 0x0F), lo, 0x9F
	case 0xE1 <= c && c <= 0xEF:
		return 2, rune(c & 0x0F), lo, hi
	case c == 0xF0:
		return 3, rune(c & 0x07), 0x90, hi
	case c == 0xF4:
		return 3, rune(c & 0x07), lo, 0x8F
	case 0xF1 <= c && c <= 0xF3:
		return 3, rune(c & 0x07), lo, hi
	}
	return 0, 0, 0, 0
}

// writeString writes the validated string content raw[start:end] as
// JSON.stringify would: only '"', '\\' and controls escaped, everything else
// as raw UTF-8.
func (e *jcsEmitter) writeString(start, end int) {
	s := e.raw[start:end]
	w := e.w
	w.WriteByte('"')
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			e.writeText(s)
			break
		}
		e.writeText(s[:i])
		s = s[i:]
		if s[1] != 'u' {
			c, _ := jsonlex.Unescape(s[1])
			jcsWriteChar(w, rune(c))
			s = s[2:]
			continue
		}
		r, _ := jsonlex.Hex4(s, 2)
		if utf16.IsSurrogate(r) {
			pair, ok := jcsSurrogatePair(s)
			if !ok {
				e.fail(end-len(s), "lone surrogate")
				s = s[6:]
				continue
			}
			r = pair
			s = s[6:]
		}
		s = s[6:]
		jcsWriteChar(w, r)
	}
	w.WriteByte('"')
}

// writeText writes unescaped string bytes, which the scanner guarantees
// hold no quote, backslash or control character; only invalid UTF-8 needs
// rewriting.
func (e *jcsEmitter) writeText(s []byte) { writeText(e.w, s) }

func writeText(w *bufio.Writer, s []byte) {
	if utf8.Valid(s) {
		w.Write(s)
		return
	}
	for len(s) > 0 {
		i := 0
		for i < len(s) {
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		w.Write(s[:i])
		if i == len(s) {
			return
		}
		_, n := decodeRuneWHATWG(s[i:])
		w.WriteString("\uFFFD")
		s = s[i+n:]
	}
}

// jcsWriteChar writes the character an escape stood for, escaped again as
// JSON.stringify escapes it. It is jsonlex.AppendEscaped's rule for one
// character, written straight into the buffer: escapes (\n, \", \t in source
// code) can be most of a string, and going through AppendEscaped measured 13%
// slower on such strings.
func jcsWriteChar(w *bufio.Writer, r rune) {
	switch {
	case r == '"':
		w.WriteString(`\"`)
	case r == '\\':
		w.WriteString(`\\`)
	case r >= 0x20:
		w.WriteRune(r)
	case r == '\b':
		w.WriteString(`\b`)
	case r == '\t':
		w.WriteString(`\t`)
	case r == '\n':
		w.WriteString(`\n`)
	case r == '\f':
		w.WriteString(`\f`)
	case r == '\r':
		w.WriteString(`\r`)
	default:
		const hex = "0123456789abcdef"
		w.WriteString(`\u00`)
		w.WriteByte(hex[r>>4])
		w.WriteByte(hex[r&0xF])
	}
}

// writeNumber writes the validated number at e.pos as ECMAScript's
// Number.prototype.toString prints the double JSON.parse makes of it.
func (e *jcsEmitter) writeNumber() {
	raw := e.raw
	start, i := e.pos, e.pos
	for i < len(raw) {
		c := raw[i]
		if ('0' <= c && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			i++
			continue
		}
		break
	}
	e.pos = i
	var ok bool
	e.num, ok = appendESNumber(e.num[:0], raw[start:i])
	if !ok {
		e.fail(start, "number overflows a double")
	}
	e.w.Write(e.num)
}

// appendESNumber appends the ECMAScript form of the JSON number literal lit,
// or reports false when its double is infinite.
func appendESNumber(dst, lit []byte) ([]byte, bool) {
	var buf [32]byte
	neg := lit[0] == '-'
	digits, point, ok := shortDecimal(buf[:0], lit)
	if !ok {
		f, _ := strconv.ParseFloat(string(lit), 64)
		if math.IsInf(f, 0) {
			return dst, false
		}
		digits, point = shortestDigits(buf[:0], math.Abs(f))
	}
	if len(digits) == 0 {
		return append(dst, '0'), true // -0 prints as "0" too
	}
	if neg {
		dst = append(dst, '-')
	}
	return appendES(dst, digits, point), true
}

// shortDecimal appends to dst the significant digits of a literal that has
// at most 15 of them and lies well inside the normal range, and returns the
// decimal exponent point such that the value is 0.digits × 10^point. Such a
// decimal is the only one of at most 15 digits that rounds to its double
// (15 digits always survive the trip through binary64), so its digits are
// exactly the shortest round-trip digits ECMAScript prints, found without
// a float conversion. digits is empty for zero; ok is false when the
// literal needs the general path.
func shortDecimal(dst, lit []byte) (digits []byte, point int, ok bool) {
	e, dot := 0, -1
	for e < len(lit) && lit[e] != 'e' && lit[e] != 'E' {
		if lit[e] == '.' {
			dot = e
		}
		e++
	}
	if dot < 0 {
		dot = e
	}
	first, last := 0, e-1
	for first < e && (lit[first] == '0' || lit[first] == '-' || lit[first] == '.') {
		first++
	}
	if first == e {
		return dst, 0, true
	}
	for lit[last] == '0' || lit[last] == '.' {
		last--
	}
	if n := last - first + 1; n > 16 || (n == 16 && (dot < first || dot > last)) {
		return nil, 0, false
	}
	for _, c := range lit[first : last+1] {
		if c != '.' {
			dst = append(dst, c)
		}
	}
	if first < dot {
		point = dot - first
	} else {
		point = dot + 1 - first
	}
	if e < len(lit) {
		exp, ok := jcsExponent(lit[e+1:])
		if !ok {
			return nil, 0, false
		}
		point += exp
	}
	if point < -290 || point > 290 {
		return nil, 0, false
	}
	return dst, point, true
}

// jcsExponent parses an exponent, refusing magnitudes that could not keep a
// value in the range shortDecimal handles anyway.
func jcsExponent(b []byte) (int, bool) {
	neg := false
	if b[0] == '+' || b[0] == '-' {
		neg = b[0] == '-'
		b = b[1:]
	}
	n := 0
	for _, c := range b {
		n = n*10 + int(c-'0')
		if n > 10000 {
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}

// shortestDigits appends the shortest round-trip decimal digits of f > 0
// (strconv's shortest formatting, which like V8 picks the closest of the
// shortest candidates) and returns them with their exponent in the same
// 0.digits × 10^point form as shortDecimal. Zero yields no digits.
func shortestDigits(dst []byte, f float64) ([]byte, int) {
	if f == 0 {
		return dst, 0
	}
	b := strconv.AppendFloat(dst, f, 'e', -1, 64) // d[.ddd]e±XX
	e := bytes.IndexByte(b, 'e')
	exp, _ := strconv.Atoi(string(b[e+1:]))
	digits := b[:1]
	if e > 1 {
		digits = append(digits, b[2:e]...) // in place: drops the '.'
	}
	return digits, exp + 1
}

// appendES lays out digits (k of them, no leading or trailing zeros) with
// value 0.digits × 10^n as Number::toString does (ECMA-262, 6.1.6.1.20).
func appendES(dst, digits []byte, n int) []byte {
	k := len(digits)
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}
