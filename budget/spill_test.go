package budget

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitFile waits for path to hold want.
func waitFile(t *testing.T, path string, want []byte) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got, err := os.ReadFile(path); err == nil && bytes.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held the answer", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSpillKeepsAndPrunes: small and long answers are kept byte for byte, 0600 in a
// 0700 folder, and the folder stays within MaxFiles, the oldest going first.
func TestSpillKeepsAndPrunes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	s := NewSpill(dir, nil)
	long := bytes.Repeat([]byte("é"), syncMax) // past syncMax: written by the goroutine
	p, err := s.Keep(long)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, p, long)
	var first string
	for i := 0; i < MaxFiles+10; i++ {
		msg := []byte(`{"n":` + strings.Repeat("1", i+1) + `}`)
		p, err := s.Keep(msg)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = p
		}
		waitFile(t, p, msg)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("folder %v %v", fi.Mode(), err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ents, _ := os.ReadDir(dir)
		_, errFirst := os.Stat(first)
		if len(ents) <= MaxFiles && os.IsNotExist(errFirst) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d files left, the oldest there: %v", len(ents), errFirst == nil)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, _ := e.Info(); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", e.Name(), fi.Mode())
		}
	}
}

// TestSpillRefusesLink: a spill folder that is a symbolic link is refused, and
// nothing is written through it.
func TestSpillRefusesLink(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "elsewhere")
	os.Mkdir(target, 0o700)
	link := filepath.Join(base, "spill")
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	if p, err := NewSpill(link, nil).Keep([]byte(`{}`)); err == nil {
		t.Fatalf("kept in %s through a link", p)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Fatalf("written through the link: %v", ents)
	}
}
