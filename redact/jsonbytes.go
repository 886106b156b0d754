package redact

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"hash"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Errors that end one rendering pass. They never leave the package: a syntax error turns
// the value into text, an overflow into a pass with smaller limits.
var (
	errSyntax   = errors.New("redact: not valid JSON")
	errOverflow = errors.New("redact: over budget")
)

// decodePrefix appends to dst the decoded text of the JSON string body (what lies between
// the quotes), stopping once at least max bytes were appended; it returns how many
// bytes of body that consumed. The decoded part is checked strictly (control
// characters, escapes); a plain body is text already and is copied as it is.
func decodePrefix(dst, body []byte, max int, plain bool) ([]byte, int, error) {
	if plain {
		n := min(len(body), max)
		return append(dst, body[:n]...), n, nil
	}
	dst, used, ok := jsonlex.AppendUnescaped(dst, body, max)
	if !ok {
		return dst, used, errSyntax
	}
	return dst, used, nil
}

// verbatim marks the bytes that are the same in a JSON string body, in its decoded
// text and in that text quoted again: printable ASCII but the quote and the backslash.
var verbatim = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// decodeText is decodePrefix for a renderer: when the prefix is made only of verbatim
// bytes (most keys and values are), its text is the body itself, so it is returned
// in place (raw is true) instead of being copied into dst, and needs no escaping to be
// quoted again.
func decodeText(dst, body []byte, max int, plain bool) (dec []byte, used int, raw bool, err error) {
	n := min(len(body), max)
	i := 0
	for i < n && verbatim[body[i]] {
		i++
	}
	if i == n {
		return body[:n:n], n, true, nil
	}
	dec, used, err = decodePrefix(dst, body, max, plain)
	return dec, used, false, err
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
			if buf, i, ok = jsonlex.AppendEscape(buf, body, i); !ok {
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
// output is valid JSON whatever the input held; U+2028 and U+2029 stay as they are,
// since a report is only ever read as JSON.
//
// Printable ASCII, what rendered JSON held in a string mostly is, is quoted here in one
// table-driven pass; from the first other byte on, jsonlex's escaper takes over (it
// escapes rune by rune, so the two parts quote as the whole would).
func appendQuoted(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if verbatim[c] {
			continue
		}
		dst = append(dst, s[start:i]...)
		if c != '"' && c != '\\' {
			dst = jsonlex.AppendEscaped(dst, s[i:])
			return append(dst, '"')
		}
		dst = append(dst, '\\')
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
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
		if e := jsonlex.SkipString(b, p); e >= 0 {
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
			e := jsonlex.SkipString(b, i)
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
