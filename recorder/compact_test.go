package recorder

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// A run killed while compacting its spool file leaves part of its reports in the
// compaction's file (they move there a piece at a time, from the end) and the rest
// in the file: the run adopting the file puts them back together and delivers every
// one. (A leftover compaction file was deleted, which was right only while it was a
// whole copy.)
func TestAdoptionMergesACompactionCutShort(t *testing.T) {
	dir := t.TempDir()
	const id = "0123456789abcdef0123456789abcdef"
	line := func(seq int) []byte {
		s := bigStep(seq)
		s.ProxyID, s.Server, s.Seq = id, "github", uint64(seq)
		return marshalStep(s)
	}
	// The file as it stood: reports 1..10, 1..3 done (their marks after them).
	var old []byte
	for seq := 1; seq <= 10; seq++ {
		old = append(old, line(seq)...)
	}
	old = appendAcks(old, []uint64{1, 2, 3})
	// Killed after moving 8..10, then 6..7, into the compaction's file and cutting
	// the file short of 6, and part way through writing the next piece (5): a torn
	// line at the compaction file's end, its report still whole in the file.
	var moved []byte
	for _, seq := range []int{8, 9, 10, 6, 7} {
		moved = append(moved, line(seq)...)
	}
	moved = append(moved, line(5)[:100]...)
	cut := bytes.Index(old, line(6))
	path := filepath.Join(dir, spoolName("github", id))
	if err := os.WriteFile(path, old[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".compact", moved, 0o600); err != nil {
		t.Fatal(err)
	}
	as := adoptSpools(testutil.Context(t), dir, "github", "ffffffffffffffffffffffffffffffff", testLogger(t))
	if len(as) != 1 {
		t.Fatalf("adopted %d files, want 1", len(as))
	}
	defer as[0].file.close()
	var seqs []uint64
	for _, e := range as[0].entries {
		seqs = append(seqs, e.seq)
		b, err := as[0].file.read(e)
		if err != nil || !bytes.Equal(append(b, '\n'), line(int(e.seq))) {
			t.Errorf("report %d reads back as %.60q (%v)", e.seq, b, err)
		}
	}
	// 1..3's done marks were cut off with the file's end: they are sent once more,
	// and the recorder ignores the repeats. Nothing is lost.
	if want := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(seqs, want) {
		t.Errorf("adopted reports %v, want %v", seqs, want)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Errorf("the compaction's file is still there: %v", err)
	}
}

// A compaction never has more beside the file than one piece: at every step the file
// and the compaction's file together take at most what the file took and a piece.
func TestCompactionTakesAPieceBesideTheFile(t *testing.T) {
	dir := t.TempDir()
	const id = "0123456789abcdef0123456789abcdef"
	s, err := createSpool(dir, "github", id)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	var lines [][]byte
	var seqs []uint64
	for seq := 1; seq <= 400; seq++ {
		st := bigStep(seq)
		st.ProxyID, st.Server, st.Seq = id, "github", uint64(seq)
		lines = append(lines, marshalStep(st))
		seqs = append(seqs, uint64(seq))
	}
	if _, err := s.appendReports(lines, seqs); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 100; seq++ {
		s.drop(seq)
	}
	before, _ := s.usage()
	const chunk = 16 << 10
	peak := int64(0)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// The compaction's file first (it grows while the file shrinks), and once
			// if it was renamed over the file in between.
			var sum int64
			c, err := os.Stat(s.path + ".compact")
			if err == nil {
				sum += c.Size()
			}
			if f, err := os.Stat(s.path); err == nil && (c == nil || !os.SameFile(c, f)) {
				sum += f.Size()
			}
			peak = max(peak, sum)
		}
	}()
	if err := s.compact(chunk); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	if peak > before+chunk {
		t.Errorf("file and compaction together took %d bytes; the file took %d, a piece is %d", peak, before, chunk)
	}
	size, live := s.usage()
	if size != live || size == 0 {
		t.Errorf("after compaction: size %d, live %d", size, live)
	}
	for seq := uint64(101); seq <= 400; seq++ {
		b, err := s.read(entry{seq: seq})
		if err != nil || !bytes.Equal(append(b, '\n'), lines[seq-1]) {
			t.Fatalf("report %d reads back as %.60q (%v)", seq, b, err)
		}
	}
	if _, ok := s.find(100); ok {
		t.Error("a dropped report is still in the index")
	}
}
