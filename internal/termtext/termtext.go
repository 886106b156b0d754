// Package termtext makes a peer's text safe to print on a terminal: every control
// character is shown escaped, so nothing a server sends can move the cursor, clear the
// screen, set the title, write the clipboard (OSC 52: ESC ] 52 ; … BEL) or ring the
// bell when bir-proxy prints it.
//
// The escapes: a C0 control or DEL is \xNN (ESC is \x1b, BEL \x07), a byte that is
// not UTF-8 too (\xff); a C1 control (U+0080-U+009F, CSI is U+009B), a line or
// paragraph separator, or a bidirectional-text control (U+061C, U+200E-U+200F,
// U+202A-U+202E, U+2066-U+2069: text shown in another order than it is) is \uNNNN. A
// backslash is left as it is.
package termtext

import (
	"io"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Line is s with every control character escaped, newlines and tabs included: a value
// printed on one line (a table cell, a reason, a message).
func Line(s string) string { return escape(s, false) }

// Text is s with every control character escaped but newline, tab and the CR of a
// CRLF: lines printed as lines (a diff, a server's stderr).
func Text(s string) string { return escape(s, true) }

func escape(s string, text bool) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s // nothing to escape: no copy
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	return string(appendEscaped(b, s[i:], text))
}

func appendEscaped(b []byte, s string, text bool) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			b = append(b, c)
			i++
			continue
		}
		if c < 0x80 {
			keep := text && (c == '\n' || c == '\t' || c == '\r' && i+1 < len(s) && s[i+1] == '\n')
			if keep {
				b = append(b, c)
			} else {
				b = appendHex(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = appendHex(b, c)
		case escaped(r):
			b = append(b, `\u`...)
			h := strconv.FormatInt(int64(r), 16)
			for range 4 - len(h) {
				b = append(b, '0')
			}
			b = append(b, h...)
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return b
}

func appendHex(b []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'x', hex[c>>4], hex[c&0xf])
}

// escaped reports whether a rune past ASCII is shown escaped.
func escaped(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f, // C1
		r == 0x2028 || r == 0x2029,                                                                      // line and paragraph separators
		r == 0x061c, r == 0x200e || r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi
		return true
	}
	return false
}

// Writer escapes what is written through it as Text: a server's stderr passed on.
// A UTF-8 sequence or a CR cut at the end of a write waits for the next (at most 3
// bytes held; Flush writes them out).
type Writer struct {
	W     io.Writer
	mu    sync.Mutex
	carry []byte
	buf   []byte
}

// NewWriter is a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{W: w} }

func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	in := p
	if len(w.carry) > 0 {
		in = append(w.carry, p...)
		w.carry = nil
	}
	keep := tail(in)
	if keep > 0 {
		w.carry = append([]byte(nil), in[len(in)-keep:]...)
		in = in[:len(in)-keep]
	}
	w.buf = appendEscaped(w.buf[:0], string(in), true)
	_, err := w.W.Write(w.buf)
	if cap(w.buf) > 64<<10 {
		w.buf = nil
	}
	return len(p), err
}

// Flush writes out what is held (escaped as it is).
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.carry) == 0 {
		return nil
	}
	_, err := w.W.Write(appendEscaped(nil, string(w.carry), false))
	w.carry = nil
	return err
}

// tail is how many bytes at the end of p may be the start of what the next write
// completes: a UTF-8 sequence cut short, or a CR before a LF.
func tail(p []byte) int {
	if len(p) == 0 {
		return 0
	}
	if p[len(p)-1] == '\r' {
		return 1
	}
	for n := 1; n <= 3 && n <= len(p); n++ {
		c := p[len(p)-n]
		if c < 0x80 {
			return 0
		}
		if c >= 0xc0 { // a leading byte: cut short unless it is whole
			if utf8.FullRune(p[len(p)-n:]) {
				return 0
			}
			return n
		}
	}
	return 0
}
