// Package editdist is the one edit distance of the module: how far a typed or
// recorded name is from another, for the "did you mean" of the command line
// (cmd/bir-proxy/usage.go), verify's tools line and the mock's nearest recorded
// calls. Three copies of it had grown apart (two Levenshtein, one counting a swap
// as one edit).
package editdist

// Of is the optimal-string-alignment distance of a and b: the fewest insertions,
// deletions, substitutions and swaps of two adjacent elements that make one the
// other, no substring edited twice ("sevrer" is 1 from "server"). It costs
// len(a)×len(b) steps and three rows of len(b)+1 ints: callers bound what they
// give it (names of a peer's are clipped before they come here).
func Of[T comparable](a, b []T) int {
	prev2 := make([]int, len(b)+1) // row i-2
	prev := make([]int, len(b)+1)  // row i-1
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
