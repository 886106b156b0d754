package verify

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkVerifyPerCall is verify's cost per sequential call against the fixture
// (compare with the fixture's direct round trip and the proxy's, bir-bench -only seq).
func BenchmarkVerifyPerCall(b *testing.B) {
	p := filepath.Join(b.TempDir(), "c.jsonl")
	f, _ := os.Create(p)
	w := bufio.NewWriter(f)
	w.WriteString(header + "\n")
	for i := 1; i <= b.N; i++ {
		w.WriteString(greet(i, fmt.Sprintf("n%d", i), fmt.Sprintf("hello n%d", i)) + "\n")
	}
	w.Flush()
	f.Close()
	cfg := config(b, p)
	b.ResetTimer()
	sum, err := Run(b.Context(), cfg, &JSON{W: io.Discard})
	if err != nil || sum.Counts["same"] != b.N {
		b.Fatal(err, sum)
	}
}
