package recorder

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

const testID = "0123456789abcdef0123456789abcdef"

func TestScanSpool(t *testing.T) {
	report := func(seq int) string {
		return fmt.Sprintf(`{"proxyId":%q,"server":"github","seq":%d,"tool":"t"}`+"\n", testID, seq)
	}
	content := report(1) + report(2) + `{"ack":2}` + "\n" + report(3) +
		"not json at all\n" +
		`{"proxyId":"ffffffffffffffffffffffffffffffff","server":"github","seq":9}` + "\n" +
		report(4) + `{"ack":1}` + "\n"
	whole := int64(len(content))
	content += `{"proxyId":"` + testID + `","server":"github","seq":5,"to` // torn

	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, size, err := scanSpool(f, "github", testID, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if size != whole {
		t.Errorf("whole lines end at %d, want %d", size, whole)
	}
	var seqs []uint64
	for _, e := range entries {
		seqs = append(seqs, e.seq)
		line := content[e.off : e.off+int64(e.n)]
		if gjson.Get(line, "seq").Uint() != e.seq {
			t.Errorf("entry %d points at %q", e.seq, line)
		}
	}
	if fmt.Sprint(seqs) != "[3 4]" {
		t.Errorf("undelivered seqs %v, want [3 4]", seqs)
	}
}

// An adopted file is trimmed of its torn tail before anything is appended to it, and
// its done marks are appended as whole lines.
func TestAdoptTrimsTornTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, spoolName("github", testID))
	whole := fmt.Sprintf(`{"proxyId":%q,"server":"github","seq":1}`+"\n", testID)
	if err := os.WriteFile(path, []byte(whole+`{"proxyId":"`), 0o600); err != nil {
		t.Fatal(err)
	}
	got := adoptSpools(t.Context(), dir, "github", "ffffffffffffffffffffffffffffffff", testLogger(t))
	if len(got) != 1 || got[0].proxyID != testID || len(got[0].entries) != 1 {
		t.Fatalf("adopted %+v", got)
	}
	if err := got[0].file.markDone(1); err != nil {
		t.Fatal(err)
	}
	got[0].file.close()
	b, _ := os.ReadFile(path)
	if string(b) != whole+`{"ack":1}`+"\n" {
		t.Errorf("file after adoption and a done mark:\n%s", b)
	}
}

func TestAdoptSkipsOtherServersAndDeletesDelivered(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	done := write(spoolName("github", testID), fmt.Sprintf(`{"proxyId":%q,"server":"github","seq":1}`+"\n"+`{"ack":1}`+"\n", testID))
	other := write(spoolName("github.enterprise", testID), fmt.Sprintf(`{"proxyId":%q,"server":"github.enterprise","seq":1}`+"\n", testID))
	stray := write("github.notanid.jsonl", "")
	if got := adoptSpools(t.Context(), dir, "github", "ffffffffffffffffffffffffffffffff", testLogger(t)); len(got) != 0 {
		t.Errorf("adopted %+v", got)
	}
	if _, err := os.Stat(done); !os.IsNotExist(err) {
		t.Error("a fully delivered spool file was not deleted")
	}
	for _, p := range []string{other, stray} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was touched: %v", p, err)
		}
	}
}

// The current run's file shrinks to nothing once everything in it is done and it has
// grown large, so a long healthy session does not fill the disk.
func TestSpoolCompactsWhenAllDone(t *testing.T) {
	s, err := createSpool(t.TempDir(), "github", testID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	line := []byte(strings.Repeat("x", 100_000) + "\n")
	var seq uint64
	for s.size <= compactAt {
		seq++
		if _, err := s.appendReports([][]byte{line}, []uint64{seq}); err != nil {
			t.Fatal(err)
		}
		if seq > 1 {
			s.markDone(seq - 1)
		}
	}
	if s.size == 0 {
		t.Fatal("compacted while a report was not done")
	}
	s.markDone(seq)
	if st, _ := os.Stat(s.path); s.size != 0 || st.Size() != 0 {
		t.Errorf("size %d (file %d) after all done, want 0", s.size, st.Size())
	}
}

func TestFileSafe(t *testing.T) {
	for in, want := range map[string]string{
		"github":      "github",
		"my-server_2": "my-server_2",
		"a.b":         "a.b",
		"../etc":      "%2E.%2Fetc",
		"a/b":         "a%2Fb",
		"a_2Fb":       "a_2Fb",
		"":            "%",
		"naïve":       "na%C3%AFve",
		`c:\x`:        "c%3A%5Cx",
		".hidden":     "%2Ehidden",
		"with space":  "with%20space",
	} {
		if got := fileSafe(in); got != want {
			t.Errorf("fileSafe(%q) = %q, want %q", in, got, want)
		}
	}
	long := fileSafe(strings.Repeat("s", 300))
	if len(long) > 100 || long == fileSafe(strings.Repeat("s", 299)) {
		t.Errorf("long names: %q", long)
	}
}

func TestMarshalStep(t *testing.T) {
	s := recordertest.SampleStep("t", 1)
	s.Seq = 9
	s.Error = json.RawMessage(`{"code": -32602, "message": "bad <arg> & more"}`)
	s.Result = json.RawMessage(`{"unterminated`)
	line := marshalStep(s)
	if line[len(line)-1] != '\n' || strings.Count(string(line), "\n") != 1 || !json.Valid(line) {
		t.Fatalf("not one JSON line: %q", line)
	}
	if !strings.Contains(string(line), `"bad <arg> & more"`) {
		t.Errorf("error escaped: %s", line)
	}
	if gjson.GetBytes(line, "seq").Int() != 9 || !gjson.GetBytes(line, "result").Exists() {
		t.Errorf("line: %s", line)
	}
}

// A report can be acknowledged before its line is written (delivery starts first); its
// mark must not come before the line, or a compaction could lose the line's done state.
func TestSpoolEarlyAckWaitsForItsLine(t *testing.T) {
	s, err := createSpool(t.TempDir(), "github", testID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if err := s.markDone(1); err != nil {
		t.Fatal(err)
	}
	if s.size != 0 {
		t.Fatalf("the mark was written before the report's line (%d bytes)", s.size)
	}
	line := []byte(`{"proxyId":"` + testID + `","server":"github","seq":1}` + "\n")
	if _, err := s.appendReports([][]byte{line}, []uint64{1}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(s.path)
	if string(data) != string(line)+`{"ack":1}`+"\n" {
		t.Fatalf("spool holds %q", data)
	}
	if s.live != 0 {
		t.Fatalf("%d reports left live", s.live)
	}
}

// The done marks of a batch go in one write, each a whole line, and a mark that comes
// before its report's line waits for the line; the next run then has nothing to send.
func TestDoneMarksOfABatch(t *testing.T) {
	dir := t.TempDir()
	s, err := createSpool(dir, "github", testID)
	if err != nil {
		t.Fatal(err)
	}
	line := func(seq int) string {
		return fmt.Sprintf(`{"proxyId":%q,"server":"github","seq":%d}`+"\n", testID, seq)
	}
	buf := line(1) + line(2) + line(3)
	es := []entry{{seq: 1, off: 0, n: len(line(1)) - 1}, {seq: 2, off: int64(len(line(1))), n: len(line(2)) - 1}, {seq: 3, off: int64(len(line(1)) * 2), n: len(line(3)) - 1}}
	if _, err := s.appendBatch([]byte(buf), es); err != nil {
		t.Fatal(err)
	}
	if err := s.markDone(1, 2, 3, 4); err != nil { // 4: acknowledged before its line is written
		t.Fatal(err)
	}
	if _, err := s.appendBatch([]byte(line(4)), []entry{{seq: 4, n: len(line(4)) - 1}}); err != nil {
		t.Fatal(err)
	}
	if _, live := s.usage(); live != 0 {
		t.Errorf("%d bytes of reports still waiting, want none", live)
	}
	b, _ := os.ReadFile(s.path)
	if want := buf + `{"ack":1}` + "\n" + `{"ack":2}` + "\n" + `{"ack":3}` + "\n" + line(4) + `{"ack":4}` + "\n"; string(b) != want {
		t.Errorf("spool file:\n%s\nwant:\n%s", b, want)
	}
	s.close()
	got := adoptSpools(t.Context(), dir, "github", "ffffffffffffffffffffffffffffffff", testLogger(t))
	for _, a := range got {
		if len(a.entries) > 0 {
			t.Errorf("the next run would send %d reports again", len(a.entries))
		}
		a.file.close()
	}
}

// With a recorder, a turn's reports reach it at once and the spool file with the other
// turns of the write window: the first report after a quiet spell is written at once,
// the ones after it in one write at the window's end (here, Close).
func TestSpoolWritesTakeAWindowsTurnsTogether(t *testing.T) {
	ctx := shortCtx(t)
	rec := recordertest.Start(t)
	state := t.TempDir()
	committed := newCounter()
	var writes atomic.Int32
	cfg := recorderConfig(t, rec, state)
	cfg.tuning.writeWindow = time.Hour
	cfg.tuning.hooks.committed = func(n int) { writes.Add(1); committed.add(n) }
	r := open(t, cfg)
	if _, err := rec.WaitRegistrations(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		r.Submit(recordertest.SampleStep("t", i))
		if _, err := rec.WaitSteps(ctx, i); err != nil { // one turn each
			t.Fatal(err)
		}
	}
	if err := committed.wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Delivered, and the four after the first not written yet: an hour of window is left.
	if reports, _ := spoolLines(t, spoolFiles(t, state)[0]); reports != 1 {
		t.Errorf("the spool file holds %d reports before the window ended, want 1", reports)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	committed.mu.Lock()
	n := committed.n
	committed.mu.Unlock()
	if w := writes.Load(); n != 5 || w != 2 {
		t.Errorf("%d reports written in %d writes, want 5 in 2", n, w)
	}
}

// A report the recorder has not taken is in the spool file by the end of the window,
// whether or not another report comes: a SIGKILL then loses nothing older.
func TestSpoolWindowEndsByItself(t *testing.T) {
	ctx := shortCtx(t)
	rec := recordertest.Start(t)
	state := t.TempDir()
	committed := newCounter()
	const window = 200 * time.Millisecond
	var mu sync.Mutex
	var at []time.Time // when each write was done
	cfg := recorderConfig(t, rec, state)
	cfg.tuning.writeWindow = window
	cfg.tuning.hooks.committed = func(n int) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		committed.add(n)
	}
	r := open(t, cfg)
	if _, err := rec.WaitRegistrations(ctx, 1); err != nil {
		t.Fatal(err)
	}
	rec.Fail(500)
	r.Submit(recordertest.SampleStep("t", 1))
	if err := committed.wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r.Submit(recordertest.SampleStep("t", 2)) // inside the window the first write opened
	if err := committed.wait(ctx, 2); err != nil {
		t.Fatal(err) // the window's timer never wrote it
	}
	mu.Lock()
	// The second write came at the window's end, not with its report (which a loaded
	// machine may only submit after the window: then this holds too).
	if d := at[1].Sub(at[0]); d < window-50*time.Millisecond {
		t.Errorf("the second report was written %s after the first, inside the %s window", d, window)
	}
	mu.Unlock()
	if reports, acks := spoolLines(t, spoolFiles(t, state)[0]); reports != 2 || acks != 0 {
		t.Errorf("the spool file holds %d reports and %d done marks, want 2 and 0", reports, acks)
	}
}
