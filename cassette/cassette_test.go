package cassette

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func record(t *testing.T, o WriterOptions, calls ...Recorded) string {
	t.Helper()
	w, err := Create(o)
	if err != nil {
		t.Fatal(err)
	}
	w.HostRequest("initialize", []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}`))
	w.HostRequest("notifications/initialized", nil)
	w.ServerResult("initialize", []byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"2"}}`))
	w.ServerResult("tools/list", []byte(`{"tools":[{"name":"a","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},{"name":"b","inputSchema":{}}]}`))
	w.ServerResult("tools/list", []byte(`{"tools":[{"name":"a","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}}]}`))
	for _, c := range calls {
		w.Call(c)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return o.Path
}

func readAll(t *testing.T, path string) (*Header, []*Call, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewReader(f, path)
	if err != nil {
		return nil, nil, err
	}
	var calls []*Call
	for {
		c, err := r.Next()
		if err == io.EOF {
			return r.Header(), calls, nil
		}
		if err != nil {
			return r.Header(), calls, err
		}
		calls = append(calls, c)
	}
}

func TestRoundTripKeepsRawBytes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cassettes")
	// Key order, spacing, escapes, <>&, big numbers: all exactly as sent; a newline
	// between tokens (a pretty-printing HTTP server) becomes a space.
	args := []byte(`{"z": 1, "a":"<&>\u00e9", "n":9007199254740993}`)
	result := []byte("{\"content\":[{\"type\":\"text\",\n\"text\":\"x\\ny\"}]}")
	path := record(t, WriterOptions{Path: filepath.Join(dir, "s.jsonl"), Header: Header{Server: "s", Command: []string{"srv", "--flag"}}},
		Recorded{Tool: "a", Arguments: args, Outcome: "ok", Result: result, StartedAt: time.Now(), Duration: 1500 * time.Microsecond},
		Recorded{Tool: "b", Outcome: "rpc_error", Error: []byte(`{"code":-32602,"message":"bad"}`)},
	)
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", st.Mode().Perm())
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("folder mode %v, want 0700", st.Mode().Perm())
	}
	h, calls, err := readAll(t, path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Era != EraSession || h.ProtocolVersion != "2025-11-25" || !h.Initialized || h.Server != "s" || strings.Join(h.Command, " ") != "srv --flag" {
		t.Errorf("header %+v", h)
	}
	if want := `[{"name":"a","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}},{"name":"b","inputSchema":{}}]`; string(h.Tools) != want {
		t.Errorf("tools %s\nwant %s", h.Tools, want)
	}
	if len(calls) != 2 {
		t.Fatalf("%d calls", len(calls))
	}
	if !bytes.Equal(calls[0].Arguments, args) {
		t.Errorf("arguments %s, want %s", calls[0].Arguments, args)
	}
	if want := bytes.ReplaceAll(result, []byte("\n"), []byte(" ")); !bytes.Equal(calls[0].Result, want) {
		t.Errorf("result %s, want %s", calls[0].Result, want)
	}
	if calls[0].Duration() != 1500*time.Microsecond || calls[0].Seq != 1 || calls[1].Seq != 2 {
		t.Errorf("call %+v", calls[0])
	}
	if calls[1].Arguments != nil || string(calls[1].Error) != `{"code":-32602,"message":"bad"}` {
		t.Errorf("call %+v", calls[1])
	}
}

func TestStatelessHeader(t *testing.T) {
	w, err := Create(WriterOptions{Path: filepath.Join(t.TempDir(), "c.jsonl"), Header: Header{Server: "s", URL: "https://h/mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"v2","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}`
	w.HostRequest("server/discover", []byte(`{"_meta":`+meta+`}`))
	w.ServerResult("server/discover", []byte(`{"supportedVersions":["2026-07-28"],"resultType":"complete"}`))
	w.HostRequest("tools/call", []byte(`{"name":"e","_meta":{"io.modelcontextprotocol/protocolVersion":"other"}}`))
	w.Call(Recorded{Tool: "e", Arguments: []byte(`{}`), Outcome: "ok", Result: []byte(`{"content":[]}`)})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h, calls, err := readAll(t, w.o.Path)
	if err != nil || len(calls) != 1 {
		t.Fatal(err, len(calls))
	}
	if h.Era != EraStateless || string(h.Meta) != meta || h.ProtocolVersion != "2026-07-28" || h.URL != "https://h/mcp" || h.DiscoverResult == nil {
		t.Errorf("header %+v", h)
	}
}

func TestEachRunRotatesTheLastAway(t *testing.T) {
	dir := t.TempDir()
	o := WriterOptions{Path: filepath.Join(dir, "c.jsonl"), Keep: 2}
	for i := range 4 {
		record(t, o, Recorded{Tool: "a", Outcome: "ok", Result: []byte(`{"run":` + string(rune('0'+i)) + `}`)})
	}
	for _, p := range []string{o.Path, Rotated(o.Path, 1), Rotated(o.Path, 2)} {
		if _, _, err := readAll(t, p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := os.Stat(Rotated(o.Path, 3)); err == nil {
		t.Error("kept more than Keep older files")
	}
	_, calls, _ := readAll(t, o.Path)
	if string(calls[0].Result) != `{"run":3}` {
		t.Errorf("newest %s", calls[0].Result)
	}
}

func TestSizeBoundRotatesWithTheHeader(t *testing.T) {
	o := WriterOptions{Path: filepath.Join(t.TempDir(), "c.jsonl"), MaxBytes: 2000, Keep: 50}
	var calls []Recorded
	for range 40 {
		calls = append(calls, Recorded{Tool: "a", Outcome: "ok", Result: []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 100) + `"}]}`)})
	}
	record(t, o, calls...)
	total := 0
	for n := 0; ; n++ {
		p := o.Path
		if n > 0 {
			p = Rotated(o.Path, n)
		}
		st, err := os.Stat(p)
		if err != nil {
			break
		}
		if st.Size() > 2000+200 {
			t.Errorf("%s is %d bytes", p, st.Size())
		}
		h, cs, err := readAll(t, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(h.Tools) == 0 {
			t.Errorf("%s: rotated file without the header's tools", p)
		}
		total += len(cs)
	}
	if total != 40 {
		t.Errorf("%d calls across the files, want 40", total)
	}
}

func TestFullQueueDropsAndCounts(t *testing.T) {
	o := WriterOptions{Path: filepath.Join(t.TempDir(), "c.jsonl"), QueueBytes: 4096}
	w, err := Create(o)
	if err != nil {
		t.Fatal(err)
	}
	big := []byte(`{"x":"` + strings.Repeat("y", 8192) + `"}`)
	w.Call(Recorded{Tool: "a", Outcome: "ok", Result: big}) // larger than the queue: recorded too large
	w.Call(Recorded{Tool: "a", Outcome: "ok", Result: []byte(`{}`)})
	w.Call(Recorded{Tool: "a", Outcome: "ok", Result: []byte(`{"not json`)})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Dropped() != 1 {
		t.Errorf("dropped %d, want 1", w.Dropped())
	}
	f, _ := os.Open(o.Path)
	defer f.Close()
	r, err := NewReader(f, o.Path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err := r.Next(); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		n++
	}
	if n != 2 || r.Dropped() != 1 {
		t.Errorf("%d calls, %d dropped", n, r.Dropped())
	}
}

func TestBadCassettes(t *testing.T) {
	good := record(t, WriterOptions{Path: filepath.Join(t.TempDir(), "c.jsonl")},
		Recorded{Tool: "a", Outcome: "ok", Result: []byte(`{}`)},
		Recorded{Tool: "a", Outcome: "ok", Result: []byte(`{}`)})
	b, _ := os.ReadFile(good)
	lines := strings.SplitAfter(string(b), "\n")
	cases := []struct {
		name, text string
		line       int
		is         error
	}{
		{"empty", "", 0, nil},
		{"foreign", `{"jsonrpc":"2.0"}` + "\n", 1, ErrNotCassette},
		{"journal", `{"seq":1,"tool":"a","outcome":"ok"}` + "\n", 1, ErrNotCassette},
		{"version", `{"bir-cassette":2,"server":"x"}` + "\n", 1, ErrVersion},
		{"truncated", lines[0] + lines[1] + lines[2][:10], 3, ErrTruncated},
		{"bad line", lines[0] + "{nope}\n" + lines[1], 2, nil},
		{"unknown member", lines[0] + `{"seq":1,"tool":"a","outcome":"ok","surprise":1}` + "\n", 2, nil},
		{"second header", lines[0] + lines[0], 2, nil},
		{"out of order", lines[0] + lines[2] + lines[1], 3, nil},
		{"after end", string(b) + lines[1], 5, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.jsonl")
			os.WriteFile(p, []byte(tc.text), 0o600)
			_, _, err := readAll(t, p)
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("err %v, want a LineError", err)
			}
			if le.Line != tc.line || !strings.Contains(err.Error(), "line ") {
				t.Errorf("%v: line %d, want %d", err, le.Line, tc.line)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("%v, want %v", err, tc.is)
			}
		})
	}
}

func TestLongLineCapped(t *testing.T) {
	text := `{"bir-cassette":1,"server":"x","recordedAt":"2026-01-01T00:00:00Z","era":"unknown"}` + "\n" + `{"seq":1,"tool":"` + strings.Repeat("a", 5000) + `","outcome":"ok"}` + "\n"
	r, err := newReader(strings.NewReader(text), "x", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "line 2: longer") {
		t.Fatalf("err %v", err)
	}
}

func TestRedactedPaths(t *testing.T) {
	got := RedactedPaths([]byte(`{"a":"x","token":"[REDACTED]","env":["k","v [REDACTED]"],"n":{"deep":["…[clipped 3 of 9 bytes sha256:ab]"]},"we.ird":"[REDACTED]"}`))
	want := `$.token $.env[1] $.n.deep[0] $["we.ird"]`
	if strings.Join(got, " ") != want {
		t.Errorf("%q, want %s", got, want)
	}
	if got := RedactedPaths([]byte(`{"a":"b"}`)); got != nil {
		t.Errorf("%q", got)
	}
}

// TestNoCallNoFile: a run with no call writes nothing and rotates nothing; a header
// alone (an older bir-proxy's run without calls) is replaced, not rotated, so it never
// pushes a cassette with calls out of the Keep kept; a foreign file is rotated away,
// never replaced.
func TestNoCallNoFile(t *testing.T) {
	dir := t.TempDir()
	o := WriterOptions{Path: filepath.Join(dir, "c.jsonl"), Keep: 2}
	record(t, o)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a run with no call left %d files", len(ents))
	}
	record(t, o, Recorded{Tool: "a", Outcome: "ok", Result: []byte(`{"run":1}`)})
	record(t, o)
	if _, calls, err := readAll(t, o.Path); err != nil || len(calls) != 1 {
		t.Fatalf("%d calls, %v", len(calls), err)
	}
	// Older runs without calls: replaced.
	hdr := `{"bir-cassette":1,"server":"x","recordedAt":"2026-01-01T00:00:00Z","era":"unknown"}` + "\n"
	os.Rename(o.Path, Rotated(o.Path, 1))
	for _, text := range []string{hdr, hdr + `{"end":true,"calls":0}` + "\n", ""} {
		os.WriteFile(o.Path, []byte(text), 0o600)
		record(t, o, Recorded{Tool: "a", Outcome: "ok", Result: []byte(`{"run":2}`)})
		if _, calls, _ := readAll(t, Rotated(o.Path, 1)); len(calls) != 1 || string(calls[0].Result) != `{"run":1}` {
			t.Fatalf("after %q: the older cassette with calls was pushed out", text)
		}
		os.Remove(o.Path)
	}
	os.WriteFile(o.Path, []byte("not a cassette\n"), 0o600)
	record(t, o, Recorded{Tool: "a", Outcome: "ok", Result: []byte(`{"run":3}`)})
	if b, _ := os.ReadFile(Rotated(o.Path, 1)); string(b) != "not a cassette\n" {
		t.Errorf("a foreign file was not rotated away: %q", b)
	}
}

// TestHeaderToolsBounded: every tools/list page before the first call was kept, and
// 100 pages of 4 MB made a 400 MB header line. The tools kept stop at MaxHeaderTools;
// the first listed are kept, a name listed again still replaces its entry.
func TestHeaderToolsBounded(t *testing.T) {
	o := WriterOptions{Path: filepath.Join(t.TempDir(), "c.jsonl")}
	w, err := Create(o)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("a", 1<<20)
	for page := range 20 {
		var b strings.Builder
		b.WriteString(`{"tools":[`)
		for k := range 4 {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"t%d_%d","description":"%s"}`, page, k, pad)
		}
		b.WriteString(`]}`)
		w.ServerResult("tools/list", []byte(b.String()))
	}
	w.ServerResult("tools/list", []byte(`{"tools":[{"name":"t0_0","description":"again"}]}`))
	w.Call(Recorded{Tool: "t0_0", Outcome: "ok", Result: []byte(`{}`)})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h, calls, err := readAll(t, o.Path)
	if err != nil || len(calls) != 1 {
		t.Fatalf("%d calls, %v", len(calls), err)
	}
	if len(h.Tools) > MaxHeaderTools+1024 {
		t.Errorf("tools %d bytes, past the bound %d", len(h.Tools), MaxHeaderTools)
	}
	if !bytes.HasPrefix(h.Tools, []byte(`[{"name":"t0_0","description":"again"},{"name":"t0_1"`)) {
		t.Errorf("tools start %.60s", h.Tools)
	}
}

// TestOverCapLineNotHeld: a 600 MB line cost 1.3 GB to refuse against the 512 MiB
// line cap (grown by append, then copied). From a file it is measured before it is
// held, and refused holding nothing of it; from a pipe it is refused holding at most
// the cap. The file is sparse: 600 MB on no disk.
func TestOverCapLineNotHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	head := `{"bir-cassette":1,"server":"x","recordedAt":"2026-01-01T00:00:00Z","era":"unknown"}` + "\n" +
		`{"seq":1,"tool":"a","outcome":"ok","result":"`
	f.WriteString(head)
	f.Seek(600<<20, io.SeekCurrent)
	f.WriteString(`"}` + "\n")
	f.Close()

	f, _ = os.Open(path)
	defer f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := NewReader(f, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "line 2: longer than") {
		t.Fatalf("err %v", err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("refusing a 600 MB line allocated %d MB", got>>20)
	}

	// A pipe: at most the cap (here 8 MiB), never the line.
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(head))
		chunk := make([]byte, 1<<20)
		for range 64 {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	defer pr.Close()
	runtime.ReadMemStats(&before)
	r, err = newReader(pr, "pipe", 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("err %v", err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 12<<20 { // the cap, the writer's 1 MiB, slack
		t.Errorf("refusing a 64 MB line with an 8 MiB cap allocated %d MB", got>>20)
	}
}

// TestLongLinesRead: lines longer than the reader's buffer read whole, from a file
// (measured, then read at their size) and from a pipe (in pieces).
func TestLongLinesRead(t *testing.T) {
	big := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("z", 300<<10) + `"}]}`)
	path := record(t, WriterOptions{Path: filepath.Join(t.TempDir(), "c.jsonl")},
		Recorded{Tool: "a", Outcome: "ok", Result: big},
		Recorded{Tool: "b", Outcome: "ok", Result: []byte(`{}`)},
		Recorded{Tool: "c", Outcome: "ok", Result: big})
	_, calls, err := readAll(t, path)
	if err != nil || len(calls) != 3 || !bytes.Equal(calls[0].Result, big) || !bytes.Equal(calls[2].Result, big) || calls[1].Tool != "b" {
		t.Fatalf("from a file: %d calls, %v", len(calls), err)
	}
	b, _ := os.ReadFile(path)
	r, err := NewReader(struct{ io.Reader }{bytes.NewReader(b)}, "pipe")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c, err := r.Next()
		if err != nil || (i != 1 && !bytes.Equal(c.Result, big)) {
			t.Fatalf("from a pipe, call %d: %v", i, err)
		}
	}
}

// TestTooLargeCallRecordedAsSuch: a call past what the cassette keeps of one call was
// dropped and only counted, and a run whose every call was such wrote no file. It is
// recorded now without its values (TooLarge: their bytes), between the calls that
// fit, without the writer copying any of it; and it is said on stderr, naming it.
func TestTooLargeCallRecordedAsSuch(t *testing.T) {
	huge := make([]byte, 100<<20) // a 100 MB result; its bytes are never looked at
	for _, n := range []int{2, 8} {
		for _, allBig := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/allBig=%v", n, allBig), func(t *testing.T) {
				var logs bytes.Buffer
				o := WriterOptions{Path: filepath.Join(t.TempDir(), "c.jsonl"), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
				w, err := Create(o)
				if err != nil {
					t.Fatal(err)
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for i := range n {
					if allBig || i == n/2 {
						w.Call(Recorded{Tool: "big", Arguments: []byte(`{"i":1}`), Outcome: "ok", Result: huge})
					} else {
						w.Call(Recorded{Tool: "small", Arguments: []byte(`{"i":1}`), Outcome: "ok", Result: []byte(`{"content":[]}`)})
					}
				}
				runtime.ReadMemStats(&after)
				if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
					t.Errorf("recording %d calls (100 MB results) allocated %d KB", n, got>>10)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if w.Dropped() != 0 {
					t.Errorf("dropped %d", w.Dropped())
				}
				f, err := os.Open(o.Path)
				if err != nil {
					t.Fatalf("no cassette: %v\n%s", err, logs.String())
				}
				defer f.Close()
				r, err := NewReader(f, o.Path)
				if err != nil {
					t.Fatal(err)
				}
				var seqs []int64
				tooLarge := 0
				for {
					c, err := r.Next()
					if err == io.EOF {
						break
					} else if err != nil {
						t.Fatal(err)
					}
					seqs = append(seqs, c.Seq)
					if c.Tool == "big" {
						if c.TooLarge != int64(len(huge)+len(`{"i":1}`)) || c.Arguments != nil || c.Result != nil || c.Outcome != "ok" {
							t.Errorf("call %d: too large %d, arguments %q, result of %d bytes, outcome %q", c.Seq, c.TooLarge, c.Arguments, len(c.Result), c.Outcome)
						}
						tooLarge++
					} else if c.TooLarge != 0 || c.Result == nil {
						t.Errorf("call %d of small: %+v", c.Seq, c)
					}
				}
				want := 1
				if allBig {
					want = n
				}
				if len(seqs) != n || tooLarge != want {
					t.Errorf("seqs %v, %d too large; want %d calls, %d too large", seqs, tooLarge, n, want)
				}
				if said := logs.String(); !strings.Contains(said, "too large") || !strings.Contains(said, "tool=big") {
					t.Errorf("stderr does not name the call:\n%s", said)
				}
			})
		}
	}
}
