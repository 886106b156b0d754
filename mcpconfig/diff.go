package mcpconfig

import (
	"fmt"
	"strings"
)

// diffContext is how many unchanged lines surround each change, as in
// diff -u.
const diffContext = 3

// unifiedDiff renders old → new as a unified diff of lines, or "" when they
// are equal. ~/.claude.json can be megabytes, so the common head and tail
// are cut before the Myers search, which then only sees the edited region.
func unifiedDiff(name string, old, new []byte) string {
	if string(old) == string(new) {
		return ""
	}
	a, b := splitLines(string(old)), splitLines(string(new))
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]diffOp, 0, len(a)+len(b))
	for i := 0; i < pre; i++ {
		ops = append(ops, diffOp{kind: ' ', a: i, b: i})
	}
	for _, op := range myers(a[pre:len(a)-suf], b[pre:len(b)-suf]) {
		op.a += pre
		op.b += pre
		ops = append(ops, op)
	}
	for i := 0; i < suf; i++ {
		ops = append(ops, diffOp{kind: ' ', a: len(a) - suf + i, b: len(b) - suf + i})
	}

	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", name, name)
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk runs from diffContext lines before this change to
		// diffContext lines after the last change that is no more than
		// 2*diffContext unchanged lines from the one before it.
		start := max(i-diffContext, 0)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j
			} else if j-end > 2*diffContext {
				break
			}
		}
		end = min(end+diffContext+1, len(ops))
		writeHunk(&out, a, b, ops[start:end])
		i = end
	}
	return out.String()
}

func writeHunk(out *strings.Builder, a, b []string, ops []diffOp) {
	aStart, bStart, aLen, bLen := -1, -1, 0, 0
	for _, op := range ops {
		if op.kind != '+' {
			if aStart < 0 {
				aStart = op.a
			}
			aLen++
		}
		if op.kind != '-' {
			if bStart < 0 {
				bStart = op.b
			}
			bLen++
		}
	}
	// An empty side is numbered by the line before it, as diff -u does.
	if aStart < 0 {
		aStart = ops[0].a - 1
	}
	if bStart < 0 {
		bStart = ops[0].b - 1
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
	for _, op := range ops {
		line := ""
		switch op.kind {
		case '-':
			line = a[op.a]
		default:
			line = b[op.b]
		}
		out.WriteByte(op.kind)
		out.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// splitLines keeps each line's terminator, so a missing final newline is
// a difference like any other.
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

// diffOp is one line of an edit script: ' ' keeps a[a] (= b[b]), '-'
// deletes a[a], '+' inserts b[b]. a and b are the line numbers reached on
// each side, so a '+' carries the position it is inserted at in a.
type diffOp struct {
	kind byte
	a, b int
}

// myers is the shortest edit script from a to b (Myers 1986, with the
// trace of each round kept for the walk back).
func myers(a, b []string) []diffOp {
	n, m := len(a), len(b)
	off := n + m + 1
	v := make([]int, 2*off+1)
	var trace [][]int
	for d := 0; d <= n+m; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, off, n, m, d)
			}
		}
	}
	return nil // unreachable: d = n+m always reaches the end
}

func backtrack(trace [][]int, off, x, y, d int) []diffOp {
	var rev []diffOp
	for ; d > 0; d-- {
		v := trace[d]
		k := x - y
		var pk int
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := v[off+pk]
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, diffOp{kind: ' ', a: x, b: y})
		}
		if x == px {
			y--
			rev = append(rev, diffOp{kind: '+', a: x, b: y})
		} else {
			x--
			rev = append(rev, diffOp{kind: '-', a: x, b: y})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, diffOp{kind: ' ', a: x, b: y})
	}
	ops := make([]diffOp, len(rev))
	for i, op := range rev {
		ops[len(rev)-1-i] = op
	}
	return ops
}
