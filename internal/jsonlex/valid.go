package jsonlex

import (
	"encoding/binary"
	"math/bits"
)

// Valid reports whether b is exactly one JSON value (RFC 8259) with only JSON
// whitespace around it: what a host's JSON.parse accepts. It is the strict check the
// lexer itself does not make (see the package comment), for a line that must not
// reach a peer unless it parses: a server's stdout line that is a banner, a log line or
// a fragment would make the host abort the session on a parse error. Line.LexValid
// makes the same check while it lexes.
//
// Like encoding/json.Valid it does not check that strings are UTF-8. Unlike it, it sets
// no limit on nesting: the walk is a loop with a stack of one bit per level, not
// recursion, so depth costs memory only (an eighth of a byte per level).
func Valid(b []byte) bool {
	i := validEnd(b, SkipSpace(b, 0))
	return i >= 0 && SkipSpace(b, i) == len(b)
}

// validEnd returns the index just past the JSON value starting at b[i] (no leading
// space), or -1 when what starts there is not one. No call per token, and no
// allocation below 512 levels of nesting.
func validEnd(b []byte, i int) int {
	// stack holds one bit per open container, set for an object; depth counts them.
	var small [8]uint64
	stack := small[:]
	var depth uint
	inObject := false // the innermost open container is an object
value:
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '{':
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			i++
			goto next
		}
		if depth/64 == uint(len(stack)) {
			stack = append(stack, 0)
		}
		stack[depth/64] |= 1 << (depth % 64)
		depth++
		inObject = true
		goto key
	case c == '[':
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			i++
			goto next
		}
		if depth/64 == uint(len(stack)) {
			stack = append(stack, 0)
		}
		stack[depth/64] &^= 1 << (depth % 64)
		depth++
		inObject = false
		goto value
	case c == '"':
		if i = validString(b, i); i < 0 {
			return -1
		}
	case c == '-' || ('0' <= c && c <= '9'):
		var ok bool
		if i, ok = NumberEnd(b, i); !ok {
			return -1
		}
	case c == 't':
		if !hasLiteral(b, i, "true") {
			return -1
		}
		i += 4
	case c == 'f':
		if !hasLiteral(b, i, "false") {
			return -1
		}
		i += 5
	case c == 'n':
		if !hasLiteral(b, i, "null") {
			return -1
		}
		i += 4
	default:
		return -1
	}
next:
	// A value has ended: what follows it is decided by the container it is in.
	if depth == 0 {
		return i
	}
	i = SkipSpace(b, i)
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case ',':
		i = SkipSpace(b, i+1)
		if inObject {
			goto key
		}
		goto value
	case '}':
		if !inObject {
			return -1
		}
	case ']':
		if inObject {
			return -1
		}
	default:
		return -1
	}
	depth--
	if depth > 0 {
		d := depth - 1
		inObject = stack[d/64]&(1<<(d%64)) != 0
	}
	i++
	goto next
key:
	// At a member's key, after "{" or ",": the key, its colon, then its value.
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = validString(b, i); i < 0 {
		return -1
	}
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	i = SkipSpace(b, i+1)
	goto value
}

// validString returns the index just past the string literal at b[i] == '"', or -1
// when it is not one JSON allows: unterminated, a control character in it, or an
// escape JSON does not have.
func validString(b []byte, i int) int {
	for i++; ; i++ {
		// Most bytes of a string are plain: eight at a time while eight remain, then
		// one table look each, to the first byte that is not.
		stop := false
		for i+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[i:])
			if m := stringStop(w); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				stop = true
				break
			}
			i += 8
		}
		if !stop {
			for i < len(b) && plainInString[b[i]] == 1 {
				i++
			}
			if i >= len(b) {
				return -1
			}
		}
		// b[i] is the closing quote (the usual case, told first), a control
		// character, or an escape.
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return -1
				}
				i += 4
			default:
				return -1
			}
		}
	}
}

// plainInString marks with 1 the bytes a string holds as themselves: not a control
// character, the quote or the backslash. A constant, so it is no state of the package.
const plainInString = "" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x01\x01\x00\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" + // 0x22 is '"'
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x00\x01\x01\x01" + // 0x5c is '\\'
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}
