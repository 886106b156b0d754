//go:build unix

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestSpoolMaxIsNeverPassed: with --spool-max 256KiB and the recorder down, a session
// of 1,500 calls (about 1.5 MB of reports) never has the spool directory take more
// than 256 KiB, sampled all along by a watcher; what is left is the newest reports,
// and the oldest, dropped, are counted in the spool's .dropped file. --spool-max 4MiB
// peaked at 5.5 MB on disk.
func TestSpoolMaxIsNeverPassed(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // down: connections are refused
	state := t.TempDir()
	dir := filepath.Join(state, "bir-proxy", "spool")
	const limit = 256 << 10
	const n = 1500
	var mu sync.Mutex
	var peak, peakBlocks int64
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			size, blocks := dirUsage(dir)
			mu.Lock()
			peak, peakBlocks = max(peak, size), max(peakBlocks, blocks)
			mu.Unlock()
		}
	}()
	env := []string{"BIR_RECORDER_URL=" + url, "BIR_RECORDER_TOKEN=t0k3n", "BIR_OFF=0", "XDG_STATE_HOME=" + state}
	s := startProxy(t, env, "--spool-max", "256KiB", "--server", "bounded", "--", raw, "--reply")
	pad := strings.Repeat("x", 900)
	for i := 1; i <= n; i++ {
		s.Send(toolCall(i, fmt.Sprintf(`{"_bir_call_id":"c-%d","pad":%q}`, i, pad)))
		s.recv()
	}
	s.end()
	close(stop)
	<-watched
	t.Logf("spool peak: %d bytes, %d in blocks, for --spool-max %d", peak, peakBlocks, limit)
	if peak > limit || peakBlocks > limit {
		t.Errorf("the spool took %d bytes (%d in blocks on disk), past --spool-max %d", peak, peakBlocks, limit)
	}

	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("spool files: %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	waiting := map[int64]bool{}
	acked := map[int64]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Ack *int64 `json:"ack"`
			Seq int64  `json:"seq"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a spool line is not JSON: %.80q", sc.Bytes())
		}
		if line.Ack != nil {
			acked[*line.Ack] = true
		} else {
			waiting[line.Seq] = true
		}
	}
	lo := int64(n + 1)
	for seq := range waiting {
		if !acked[seq] {
			lo = min(lo, seq)
		}
	}
	for seq := lo; seq <= n; seq++ {
		if !waiting[seq] || acked[seq] {
			t.Fatalf("report %d, newer than the oldest kept (%d), is not in the spool", seq, lo)
		}
	}
	var rec struct{ Dropped int64 }
	if d, err := os.ReadFile(filepath.Join(dir, "bounded.dropped")); err != nil || json.Unmarshal(d, &rec) != nil {
		t.Fatalf("no count of dropped reports: %v", err)
	}
	if rec.Dropped != lo-1 {
		t.Errorf("%d reports counted dropped; seq 1..%d are gone", rec.Dropped, lo-1)
	}
	if !strings.Contains(s.Stderr.String(), "the spool is full") {
		t.Errorf("the drops were not said on stderr:\n%s", s.Stderr.String())
	}
	t.Logf("kept seq %d..%d, dropped %d", lo, n, rec.Dropped)
}

// dirUsage is what the files of dir take: their sizes and their blocks on disk. A
// compaction's file is looked at first (it grows while the file it shrinks is cut
// short, so the other order counts what moved in between twice), and a file seen
// under both names (renamed in between) once.
func dirUsage(dir string) (size, blocks int64) {
	des, _ := os.ReadDir(dir)
	later := func(de os.DirEntry) int {
		if strings.HasSuffix(de.Name(), ".compact") {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(des, func(a, b os.DirEntry) int { return cmp.Compare(later(a), later(b)) })
	type use struct{ size, blocks int64 }
	by := map[uint64]use{}
	for _, de := range des {
		info, err := os.Lstat(filepath.Join(dir, de.Name()))
		if err != nil {
			continue
		}
		st := info.Sys().(*syscall.Stat_t)
		u := by[st.Ino]
		by[st.Ino] = use{max(u.size, info.Size()), max(u.blocks, int64(st.Blocks)*512)}
	}
	for _, u := range by {
		size += u.size
		blocks += u.blocks
	}
	return size, blocks
}
