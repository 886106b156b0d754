package editdist

import "testing"

func TestOf(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"server", "server", 0},
		{"sever", "server", 1}, {"sevrer", "server", 1}, {"kitten", "sitting", 3},
		{"ca", "abc", 3}, // OSA: no substring edited twice (true Damerau says 2)
		{"flaw", "lawn", 2}, {"staus", "status", 1}, {"ab", "ba", 1},
	} {
		if got := Of([]byte(c.a), []byte(c.b)); got != c.d {
			t.Errorf("Of(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
		if got := Of([]rune(c.a), []rune(c.b)); got != c.d {
			t.Errorf("Of(runes %q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
	if got := Of([]rune("naïve"), []rune("naive")); got != 1 {
		t.Errorf("a multi-byte character is one element: got %d", got)
	}
}

// FuzzOf: symmetric, zero only for equal inputs, at most the longer length, and
// within one of the length difference's lower bound.
func FuzzOf(f *testing.F) {
	f.Add("server", "sevrer")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a) > 64 || len(b) > 64 {
			return
		}
		d := Of([]byte(a), []byte(b))
		if d != Of([]byte(b), []byte(a)) {
			t.Fatalf("not symmetric: %q %q", a, b)
		}
		if (d == 0) != (a == b) {
			t.Fatalf("Of(%q, %q) = %d", a, b, d)
		}
		if d > max(len(a), len(b)) || d < max(len(a), len(b))-min(len(a), len(b)) {
			t.Fatalf("Of(%q, %q) = %d out of bounds", a, b, d)
		}
	})
}
