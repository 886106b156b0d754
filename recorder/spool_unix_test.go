//go:build unix

package recorder

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// spoolDirUsage is what the spool directory takes now: the sum of its files' sizes,
// and of the blocks they take on disk.
func spoolDirUsage(dir string) (size, blocks int64) {
	des, _ := os.ReadDir(dir)
	// A compaction's file first: it grows while the file it shrinks is cut short, so
	// looking at the shrinking one first would count what moved in between twice. A
	// file seen under both names (renamed in between) is counted once.
	slices.SortStableFunc(des, func(a, b os.DirEntry) int {
		return cmp.Compare(compactingFirst(a.Name()), compactingFirst(b.Name()))
	})
	type use struct{ size, blocks int64 }
	by := map[uint64]use{}
	for _, de := range des {
		info, err := os.Lstat(filepath.Join(dir, de.Name()))
		if err != nil {
			continue // gone between the listing and the look: a rename, a removal
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

func compactingFirst(name string) int {
	if strings.HasSuffix(name, ".compact") {
		return 0
	}
	return 1
}

// TestSpoolNeverPassesItsBound: with the recorder down and far more reports than the
// bound holds, the spool directory never takes more than --spool-max, at any moment
// (sampled after every write and by a watcher in between), compaction included; what
// was dropped is the oldest reports, counted in <server>.dropped and said on stderr,
// and what is left is the newest, each once. A 4 MiB bound peaked at 5.5 MB: the
// bound was checked after each write, a dropped report's done mark added to the file,
// and compaction wrote the reports kept into a second file beside the full one.
func TestSpoolNeverPassesItsBound(t *testing.T) {
	const limit = 1 << 20
	const n = 6000 // about 6 MiB of reports
	ctx := testutil.Context(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // the recorder is down: connections are refused
	state := t.TempDir()
	dir := spoolDir(state)
	var logs testutil.SyncBuffer
	var mu sync.Mutex
	var peakSize, peakBlocks int64
	sample := func() {
		size, blocks := spoolDirUsage(dir)
		mu.Lock()
		peakSize, peakBlocks = max(peakSize, size), max(peakBlocks, blocks)
		mu.Unlock()
	}
	committed := newCounter()
	cfg := Config{
		Endpoint: &Endpoint{URL: down, Token: "t0k3n", Source: "test"},
		Server:   "github", Version: "0.0.0-test", PID: os.Getpid(),
		Upstream: Upstream{Transport: "stdio", Command: []string{"fake"}},
		StateDir: state, SpoolMax: limit,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		tuning: fastTuning(),
	}
	cfg.tuning.hooks.committed = func(k int) {
		sample()
		committed.add(k)
	}
	stop := make(chan struct{})
	var watched sync.WaitGroup
	watched.Add(1)
	go func() {
		defer watched.Done()
		for {
			select {
			case <-stop:
				return
			default:
				sample()
			}
		}
	}()
	r := open(t, cfg)
	for i := 1; i <= n; i++ {
		r.Submit(bigStep(i))
		if i%50 == 0 {
			if err := committed.wait(ctx, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	close(stop)
	watched.Wait()
	sample()
	t.Logf("spool peak: %d bytes (%d on disk) for a bound of %d", peakSize, peakBlocks, limit)
	// The bytes are held to the bound exactly. The blocks get one block of slack: a
	// sample reads the files one after another while a compaction moves bytes
	// between them, and ext4 may still count a block of a file just cut short until
	// writeback (CI once saw 4096 over with the bytes 13 KB under the bound).
	if peakSize > limit || peakBlocks > limit+4096 {
		t.Errorf("the spool took %d bytes (%d in blocks on disk), past its %d bound", peakSize, peakBlocks, limit)
	}

	// What is left: the newest reports, seq k+1..n, each once; k were dropped, and so
	// counted.
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("spool files: %v", files)
	}
	left := map[uint64]int{}
	acked := map[uint64]bool{}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Ack *uint64 `json:"ack"`
			Seq uint64  `json:"seq"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a line of the spool is not JSON: %.80q", sc.Bytes())
		}
		if line.Ack != nil {
			acked[*line.Ack] = true
		} else {
			left[line.Seq]++
		}
	}
	var lo uint64 = n + 1
	waiting := 0
	for seq, k := range left {
		if acked[seq] {
			continue
		}
		waiting++
		lo = min(lo, seq)
		if k != 1 {
			t.Errorf("report %d is in the spool %d times", seq, k)
		}
	}
	for seq := lo; seq <= n; seq++ {
		if left[seq] == 0 || acked[seq] {
			t.Errorf("report %d, newer than the oldest kept (%d), is not waiting in the spool", seq, lo)
			break
		}
	}
	dropped := int64(lo - 1)
	sts, err := SpoolStatus(state)
	if err != nil || len(sts) != 1 {
		t.Fatalf("SpoolStatus: %+v, %v", sts, err)
	}
	if sts[0].Dropped != dropped {
		t.Errorf("%d reports counted dropped; the spool lost seq 1..%d (%d)", sts[0].Dropped, lo-1, dropped)
	}
	if !strings.Contains(logs.String(), "the spool is full") {
		t.Errorf("the drops were not said:\n%s", logs.String())
	}
	if waiting < limit/2/1100 {
		t.Errorf("only %d reports kept of a %d-byte bound", waiting, limit)
	}
	t.Logf("kept %d reports (seq %d..%d), dropped %d", waiting, lo, n, dropped)
	_ = time.Second
}
