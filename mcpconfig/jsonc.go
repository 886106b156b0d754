package mcpconfig

import "strings"

// JSONC (JSON with comments) is how Gemini CLI and VS Code read their config:
// `//` and `/* */` comments wherever whitespace may be, and for VS Code a comma
// after the last member or element. Such a file is never re-encoded: it is read
// through a mask, a copy of the same length in which every comment byte (but a
// line break, so that positions stay right) and every trailing comma is a space.
// The mask is plain JSON that gjson, sjson and encoding/json read; offsets in it
// are offsets in the file, so an edit found on the mask is spliced into the
// file's own text and every comment outside the edited entry stays byte for byte.

// maskJSONC returns b with its comments blanked (when comments is set) and its
// trailing commas blanked (when trailing is set). It returns b itself when there
// is nothing to blank: a plain JSON file's mask is the file. What is not a whole
// comment (a lone '/', an unterminated "/*") is left for the JSON parser to
// report where it is. It scans once and is not recursive.
func maskJSONC(b []byte, comments, trailing bool) []byte {
	if !comments && !trailing {
		return b
	}
	out, copied := b, false
	blank := func(i int) {
		if !copied {
			out, copied = append([]byte(nil), b...), true
		}
		if out[i] != '\n' {
			out[i] = ' '
		}
	}
	inStr, esc := false, false
	open := false // a "/*" with no "*/" after it was seen
	comma := -1   // the last comma outside strings, while no token followed it
	var prev byte // the last token byte before it
	var last byte // the last token byte outside comments
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '/':
			if !comments || i+1 >= len(b) {
				break
			}
			if b[i+1] == '/' {
				j := i
				for j < len(b) && b[j] != '\n' {
					blank(j)
					j++
				}
				i = j - 1
				continue
			}
			if b[i+1] == '*' && !open {
				end := -1
				for j := i + 2; j+1 < len(b); j++ {
					if b[j] == '*' && b[j+1] == '/' {
						end = j + 2
						break
					}
				}
				if end < 0 {
					// Unterminated: the parser says where. No later "/*"
					// can close either, and looking again for each would
					// take time quadratic in the file.
					open = true
					break
				}
				for j := i; j < end; j++ {
					blank(j)
				}
				i = end - 1
				continue
			}
		}
		// A token byte.
		if trailing && comma >= 0 && (c == '}' || c == ']') && isValueEnd(prev) {
			blank(comma)
		}
		comma = -1
		if c == ',' {
			comma, prev = i, last
		}
		if c == '"' {
			inStr = true
		}
		last = c
	}
	return out
}

// isValueEnd reports whether c, the last byte of a token, ends a value: a comma
// after one is a trailing comma, a comma after '[', '{', ',' or ':' is an error
// the parser must still see.
func isValueEnd(c byte) bool {
	switch c {
	case 0, '[', '{', ',', ':':
		return false
	}
	return true
}

// maskText is maskJSONC of an entry's text, comments and trailing commas both:
// the document was checked against its host's format before any entry is read.
func maskText(s string) string {
	return string(maskJSONC([]byte(s), true, true))
}

// stripComments is s, text between two tokens (whitespace, a comma or colon,
// comments; never a string), without its comments and the blanks before each
// on its line; a comment on a line of its own goes with its line break.
func stripComments(s string) string {
	if !strings.Contains(s, "/") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '/' || i+1 >= len(s) || (s[i+1] != '/' && s[i+1] != '*') {
			b.WriteByte(s[i])
			i++
			continue
		}
		out := strings.TrimRight(b.String(), " \t")
		b.Reset()
		b.WriteString(out)
		end := len(s)
		if s[i+1] == '/' {
			if n := strings.IndexByte(s[i:], '\n'); n >= 0 {
				end = i + n
			}
		} else if n := strings.Index(s[i+2:], "*/"); n >= 0 {
			end = i + 2 + n + 2
		}
		i = end
		if strings.HasSuffix(out, "\n") && i < len(s) && s[i] == '\n' {
			i++ // the comment had its line to itself
		}
	}
	return b.String()
}
