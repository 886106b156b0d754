package jsonlex

import (
	"unicode/utf8"
	"unsafe"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal, the bytes encoding/json writes with
// HTML escaping off: ", \ and control characters escaped (\b \f \n \r \t by name),
// invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped for JavaScript's sake, nothing
// else touched. strconv.Quote is not this: it writes \x escapes JSON parsers reject.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	// The escaper only reads s, so it may see the string's bytes as a slice: a
	// report's strings can be megabytes, and a copy would double them.
	b = appendEscaped(b, unsafe.Slice(unsafe.StringData(s), len(s)), true)
	return append(b, '"')
}

// Quote is AppendString as a string.
func Quote(s string) string { return string(AppendString(nil, s)) }

// AppendEscaped appends s as the inside of a JSON string literal (no quotes), escaped
// as AppendString escapes it except that U+2028 and U+2029 stay as they are. That is
// JSON.stringify's escaping: for text that is only ever read as JSON, where those two
// escapes would just cost bytes.
func AppendEscaped(b, s []byte) []byte { return appendEscaped(b, s, false) }

// appendEscaped is the one escaper behind both. It is not generic over string and
// []byte: a call to a generic function from another package is taken to leak its
// arguments (Go 1.26), which moved a caller's stack buffer to the heap, and its
// shaped loop measured slower than this one.
func appendEscaped(b, s []byte, lineSeps bool) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if lineSeps && (r == '\u2028' || r == '\u2029') {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}
