package intercept

import (
	"bytes"
	"encoding/json"
)

// This file is a small structural JSON scanner for the host's hot path. It finds
// members of objects by their decoded keys and returns byte spans, without decoding
// values, so a 50 MB tools/call costs a memchr-speed skip rather than a parse. It checks
// structure (strings, nesting, separators), not the spelling of numbers and literals:
// enough to splice safely, and any message it cannot follow is forwarded untouched.

// span is a half-open byte range [start, end) of a message.
type span struct{ start, end int }

// member is one "key": value pair of an object.
type member struct {
	key   span // the key's string literal, quotes included
	value span
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string literal starting at b[i] == '"',
// or -1 when it is unterminated.
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		i += j
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// skipValue returns the index just past the JSON value starting at b[i] (no leading
// space), or -1 when the structure is broken.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch c := b[i]; c {
			case '"':
				i = skipString(b, i)
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
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r', '"', '{', '[', ':':
				if i == start {
					return -1
				}
				return i
			}
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
}

// eachMember calls f for each member of the object whose '{' is at b[i], in order,
// until f returns false; ok is false when the object's structure is broken (members
// already passed to f were real). It allocates nothing: it runs on every host message.
func eachMember(b []byte, i int, f func(m member) bool) (end int, ok bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		k := skipString(b, i)
		if k < 0 {
			return 0, false
		}
		m := member{key: span{i, k}}
		i = skipSpace(b, k)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = skipSpace(b, i+1)
		v := skipValue(b, i)
		if v < 0 {
			return 0, false
		}
		m.value = span{i, v}
		if !f(m) {
			return v, true
		}
		i = skipSpace(b, v)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// members lists the members of the object whose '{' is at b[i]; ok is false when the
// object's structure is broken.
func members(b []byte, i int) (ms []member, end int, ok bool) {
	end, ok = eachMember(b, i, func(m member) bool {
		ms = append(ms, m)
		return true
	})
	if !ok {
		return nil, 0, false
	}
	return ms, end, true
}

// elements lists the values of the array whose '[' is at b[i].
func elements(b []byte, i int) (vs []span, ok bool) {
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return nil, true
	}
	for {
		v := skipValue(b, i)
		if v < 0 {
			return nil, false
		}
		vs = append(vs, span{i, v})
		i = skipSpace(b, v)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return vs, true
		default:
			return nil, false
		}
	}
}

// keyIs reports whether the string literal lit decodes to name. Keys are compared
// decoded because "\u006dethod" is "method" to every JSON parser the upstream might use.
func keyIs(lit []byte, name string) bool {
	if bytes.IndexByte(lit, '\\') < 0 {
		return len(lit) == len(name)+2 && string(lit[1:len(lit)-1]) == name
	}
	s, ok := decodeString(lit)
	return ok && s == name
}

// decodeString decodes a JSON string literal (quotes included).
func decodeString(lit []byte) (string, bool) {
	if bytes.IndexByte(lit, '\\') < 0 && len(lit) >= 2 {
		return string(lit[1 : len(lit)-1]), true
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", false
	}
	return s, true
}

// last returns the value of the last member named name (JSON parsers keep the last of
// duplicate keys), and whether there was one.
func last(b []byte, ms []member, name string) (span, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if keyIs(b[ms[i].key.start:ms[i].key.end], name) {
			return ms[i].value, true
		}
	}
	return span{}, false
}
