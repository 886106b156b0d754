package redact

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"hash"
	"unicode/utf16"
	"unicode/utf8"
)

// Errors that end one rendering pass. They never leave the package: a syntax error turns
// the value into text, an overflow into a pass with smaller limits.
var (
	errSyntax   = errors.New("redact: not valid JSON")
	errOverflow = errors.New("redact: over budget")
)

func skipWS(b []byte, p int) int {
	for p < len(b) {
		switch b[p] {
		case ' ', '\t', '\n', '\r':
			p++
		default:
			return p
		}
	}
	return p
}

// stringEnd returns the index just past the closing quote of the JSON string whose
// opening quote is at p, or -1 when it is not terminated. It jumps from quote to quote
// (memchr speed), so a 100 MB string costs milliseconds.
func stringEnd(b []byte, p int) int {
	i := p + 1
	// Most strings are short: a plain loop finds their end sooner than a call.
	for lim := min(len(b), i+32); i < lim && b[i] != '\\'; i++ {
		if b[i] == '"' {
			return i + 1
		}
	}
	for {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return -1
		}
		q := i + k
		n := 0
		for j := q - 1; j > p && b[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// decodePrefix appends to dst the decoded text of the JSON string body (what lies between
// the quotes), stopping once at least max bytes were appended; it returns how many
// bytes of body that consumed. The decoded part is checked strictly (control
// characters, escapes); a plain body is text already and is copied as it is.
func decodePrefix(dst, body []byte, max int, plain bool) ([]byte, int, error) {
	if plain {
		n := min(len(body), max)
		return append(dst, body[:n]...), n, nil
	}
	start := len(dst)
	i := 0
	for i < len(body) && len(dst)-start < max {
		c := body[i]
		if c == '\\' {
			var ok bool
			dst, i, ok = appendEscape(dst, body, i)
			if !ok {
				return dst, i, errSyntax
			}
			continue
		}
		if c < 0x20 {
			return dst, i, errSyntax
		}
		j := i + 1
		lim := min(len(body), i+max-(len(dst)-start))
		for j < lim && body[j] != '\\' && body[j] >= 0x20 {
			j++
		}
		dst = append(dst, body[i:j]...)
		i = j
	}
	return dst, i, nil
}

// appendEscape decodes the escape at body[i] (a backslash) onto dst. A \u escape of a
// lone surrogate becomes U+FFFD, as encoding/json decodes it.
func appendEscape(dst, body []byte, i int) ([]byte, int, bool) {
	if i+1 >= len(body) {
		return dst, i, false
	}
	switch c := body[i+1]; c {
	case '"', '\\', '/':
		return append(dst, c), i + 2, true
	case 'b':
		return append(dst, '\b'), i + 2, true
	case 'f':
		return append(dst, '\f'), i + 2, true
	case 'n':
		return append(dst, '\n'), i + 2, true
	case 'r':
		return append(dst, '\r'), i + 2, true
	case 't':
		return append(dst, '\t'), i + 2, true
	case 'u':
		r, ok := hex4(body, i+2)
		if !ok {
			return dst, i, false
		}
		i += 6
		if utf16.IsSurrogate(r) {
			r2, ok2 := rune(-1), false
			if i+1 < len(body) && body[i] == '\\' && body[i+1] == 'u' {
				r2, ok2 = hex4(body, i+2)
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
	return dst, i, false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// digestString returns the decoded length and the sha256 of the decoded text of a JSON
// string body, streaming: the body is hashed in place between escapes and never copied
// whole. Escapes past the checked prefix are decoded leniently (an invalid one counts as
// its backslash): this part of the value is only ever summarised.
func digestString(body []byte, plain bool) (int64, [32]byte) {
	h := sha256.New()
	if plain {
		h.Write(body)
		return int64(len(body)), sum(h)
	}
	var n int64
	buf := make([]byte, 0, 16<<10)
	for i := 0; i < len(body); {
		k := bytes.IndexByte(body[i:], '\\')
		if k < 0 {
			k = len(body) - i
		}
		chunk := body[i : i+k]
		n += int64(len(chunk))
		if len(buf)+len(chunk) > cap(buf) || len(chunk) > cap(buf)/2 {
			h.Write(buf)
			buf = buf[:0]
		}
		if len(chunk) > cap(buf)/2 {
			h.Write(chunk)
		} else {
			buf = append(buf, chunk...)
		}
		i += k
		if i < len(body) {
			before := len(buf)
			var ok bool
			if buf, i, ok = appendEscape(buf, body, i); !ok {
				buf = append(buf, '\\')
				i++
			}
			n += int64(len(buf) - before)
		}
	}
	h.Write(buf)
	return n, sum(h)
}

func sum(h hash.Hash) (s [32]byte) {
	h.Sum(s[:0])
	return s
}

// appendQuoted appends s as a JSON string. Invalid UTF-8 becomes \ufffd so that the
// output is valid JSON whatever the input held.
func appendQuoted(dst, s []byte) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

func appendEscaped(dst, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// numberEnd returns the end of the JSON number at p, checking its grammar.
func numberEnd(b []byte, p int) (int, bool) {
	i := p
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

// structural marks the bytes skipValue must look at; everything else is skipped in a
// tight loop.
var structural = func() (t [256]bool) {
	for _, c := range []byte(`"{}[],`) {
		t[c] = true
	}
	return t
}()

// skipValue returns the end of the value at p and, for an object or array, how many
// members or items it has. It is the fast, lenient path for values that are cut or
// redacted whole: strings must be terminated and brackets balanced, but the grammar
// between them is not checked (those bytes never reach the output).
func skipValue(b []byte, p int) (end, count int, err error) {
	if p >= len(b) {
		return 0, 0, errSyntax
	}
	switch b[p] {
	case '"':
		if e := stringEnd(b, p); e >= 0 {
			return e, 0, nil
		}
		return 0, 0, errSyntax
	case '{', '[':
	default:
		i := p
		for i < len(b) && !structural[b[i]] && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' && b[i] != ':' {
			i++
		}
		if i == p {
			return 0, 0, errSyntax
		}
		return i, 0, nil
	}
	depth, commas, seen := 0, 0, false
	for i := p; i < len(b); i++ {
		for i < len(b) && !structural[b[i]] {
			if !seen && depth == 1 && b[i] > ' ' {
				seen = true
			}
			i++
		}
		if i == len(b) {
			break
		}
		switch b[i] {
		case '"':
			e := stringEnd(b, i)
			if e < 0 {
				return 0, 0, errSyntax
			}
			if depth == 1 {
				seen = true
			}
			i = e - 1
		case '{', '[':
			if depth == 1 {
				seen = true
			}
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				if seen {
					commas++
				}
				return i + 1, commas, nil
			}
		case ',':
			if depth == 1 {
				commas++
			}
		}
	}
	return 0, 0, errSyntax
}
