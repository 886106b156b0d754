package journal

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readAll reads r to its io.EOF, returning the lines of each kind.
func readAll(t testing.TB, r *Reader) (reports []string, kinds []Kind) {
	t.Helper()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return reports, kinds
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, rec.Kind)
		if rec.Kind == KindReport {
			reports = append(reports, string(rec.Line))
		}
	}
}

// A follower reading while the writer rotates the journal under it reads every
// line once, in order: what was left in the file that became path.1 first.
func TestReaderFollowsRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	w, err := Open(path, 200, 50, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := NewReader(path, false)
	var got []string
	for i := range 60 {
		if err := w.Write(fmt.Appendf(nil, "{\"seq\":%d,\"pad\":\"%s\"}\n", i, strings.Repeat("x", i%7))); err != nil {
			t.Fatal(err)
		}
		if i%4 == 3 {
			reports, _ := readAll(t, r)
			got = append(got, reports...)
		}
	}
	if _, err := os.Stat(Rotated(path, 3)); err != nil {
		t.Fatalf("the journal was not rotated as often as the test needs: %v", err)
	}
	if len(got) != 60 {
		t.Fatalf("read %d lines, want 60", len(got))
	}
	for i, l := range got {
		if !strings.HasPrefix(l, fmt.Sprintf("{\"seq\":%d,", i)) {
			t.Fatalf("line %d is %s", i, l)
		}
	}
}

// A line still being written is left for a later read; lines over MaxLine are
// skipped and counted; done marks, records of other kinds and broken lines are said
// for what they are.
func TestReaderKinds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	long := `{"seq":9,"x":"` + strings.Repeat("y", MaxLine) + `"}` + "\n"
	content := `{"seq":1}` + "\r\n\n" + `{"ack":1}` + "\n" + `{"ack":null,"record":"new_kind"}` + "\n" + `{"ack":null,"record":"tool_drift","drift":{"tool":"t"}}` + "\n" + `{"seq":` + "\n" + long + `{"seq":2}` + "\n" + `{"seq":3`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	r := NewReader(path, true)
	reports, kinds := readAll(t, r)
	if want := []Kind{KindReport, KindAck, KindOther, KindDrift, KindBroken, KindReport}; fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	if fmt.Sprint(reports) != `[{"seq":1} {"seq":2}]` || r.Long != 1 {
		t.Errorf("reports %v (long %d), want the two whole ones and one long line", reports, r.Long)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("}\n")
	f.Close()
	if reports, _ := readAll(t, r); fmt.Sprint(reports) != `[{"seq":3}]` {
		t.Errorf("the line finished later read as %v", reports)
	}
}

// Tail reads the last reports that match, backwards, and a later Next follows on
// from the end of the whole lines.
func TestReaderTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	var b bytes.Buffer
	for i := range 5000 {
		fmt.Fprintf(&b, "{\"seq\":%d,\"pad\":\"%s\"}\n", i, strings.Repeat("p", 40))
		if i%100 == 0 {
			b.WriteString(`{"ack":null,"record":"x"}` + "\n")
		}
	}
	b.WriteString(`{"seq":"partial`)
	os.WriteFile(path, b.Bytes(), 0o600)
	r := NewReader(path, false)
	got, err := r.Tail(3, func(rec Record) bool { return !bytes.Contains(rec.Line, []byte(`"seq":4998,`)) })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !bytes.HasPrefix(got[0], []byte(`{"seq":4996,`)) || !bytes.HasPrefix(got[2], []byte(`{"seq":4999,`)) {
		t.Errorf("tail: %q", got)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("\"}\n")
	f.Close()
	if reports, _ := readAll(t, r); fmt.Sprint(reports) != `[{"seq":"partial"}]` {
		t.Errorf("after the tail: %v", reports)
	}
}

// TestReaderTailAcrossChunks: Tail, which reads 64 KiB chunks from the end, returns
// the lines Next does, those that cross chunks and those over MaxLine (skipped) too.
func TestReaderTailAcrossChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	var b bytes.Buffer
	for i, n := range []int{10, 70000, 130000, tailChunk - 3, 1, MaxLine + 1, 200000, tailChunk - 2, 5} {
		fmt.Fprintf(&b, "\"%d%s\"\n", i, strings.Repeat("x", n))
	}
	os.WriteFile(path, b.Bytes(), 0o600)
	want, _ := readAll(t, NewReader(path, false))
	r := NewReader(path, false)
	got, err := r.Tail(100, func(Record) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(want) != 8 || r.Long != 1 {
		t.Fatalf("tail: %d lines (%d long), Next: %d", len(got), r.Long, len(want))
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("line %d: tail %.20q (%d bytes), Next %.20q (%d bytes)", i, got[i], len(got[i]), want[i], len(want[i]))
		}
	}
}

// FuzzReader: whatever a journal file holds, the Reader returns lines without their
// line end, each at most MaxLine, and never a line twice.
func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"seq\":1}\n{\"ack\":1}\n"), 3)
	f.Add([]byte("{\"ack\":null,\"record\":\"tool_drift\"}\r\n\n{\"seq\""), 1)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		if cut < 0 || cut > len(data) {
			cut = len(data)
		}
		os.WriteFile(path, data[:cut], 0o600)
		r := NewReader(path, false)
		var got []byte
		read := func() {
			for {
				rec, err := r.Next()
				if err == io.EOF {
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if bytes.ContainsAny(rec.Line, "\n") || len(rec.Line) > MaxLine {
					t.Fatalf("line %q", rec.Line)
				}
				got = append(append(got, rec.Line...), '\n')
			}
		}
		read()
		fl, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		fl.Write(data[cut:])
		fl.Close()
		read()
		var want []byte
		for _, l := range bytes.SplitAfter(data, []byte("\n")) {
			if !bytes.HasSuffix(l, []byte("\n")) {
				continue
			}
			l = bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r"))
			if len(bytes.TrimSpace(l)) > 0 {
				want = append(append(want, l...), '\n')
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read %q, want %q", got, want)
		}
	})
}
