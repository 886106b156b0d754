// Package udiff is the one unified-diff engine of bir-proxy: verify's diff of a
// recorded and a new answer (mcpdiff), the pins' diff of a tool's definition, and
// wrap's and unwrap's --dry-run diff of a config file (mcpconfig).
package udiff

import (
	"fmt"
	"strings"
)

// maxCells bounds the table of the line diff (the middle that differs, after the
// common start and end); past it the middle is shown as removed, then added.
const maxCells = 4 << 20

const context = 3

// Lines is the unified diff of a and b ("" when they are the same lines), with
// three lines of context, headed "--- nameA" and "+++ nameB". Every hunk range is
// written START,COUNT.
func Lines(a, b []string, nameA, nameB string) string {
	return lines(a, b, nameA, nameB, false)
}

// File is Lines with hunk ranges written as diff -u writes them, for a diff that
// patch or git apply is to read: a count of 1 left out, an empty side numbered by
// the line before it (-0,0 for an insertion at the top).
func File(a, b []string, nameA, nameB string) string {
	return lines(a, b, nameA, nameB, true)
}

func lines(a, b []string, nameA, nameB string, gnu bool) string {
	if equal(a, b) {
		return ""
	}
	ops := edits(a, b)
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", nameA, nameB)
	// Group the edits into hunks with context lines around each change.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-context)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		ai, bi := ops[start].a, ops[start].b
		var na, nb int
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				na++
			}
			if op.kind != '-' {
				nb++
			}
		}
		if gnu {
			fmt.Fprintf(&sb, "@@ -%s +%s @@\n", gnuRange(ai, na), gnuRange(bi, nb))
		} else {
			fmt.Fprintf(&sb, "@@ -%d,%d +%d,%d @@\n", ai+1, na, bi+1, nb)
		}
		for _, op := range ops[start:end] {
			line := ""
			if op.kind == '+' {
				line = b[op.b]
			} else {
				line = a[op.a]
			}
			sb.WriteByte(op.kind)
			sb.WriteString(line)
			sb.WriteByte('\n')
		}
		i = end
	}
	return sb.String()
}

// gnuRange is a hunk's side as diff -u writes it: START alone for one line, an
// empty side numbered by the line before it.
func gnuRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

type op struct {
	kind byte // ' ', '-', '+'
	a, b int  // the line's index in a and b (for '+', a is where it goes; for '-', b)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// edits is a shortest edit script of a into b: the common start and end kept, the
// middle by longest common subsequence when it is small enough.
func edits(a, b []string) []op {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []op
	for i := 0; i < pre; i++ {
		ops = append(ops, op{' ', i, i})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	if (n+1)*(m+1) > maxCells {
		for i := range ma {
			ops = append(ops, op{'-', pre + i, pre})
		}
		for j := range mb {
			ops = append(ops, op{'+', pre + n, pre + j})
		}
	} else {
		// lcs[i][j]: the longest common subsequence of ma[i:] and mb[j:].
		lcs := make([]int32, (n+1)*(m+1))
		at := func(i, j int) *int32 { return &lcs[i*(m+1)+j] }
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					*at(i, j) = *at(i+1, j+1) + 1
				} else {
					*at(i, j) = max(*at(i+1, j), *at(i, j+1))
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && ma[i] == mb[j]:
				ops = append(ops, op{' ', pre + i, pre + j})
				i, j = i+1, j+1
			case i < n && (j == m || *at(i+1, j) >= *at(i, j+1)):
				ops = append(ops, op{'-', pre + i, pre + j})
				i++
			default:
				ops = append(ops, op{'+', pre + i, pre + j})
				j++
			}
		}
	}
	for k := 0; k < suf; k++ {
		ops = append(ops, op{' ', len(a) - suf + k, len(b) - suf + k})
	}
	return ops
}
