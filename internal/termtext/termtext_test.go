package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLineAndText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                           "plain",
		"a\x1b]52;c;SGk=\x07b":            `a\x1b]52;c;SGk=\x07b`,
		"\x1b[2J\x7f":                     `\x1b[2J\x7f`,
		"c1 \u009b31m":                    `c1 \u009b31m`,
		"bidi \u202egnp.exe":              `bidi \u202egnp.exe`,
		"bad \xff utf-8, é kept":          `bad \xff utf-8, é kept`,
		"two\nlines\r\n\tand a tab":       `two\x0alines\x0d\x0a\x09and a tab`,
		`a backslash \x1b stays as it is`: `a backslash \x1b stays as it is`,
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Text("a\nb\r\nc\rd\t\x1b"); got != "a\nb\r\nc\\x0dd\t\\x1b" {
		t.Errorf("Text: %q", got)
	}
}

func TestWriterKeepsCutRunes(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	in := "é\u009b\r\nx\x1b"
	for i := range len(in) { // a byte at a time
		w.Write([]byte{in[i]})
	}
	w.Flush()
	if got, want := b.String(), "é\\u009b\r\nx\\x1b"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// FuzzLine: nothing a terminal acts on gets through, and the result is UTF-8.
func FuzzLine(f *testing.F) {
	f.Add("a\x1b]52;c;SGk=\x07\u009b\xff\u202e\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Line(s), Text(s)} {
			if !utf8.ValidString(out) {
				t.Fatalf("%q: not UTF-8", out)
			}
			for i, r := range out {
				if r < 0x20 && r != '\n' && r != '\t' && r != '\r' || r == 0x7f || escaped(r) {
					t.Fatalf("%q: %U at %d", out, r, i)
				}
			}
		}
		if strings.ContainsAny(Line(s), "\n\r\t") {
			t.Fatalf("Line kept a line break: %q", Line(s))
		}
	})
}
