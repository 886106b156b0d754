package jsonlex

import (
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal, the bytes encoding/json writes with
// HTML escaping off: ", \ and control characters escaped (\b \f \n \r \t by name),
// invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped for JavaScript's sake, nothing
// else touched. strconv.Quote is not this: it writes \x escapes JSON parsers reject.
//
//go:noinline
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscaped(b, s, true)
	return append(b, '"')
}

// Quote is AppendString as a string.
func Quote(s string) string { return string(AppendString(nil, s)) }

// AppendEscaped appends s as the inside of a JSON string literal (no quotes), escaped
// as AppendString escapes it except that U+2028 and U+2029 stay as they are. That is
// JSON.stringify's escaping: for text that is only ever read as JSON, where those two
// escapes would just cost bytes.
//
//go:noinline
func AppendEscaped(b, s []byte) []byte { return appendEscaped(b, s, false) }

// appendEscaped is the one escaper behind both, generic so that neither a string nor
// a byte slice is copied to become the other. The two wrappers are not inlined: a
// call to a generic function from another package is taken to leak its arguments
// (Go 1.26), which would move a caller's stack buffer to the heap; a call to the
// wrapper carries this package's finding that s does not escape.
func appendEscaped[S ~string | ~[]byte](b []byte, s S, lineSeps bool) []byte {
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
		// At most UTFMax bytes are converted, which the compiler does on the stack.
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
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
