package jsonlex

import (
	"unicode/utf16"
	"unicode/utf8"
)

// AppendUnescaped appends to dst the text of the JSON string body (what lies between
// the quotes), stopping once at least max bytes were appended, and returns how many
// bytes of body that took; ok is false at a control character or a bad escape, with
// used where it stopped. The cap lets a caller that shows only the start of a 100 MB
// string decode only that start. Bytes that are not escapes are copied as they are,
// invalid UTF-8 included, so a body with escapes decodes like one without; a lone
// surrogate escape becomes U+FFFD, as encoding/json decodes it.
func AppendUnescaped(dst, body []byte, max int) (out []byte, used int, ok bool) {
	start := len(dst)
	i := 0
	for i < len(body) && len(dst)-start < max {
		c := body[i]
		if c == '\\' {
			dst, i, ok = AppendEscape(dst, body, i)
			if !ok {
				return dst, i, false
			}
			continue
		}
		if c < 0x20 {
			return dst, i, false
		}
		// Copy the run up to the next escape, control character or the cap at once.
		j := i + 1
		lim := min(len(body), i+max-(len(dst)-start))
		for j < lim && body[j] != '\\' && body[j] >= 0x20 {
			j++
		}
		dst = append(dst, body[i:j]...)
		i = j
	}
	return dst, i, true
}

// AppendEscape decodes the escape at body[i] (a backslash) onto dst and returns the
// index past it; ok is false when it is not a valid escape, and then i is unchanged.
// A \u escape of a lone surrogate becomes U+FFFD.
func AppendEscape(dst, body []byte, i int) (out []byte, next int, ok bool) {
	if i+1 >= len(body) {
		return dst, i, false
	}
	if body[i+1] != 'u' {
		c, ok := Unescape(body[i+1])
		if !ok {
			return dst, i, false
		}
		return append(dst, c), i + 2, true
	}
	r, ok := Hex4(body, i+2)
	if !ok {
		return dst, i, false
	}
	i += 6
	if utf16.IsSurrogate(r) {
		r2, ok2 := rune(-1), false
		if i+1 < len(body) && body[i] == '\\' && body[i+1] == 'u' {
			r2, ok2 = Hex4(body, i+2)
		}
		if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
			r = dec
			i += 6
		} else {
			r = utf8.RuneError
		}
	}
	return utf8.AppendRune(dst, r), i, true
}

// Unescape is the character a two-byte escape \c stands for; ok is false when \c is
// not one (\u escapes are four hex digits more: see Hex4).
func Unescape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// Hex4 decodes the four hex digits at b[i:i+4] (the tail of a \uXXXX escape). It is
// a table lookup so that it inlines: escapes can be most of a string.
func Hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	h := b[i : i+4]
	v := int32(hexValue[h[0]])<<12 | int32(hexValue[h[1]])<<8 | int32(hexValue[h[2]])<<4 | int32(hexValue[h[3]])
	if v < 0 {
		return 0, false // a -1 sign-extends over the whole value
	}
	return v, true
}

// hexValue is each byte's value as a hex digit, or -1.
var hexValue = func() (t [256]int8) {
	for c := range t {
		switch {
		case c >= '0' && c <= '9':
			t[c] = int8(c - '0')
		case c >= 'a' && c <= 'f':
			t[c] = int8(c-'a') + 10
		case c >= 'A' && c <= 'F':
			t[c] = int8(c-'A') + 10
		default:
			t[c] = -1
		}
	}
	return t
}()
