package mcpconfig

import (
	"strings"

	"github.com/bir-dev/bir-proxy/internal/udiff"
)

// noNewline marks a last line without its newline, as diff -u does.
const noNewline = "\n\\ No newline at end of file"

// unifiedDiff renders old → new as a unified diff of lines, or "" when they
// are equal, through the one diff engine (internal/udiff), with hunk ranges
// as diff -u writes them. ~/.claude.json can be megabytes: the engine cuts the
// common head and tail before it compares, so it only sees the edited region.
func unifiedDiff(name string, old, new []byte) string {
	if string(old) == string(new) {
		return ""
	}
	return udiff.File(diffLines(string(old)), diffLines(string(new)), name, name)
}

// diffLines are s's lines without their newlines, a last line that has none
// carrying diff's marker: a missing final newline is a difference like any
// other, and is shown.
func diffLines(s string) []string {
	lines := splitLines(s)
	for i, l := range lines {
		if t, ok := strings.CutSuffix(l, "\n"); ok {
			lines[i] = t
		} else {
			lines[i] = l + noNewline
		}
	}
	return lines
}

// splitLines keeps each line's terminator.
func splitLines(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexByte(s, '\n') + 1
		if i == 0 {
			i = len(s)
		}
		lines = append(lines, s[:i])
		s = s[i:]
	}
	return lines
}
