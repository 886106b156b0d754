package udiff

import "testing"

// File writes ranges as diff -u does (patch and git apply read them); Lines
// keeps START,COUNT everywhere, which verify's and the pins' diffs print.
func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		a, b        []string
		file, lines string
	}{
		{[]string{"x"}, []string{"y"}, "@@ -1 +1 @@\n-x\n+y\n", "@@ -1,1 +1,1 @@\n-x\n+y\n"},
		{nil, []string{"y", "z"}, "@@ -0,0 +1,2 @@\n+y\n+z\n", "@@ -1,0 +1,2 @@\n+y\n+z\n"},
		{[]string{"x", "y"}, nil, "@@ -1,2 +0,0 @@\n-x\n-y\n", "@@ -1,2 +1,0 @@\n-x\n-y\n"},
	} {
		head := "--- a\n+++ b\n"
		if got := File(tc.a, tc.b, "a", "b"); got != head+tc.file {
			t.Errorf("File(%q, %q) =\n%s", tc.a, tc.b, got)
		}
		if got := Lines(tc.a, tc.b, "a", "b"); got != head+tc.lines {
			t.Errorf("Lines(%q, %q) =\n%s", tc.a, tc.b, got)
		}
	}
	if File([]string{"x"}, []string{"x"}, "a", "b") != "" {
		t.Error("equal lines gave a diff")
	}
}
