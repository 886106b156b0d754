package mcpconfig

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestDiffText(t *testing.T) {
	old := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n"
	new := "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn"
	want := `--- f
+++ f
@@ -1,5 +1,5 @@
 a
-b
+B
 c
 d
 e
@@ -11,3 +11,4 @@
 k
 l
 m
+n
\ No newline at end of file
`
	if got := unifiedDiff("f", []byte(old), []byte(new)); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := unifiedDiff("f", []byte(old), []byte(old)); got != "" {
		t.Errorf("equal inputs gave %q", got)
	}
}

// A diff, applied as a patch would apply it, turns old into new. Random
// edits exercise the edit script and hunk merging at every distance.
func TestDiffApplies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		n := rng.IntN(40)
		var a []string
		for range n {
			a = append(a, strconv.Itoa(rng.IntN(6))+"\n") // repeats make the search work
		}
		b := append([]string(nil), a...)
		for e := rng.IntN(6); e > 0; e-- {
			p := rng.IntN(len(b) + 1)
			switch rng.IntN(3) {
			case 0:
				b = append(b[:p], append([]string{"new" + strconv.Itoa(e) + "\n"}, b[p:]...)...)
			case 1:
				if p < len(b) {
					b = append(b[:p], b[p+1:]...)
				}
			default:
				if p < len(b) {
					b[p] = "changed\n"
				}
			}
		}
		old, new := strings.Join(a, ""), strings.Join(b, "")
		if rng.IntN(4) == 0 {
			old = strings.TrimSuffix(old, "\n")
		}
		if rng.IntN(4) == 0 {
			new = strings.TrimSuffix(new, "\n")
		}
		d := unifiedDiff("f", []byte(old), []byte(new))
		got, err := applyDiff(old, d)
		if err != nil || got != new {
			t.Fatalf("case %d: %v\nold:\n%s\nnew:\n%s\ndiff:\n%s\ngot:\n%s", i, err, old, new, d, got)
		}
	}
}

// applyDiff is a minimal patch: it checks every context and removed line
// against old, so a wrong line number or a wrong line fails.
func applyDiff(old, diff string) (string, error) {
	if diff == "" {
		return old, nil
	}
	hunkHeader := regexp.MustCompile(`^@@ -(\d+)(,\d+)? \+\d+(,\d+)? @@\n$`)
	a := splitLines(old)
	lines := strings.SplitAfter(diff, "\n")[2:]
	var out []string
	next := 0 // next line of a not yet copied
	for i := 0; i < len(lines) && lines[i] != ""; {
		h := lines[i]
		m := hunkHeader.FindStringSubmatch(h)
		if m == nil {
			return "", fmt.Errorf("hunk header %q", h)
		}
		as, _ := strconv.Atoi(m[1])
		start := as - 1
		if m[2] == ",0" {
			start = as // an empty old side is numbered by the line before it
		}
		if start < next {
			return "", fmt.Errorf("hunk %q overlaps", h)
		}
		out = append(out, a[next:start]...)
		next = start
		for i++; i < len(lines) && lines[i] != "" && !strings.HasPrefix(lines[i], "@@"); i++ {
			l := lines[i]
			text := l[1:]
			if i+1 < len(lines) && lines[i+1] == "\\ No newline at end of file\n" {
				text = strings.TrimSuffix(text, "\n")
				i++
			}
			switch l[0] {
			case ' ', '-':
				if next >= len(a) || a[next] != text {
					return "", fmt.Errorf("line %d is %q, diff says %q", next+1, a[min(next, len(a)-1)], text)
				}
				next++
				if l[0] == ' ' {
					out = append(out, text)
				}
			case '+':
				out = append(out, text)
			}
		}
	}
	out = append(out, a[next:]...)
	return strings.Join(out, ""), nil
}
