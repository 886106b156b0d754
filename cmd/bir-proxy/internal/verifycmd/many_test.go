package verifycmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A folder of many stray files is one bounded line; its cassettes come in name order,
// their lock files unsaid.
func TestCassettesOfAFolder(t *testing.T) {
	dir := t.TempDir()
	for i := range 30 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("stray%02d.txt", i)), []byte("x"), 0o600)
	}
	for _, n := range []string{"b.jsonl", "a.jsonl"} {
		os.WriteFile(filepath.Join(dir, n), []byte(`{"bir-cassette":1}`+"\n"), 0o600)
		os.WriteFile(filepath.Join(dir, n+".lock"), nil, 0o600)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	paths, skipped := cassettes([]string{dir, filepath.Join(dir, "a.jsonl")})
	if strings.Join(paths, ",") != filepath.Join(dir, "a.jsonl")+","+filepath.Join(dir, "b.jsonl") {
		t.Errorf("paths %v", paths)
	}
	if !strings.HasPrefix(skipped, "skipped 31 files: ") || !strings.HasSuffix(skipped, ", and 23 more") || strings.Contains(skipped, ".lock") {
		t.Errorf("skipped %q", skipped)
	}
	if severity(2) <= severity(3) || severity(3) <= severity(1) || severity(1) <= severity(4) || severity(4) <= severity(0) {
		t.Error("severity order is not 2, 3, 1, 4, 0")
	}
}
