// Package jsonlex is the project's one JSON lexer. It finds the members of objects by
// their decoded keys and returns byte spans, without decoding values, so a 50 MB message
// costs a memchr-speed skip rather than a parse. It checks structure (strings, nesting,
// separators), not the spelling of numbers and literals: enough to read a field or splice
// one out safely, and a message it cannot follow is reported as such (the caller then
// leaves it untouched).
//
// The duplicate-key rule is the one the host's JSON.parse applies, and most parsers
// with it: of members with the same decoded key, the LAST wins (Get, Last). Every reader
// of a message in the proxy uses this rule, so the proxy never reads a field from a
// different member than the peer that acts on it.
package jsonlex

import (
	"bytes"
	"encoding/binary"
	"math/big"
	"math/bits"
	"strings"
)

// Span is a half-open byte range [Start, End) of a message.
type Span struct{ Start, End int }

// Member is one "key": value pair of an object.
type Member struct {
	Key   Span // the key's string literal, quotes included
	Value Span
}

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the index of the first non-space byte at or after i.
func SkipSpace(b []byte, i int) int {
	// Encoders write no space between tokens: the usual next byte is a token's own,
	// and every byte a space is not is above ' ' or a control character JSON refuses
	// anyway (the loop below sees those the same way).
	if i < len(b) && b[i] > ' ' {
		return i
	}
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// skipShort is SkipString for a literal whose end is near and has no escape before
// it: the usual key and id, skipped without a call. It returns -1 when the literal
// is not one of those, and SkipString must look.
func skipShort(b []byte, i int) int {
	j, lim := i+1, min(len(b), i+24)
	// Eight bytes a step while eight remain: the usual key ends in the first word.
	for ; j+8 <= len(b) && j < lim; j += 8 {
		if m := quoteOrBackslash(binary.LittleEndian.Uint64(b[j:])); m != 0 {
			if k := j + bits.TrailingZeros64(m)/8; k < lim && b[k] == '"' {
				return k + 1
			}
			return -1
		}
	}
	for ; j < lim; j++ {
		switch b[j] {
		case '"':
			return j + 1
		case '\\':
			return -1
		}
	}
	return -1
}

// Word-at-a-time byte tests (SWAR). zeroBytes(v) has the high bit of the lowest
// zero byte of v set, and no bit below it (higher bytes may carry false marks, so
// only the lowest mark is read): the borrow that makes a false mark starts at a
// true zero below it.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func zeroBytes(v uint64) uint64 { return (v - ones) & ^v & highs }

// quoteOrBackslash marks (as zeroBytes) the bytes of w that are '"' or '\\'.
func quoteOrBackslash(w uint64) uint64 {
	return zeroBytes(w^('"'*ones)) | zeroBytes(w^('\\'*ones))
}

// stringStop marks (as zeroBytes) the bytes of w a JSON string does not hold as
// themselves: '"', '\\' and the control characters.
func stringStop(w uint64) uint64 {
	return quoteOrBackslash(w) | (w-0x20*ones)&^w&highs
}

// SkipString returns the index just past the string literal starting at b[i] == '"',
// or -1 when it is unterminated. It jumps from quote to quote (memchr speed), so a
// 100 MB string costs milliseconds.
func SkipString(b []byte, i int) int {
	open := i
	i++
	// Most strings are short (keys, ids, names): a plain loop finds their end sooner
	// than a call does.
	for lim := min(len(b), i+32); i < lim && b[i] != '\\'; i++ {
		if b[i] == '"' {
			return i + 1
		}
	}
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		i += j
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for k := i - 1; k > open && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// SkipValue returns the index just past the JSON value starting at b[i] (no leading
// space), or -1 when the structure is broken.
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		if e := skipShort(b, i); e >= 0 {
			return e
		}
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch c := b[i]; c {
			case '"':
				i = SkipString(b, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				// No depth limit: the skip is a loop, not recursion, so depth costs
				// nothing; and a limit would forward a deep call with its key in it.
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default:
		// A number or literal: it runs to the next delimiter.
		start := i
		for i < len(b) && endsScalar[b[i]] == 0 {
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
}

// endsScalar marks with 1 the bytes a number or literal runs up to: the separators,
// brackets, quote and JSON whitespace. A constant, so it is no state of the package.
const endsScalar = "" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x01\x00\x00\x01\x00\x00" + // \t \n \r
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x01\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00" + // space " ,
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00" + // :
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01\x00\x00" + // [ ]
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01\x00\x00" + // { }
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"

// EachMember calls f for each member of the object whose '{' is at b[i], in order,
// until f returns false; ok is false when the object's structure is broken (members
// already passed to f were real). It allocates nothing: it runs on every host message.
func EachMember(b []byte, i int, f func(m Member) bool) (end int, ok bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		k := skipShort(b, i)
		if k < 0 {
			if k = SkipString(b, i); k < 0 {
				return 0, false
			}
		}
		m := Member{Key: Span{i, k}}
		i = SkipSpace(b, k)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = SkipSpace(b, i+1)
		v := SkipValue(b, i)
		if v < 0 {
			return 0, false
		}
		m.Value = Span{i, v}
		if !f(m) {
			return v, true
		}
		i = SkipSpace(b, v)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// NumberEnd returns the index just past the number at b[i], and whether it follows
// JSON's grammar, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; when not, the index
// is where it stopped following it. The lexer itself does not spell-check numbers;
// this is for readers that copy them out and must not copy out a non-number.
func NumberEnd(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digitsEnd(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digitsEnd(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digitsEnd(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digitsEnd(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// Members lists the members of the object whose '{' is at b[i]; ok is false when the
// object's structure is broken.
func Members(b []byte, i int) (ms []Member, end int, ok bool) {
	end, ok = EachMember(b, i, func(m Member) bool {
		ms = append(ms, m)
		return true
	})
	if !ok {
		return nil, 0, false
	}
	return ms, end, true
}

// Elements lists the values of the array whose '[' is at b[i].
func Elements(b []byte, i int) (vs []Span, ok bool) {
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return nil, true
	}
	for {
		v := SkipValue(b, i)
		if v < 0 {
			return nil, false
		}
		vs = append(vs, Span{i, v})
		i = SkipSpace(b, v)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case ']':
			return vs, true
		default:
			return nil, false
		}
	}
}

// EachElement calls f with each value of the array arr, in order: nothing when arr is
// not an array, and nothing past where its structure breaks (the values before were
// whole). A loop, not recursion: a peer's array nested without end costs no stack.
func EachElement(arr []byte, f func(v []byte)) {
	if len(arr) == 0 || arr[0] != '[' {
		return
	}
	i := SkipSpace(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return
	}
	for i < len(arr) {
		v := SkipValue(arr, i)
		if v < 0 {
			return
		}
		f(arr[i:v])
		i = SkipSpace(arr, v)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i = SkipSpace(arr, i+1)
	}
}

// KeyIs reports whether the string literal lit decodes to name. Keys are compared
// decoded because "\u006dethod" is "method" to every JSON parser a peer might use.
func KeyIs(lit []byte, name string) bool {
	// An escape is always longer than what it decodes to, so a literal of exactly
	// the plain spelling's length matches only as that spelling, and a shorter one
	// never: the scan for a backslash is for longer literals only (every key of
	// every message passes here, and almost none matches).
	switch n := len(name) + 2; {
	case len(lit) == n:
		return string(lit[1:len(lit)-1]) == name && strings.IndexByte(name, '\\') < 0
	case len(lit) < n:
		return false
	}
	if bytes.IndexByte(lit, '\\') < 0 {
		return len(lit) == len(name)+2 && string(lit[1:len(lit)-1]) == name
	}
	s, ok := DecodeString(lit)
	return ok && s == name
}

// DecodeString decodes a JSON string literal (quotes included), as AppendUnescaped
// decodes its body. A literal without escapes is its own text and is taken unchecked:
// method names, ids and keys are that, and cost a memchr.
func DecodeString(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1]), true
	}
	if SkipString(lit, 0) != len(lit) {
		return "", false // not one literal: an unescaped quote inside, or none at the end
	}
	body := lit[1 : len(lit)-1]
	dec, used, ok := AppendUnescaped(make([]byte, 0, len(body)), body, len(body))
	if !ok || used != len(body) {
		return "", false
	}
	return string(dec), true
}

// StringOf is the decoded string lit holds, or "" when lit is not a string literal.
func StringOf(lit []byte) string {
	s, _ := DecodeString(lit)
	return s
}

// Last returns the value of the last member of ms named name — the duplicate-key rule
// of this package — and whether there was one.
func Last(b []byte, ms []Member, name string) (Span, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if KeyIs(b[ms[i].Key.Start:ms[i].Key.End], name) {
			return ms[i].Value, true
		}
	}
	return Span{}, false
}

// Get returns the raw value of obj's member named name (the last of duplicates), or
// nil when obj is not an object or has no such member. It allocates nothing.
func Get(obj []byte, name string) []byte {
	i := SkipSpace(obj, 0)
	var v []byte
	_, ok := EachMember(obj, i, func(m Member) bool {
		if KeyIs(obj[m.Key.Start:m.Key.End], name) {
			v = obj[m.Value.Start:m.Value.End]
		}
		return true
	})
	if !ok {
		return nil
	}
	return v
}

// Fields are the top-level members of a JSON-RPC message, as subslices of it (nil
// when absent), each by the duplicate-key rule.
type Fields struct {
	Method, ID, Params, Result, Error []byte
}

// IsRequest says the message has a method and an id: it expects an answer.
func (f *Fields) IsRequest() bool { return f.Method != nil && f.ID != nil }

// IsResponse says the message is an answer: an id and no method.
func (f *Fields) IsResponse() bool { return f.Method == nil && f.ID != nil }

// TopFields reads the JSON-RPC members of the object m in one pass; ok is false when m
// is not an object this lexer can follow.
func TopFields(m []byte) (f Fields, ok bool) {
	f, _, ok = fieldsAt(m, SkipSpace(m, 0))
	return f, ok
}

// EachMessage calls f for each object on a line: the message, each object element of
// a batch, and so for every value on the line (a line should hold one value, but a
// peer reading with a streaming decoder acts on a second one too).
func EachMessage(line []byte, f func(obj []byte)) {
	EachObject(line, func(s Span) { f(line[s.Start:s.End]) })
}

// EachObject is EachMessage giving where each object lies in line, for a caller that
// edits line.
func EachObject(line []byte, f func(obj Span)) {
	for i := SkipSpace(line, 0); i < len(line); {
		end := SkipValue(line, i)
		if end < 0 {
			return
		}
		switch line[i] {
		case '{':
			f(Span{i, end})
		case '[':
			elems, _ := Elements(line, i)
			for _, e := range elems {
				if line[e.Start] == '{' {
					f(e)
				}
			}
		}
		i = SkipSpace(line, end)
	}
}

// IDKey identifies a JSON-RPC id the way JSON-RPC matches them: by type and value.
// The string "1" is not the number 1, but a number a peer re-printed (1.0 for 1, 1e3
// for 1000) is the same id, exactly: ids past 2^53 must not collide by rounding.
//
// Keys of the usual ids are spelled as the id itself (see IDKeyBytes), so a map keyed
// by them is read and deleted from without an allocation: a plain integer is its own
// key, a string without escapes is its literal less the closing quote. Every other
// key starts with a byte those cannot: '"' + decoded text for escaped strings, the
// exact rational for other numbers, 'n' or 'r' for the rest.
func IDKey(raw []byte) string {
	if kb, ok := IDKeyBytes(raw); ok {
		return string(kb)
	}
	switch c := raw[0]; {
	case c == '"':
		s, _ := DecodeString(raw)
		return `"` + s
	case c == '-' || (c >= '0' && c <= '9'):
		// big.Rat reads exponents by repeated multiplication; bound them so a hostile
		// 1e999999999 costs nothing.
		if len(raw) <= 64 && !hugeExponent(raw) {
			if r, ok := new(big.Rat).SetString(string(raw)); ok {
				return r.RatString()
			}
		}
		return "n" + string(raw)
	default:
		return "r" + string(raw)
	}
}

// IDKeyBytes returns the part of raw that is its IDKey, for the usual ids (a plain
// integer, a string with no escape); ok is false for the others, whose key IDKey
// builds.
func IDKeyBytes(raw []byte) (key []byte, ok bool) {
	if len(raw) == 0 {
		return raw, true // the key of nothing is ""
	}
	switch c := raw[0]; {
	case c == '"':
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 {
			return raw[:len(raw)-1], true
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if plainInteger(raw) {
			return raw, true
		}
	}
	return nil, false
}

// plainInteger reports whether raw is an integer already written the one way big.Rat
// would write it: no fraction, exponent or leading zero, and not -0.
func plainInteger(raw []byte) bool {
	digits := raw
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && (len(digits) > 1 || len(raw) > 1)) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func hugeExponent(raw []byte) bool {
	i := bytes.IndexAny(raw, "eE")
	if i < 0 {
		return false
	}
	exp := strings.TrimLeft(string(raw[i+1:]), "+-0")
	return len(exp) > 4
}
