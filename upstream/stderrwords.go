package upstream

import (
	"strings"
)

// StderrWords is what a server that went away said on stderr, in the words every
// error answer and log line about it uses (with or without revival): up to two of the
// first lines that look like an error (a Node.js "Error: Cannot find module …", a
// Python Traceback, a Go panic), then its last lines, at most n lines in all, in the
// order it wrote them, "…" where lines were left out, escape sequences and control
// characters removed. "" when it printed nothing. lines is what StderrTail gave (a
// few dozen of the last lines, oldest first).
//
// The last three lines alone were what hosts showed of a Node server that could not
// find its module: "requireStack: []", "}", "Node.js v20.20.2".
func StderrWords(lines []string, n int) string {
	var clean []string
	for _, l := range lines {
		if l = CleanLine([]byte(l)); l != "" {
			clean = append(clean, l)
		}
	}
	if len(clean) == 0 || n <= 0 {
		return ""
	}
	pick := make([]bool, len(clean))
	picked := 0
	for i, l := range clean {
		if picked >= 2 || picked >= n-1 {
			break
		}
		if looksLikeAnError(l) {
			pick[i] = true
			picked++
		}
	}
	for i := len(clean) - 1; i >= 0 && picked < n; i-- {
		if !pick[i] {
			pick[i] = true
			picked++
		}
	}
	var b strings.Builder
	b.WriteString("its stderr: ")
	gap := false
	first := true
	for i, l := range clean {
		if !pick[i] {
			gap = true
			continue
		}
		switch {
		case first && gap:
			b.WriteString("… | ")
		case !first && gap:
			b.WriteString(" | … | ")
		case !first:
			b.WriteString(" | ")
		}
		b.WriteString(l)
		first, gap = false, false
	}
	return b.String()
}

// errorMarks are how a line that says what went wrong starts (or, for the words
// with a colon, contains): Node's Error and npm's ERR!, Python's Traceback and
// exceptions, Go's panic, and the plain "error:" and "fatal:" of most tools.
var errorMarks = []string{"Error", "TypeError", "SyntaxError", "ReferenceError", "npm ERR!", "npm error", "Traceback", "panic:", "fatal error:"}

func looksLikeAnError(l string) bool {
	for _, m := range errorMarks {
		if strings.HasPrefix(l, m) {
			return true
		}
	}
	low := strings.ToLower(l)
	return strings.HasPrefix(low, "error:") || strings.HasPrefix(low, "fatal:") || strings.Contains(low, "exception:") ||
		strings.Contains(l, " ERR! ") || strings.Contains(low, "error: ")
}

// CleanLine is a stderr line fit for a message: colours and other escape sequences
// out, control characters out, surrounding space trimmed, cut to 300 bytes.
func CleanLine(p []byte) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == 0x1b && i+1 < len(p) && p[i+1] == '[': // CSI: ESC [ params final
			i += 2
			for i < len(p) && (p[i] < 0x40 || p[i] > 0x7e) {
				i++
			}
		case c == 0x1b && i+1 < len(p) && p[i+1] == ']': // OSC: ESC ] ... BEL or ST
			i += 2
			for i < len(p) && p[i] != 0x07 && !(p[i] == 0x1b && i+1 < len(p) && p[i+1] == '\\') {
				i++
			}
			if i < len(p) && p[i] == 0x1b {
				i++
			}
		case c == '\t':
			b.WriteByte(' ')
		case c < ' ' || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	s := strings.ToValidUTF8(strings.TrimSpace(b.String()), "?")
	if len(s) > 300 {
		cut := 300
		for cut > 0 && s[cut]&0xc0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
