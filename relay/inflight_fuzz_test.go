package relay

import (
	"slices"
	"strconv"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// FuzzPendingHostile: pending against a plain map with ids a hostile host picks:
// negative, -0, exponent and fraction spellings, 18 and 19 digits, strings.
func FuzzPendingHostile(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 130, 131, 0, 200, 7, 9, 11})
	f.Fuzz(func(t *testing.T, ops []byte) {
		spell := []string{"-0", "0", "1e2", "100", "-1", "-100", "999999999999999999", "-999999999999999999",
			"9999999999999999999", "\"7\"", "7", "1.0", "-1.0", "1E0", "10e-1", "0.0", "-0.0"}
		p := newPending()
		ref := map[string]string{}
		for i, op := range ops {
			var id string
			if int(op>>1) < len(spell) {
				id = spell[op>>1]
			} else {
				id = strconv.Itoa(int(op>>1) - 60) // -60..67
			}
			k := jsonlex.IDKey([]byte(id))
			if op&1 == 0 {
				p.add([]byte(id))
				ref[k] = id
			} else {
				_, want := ref[k]
				if got := p.take([]byte(id)); got != want {
					t.Fatalf("op %d: take(%s) = %v, want %v", i, id, got, want)
				}
				delete(ref, k)
			}
			if p.len() != len(ref) {
				t.Fatalf("op %d: len %d, want %d", i, p.len(), len(ref))
			}
			for k := range ref {
				if !p.hasKey(k) {
					t.Fatalf("op %d: %s not in flight", i, k)
				}
			}
		}
		var got, want []string
		for _, id := range p.drain() {
			got = append(got, jsonlex.IDKey(id))
		}
		for k := range ref {
			want = append(want, k)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("drained %q, want %q", got, want)
		}
	})
}
