package framing

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// chunked returns at most n bytes per Read, so lines cross reads at every offset.
type chunked struct {
	b []byte
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.b))
	copy(p, c.b[:k])
	c.b = c.b[k:]
	return k, nil
}

// sinkRec records one streamed line.
type sinkRec struct {
	got  bytes.Buffer
	end  *LineEnd
	peek jsonlex.Peek
}

func (s *sinkRec) Write(p []byte) { s.got.Write(p) }
func (s *sinkRec) End(e LineEnd) {
	s.peek = *e.Peek
	s.peek.ID, s.peek.Method = bytes.Clone(e.Peek.ID), bytes.Clone(e.Peek.Method)
	e.Peek = &s.peek
	s.end = &e
}

// outcome is what a Reader made of one line: a message, an error, or a stream.
type outcome struct {
	msg    []byte
	err    error
	stream *sinkRec
	unterm bool
}

func readOutcomes(t testing.TB, in []byte, chunk, max, threshold int) []outcome {
	return readAsking(t, in, chunk, max, threshold, false)
}

// readAsking is readOutcomes with, when ask, Buffered asked before every Read, as a
// relay does under load (Read then reuses the newline Buffered found).
func readAsking(t testing.TB, in []byte, chunk, max, threshold int, ask bool) []outcome {
	r := NewReader(&chunked{b: in, n: chunk}, WithMaxMessage(max))
	var cur *sinkRec
	if threshold > 0 {
		r.SetStream(threshold, func(*jsonlex.Peek) LineSink {
			cur = &sinkRec{}
			return cur
		})
	}
	var out []outcome
	for {
		if ask {
			r.Buffered()
			r.Buffered()
		}
		msg, err := r.Read()
		switch {
		case errors.Is(err, ErrStreamed):
			out = append(out, outcome{stream: cur})
			continue
		case err == io.EOF:
			if cur != nil && cur.end != nil && cur.end.Cut {
				out = append(out, outcome{stream: cur})
			}
			return out
		case err != nil:
			var tl *TooLongError
			if !errors.As(err, &tl) {
				t.Fatalf("Read: %v", err)
			}
			out = append(out, outcome{err: err})
			continue
		}
		out = append(out, outcome{msg: msg, unterm: r.Unterminated()})
		cur = nil
	}
}

// TestStreamedLinesAreTheAssembledOnes: a streamed line's pieces are exactly the
// message Read would have returned (a "\r\n" terminator's "\r" dropped, also where
// the "\r" and the "\n" fall in different reads), its end's scan names the id the
// whole line names last, and the lines around it are read as before.
func TestStreamedLinesAreTheAssembledOnes(t *testing.T) {
	pad := strings.Repeat("é\\\"x", 50000)
	in := `{"jsonrpc":"2.0","id":1,"result":{"t":"` + pad + `"}}` + "\r\n" +
		`{"small":true}` + "\n" +
		`{"id":2,"result":"` + pad + `","id":"last"}` + "\n" +
		`{"method":"notifications/message","params":{"d":"` + pad + `"}}` + "\r\n" +
		`{"pad":"` + pad + `","id":3,"result":1}` + "\n" + // decided only at its end
		`[{"id":4,"result":"` + pad + `"}]` + "\n" + // a batch: never decided
		`{"id":5,"result":"` + pad + `"}` // cut by the end of the stream
	for _, chunk := range []int{1 << 20, 4096, 7, 1} {
		if chunk == 1 && testing.Short() {
			continue
		}
		want := readOutcomes(t, []byte(in), chunk, 1<<30, 0)
		got := readOutcomes(t, []byte(in), chunk, 1<<30, 1000)
		if len(got) != len(want) {
			t.Fatalf("chunk %d: %d outcomes streaming, %d whole", chunk, len(got), len(want))
		}
		streamed := 0
		for i := range want {
			w, g := want[i], got[i]
			if g.stream == nil {
				if !bytes.Equal(g.msg, w.msg) {
					t.Fatalf("chunk %d line %d: %q, want %q", chunk, i, clip(g.msg), clip(w.msg))
				}
				continue
			}
			streamed++
			if !bytes.Equal(g.stream.got.Bytes(), w.msg) || g.stream.end.Size != int64(len(w.msg)) {
				t.Fatalf("chunk %d line %d: streamed %q (size %d), want %q", chunk, i, clip(g.stream.got.Bytes()), g.stream.end.Size, clip(w.msg))
			}
			if g.stream.end.Cut != w.unterm {
				t.Fatalf("chunk %d line %d: cut %v, want %v", chunk, i, g.stream.end.Cut, w.unterm)
			}
			var pk jsonlex.Peek
			pk.Write(w.msg)
			if !bytes.Equal(g.stream.peek.ID, pk.ID) || !bytes.Equal(g.stream.peek.Method, pk.Method) {
				t.Fatalf("chunk %d line %d: end says id %s method %s, the whole line %s %s", chunk, i, g.stream.peek.ID, g.stream.peek.Method, pk.ID, pk.Method)
			}
		}
		// Lines 0, 2, 3 and 6 decide from their heads, 4 once its "result" starts
		// (at its end); 5 never (a batch); the small one is under the threshold.
		if streamed != 5 {
			t.Fatalf("chunk %d: %d lines streamed, want 5", chunk, streamed)
		}
		if id := got[2].stream.peek.ID; string(id) != `"last"` {
			t.Fatalf("chunk %d: a duplicate id later in the line: the end says %s, want the last", chunk, id)
		}
	}
}

// TestStreamedLineOverTheCap: a streamed line that passes the cap ends there, said
// Over, its rest dropped unseen, and the next line is read as usual.
func TestStreamedLineOverTheCap(t *testing.T) {
	in := `{"id":1,"result":"` + strings.Repeat("x", 100000) + `"}` + "\n" + `{"id":2}` + "\n"
	got := readOutcomes(t, []byte(in), 4096, 50000, 100)
	if len(got) != 2 || got[0].stream == nil || !got[0].stream.end.Over || got[0].stream.got.Len() != 50000 {
		t.Fatalf("outcomes %+v", got)
	}
	if string(got[1].msg) != `{"id":2}` {
		t.Fatalf("after the over-cap line: %q", got[1].msg)
	}
}

// TestStreamedLineOverTheCapBeforeItsID: a streamed line that passes the cap before
// its id (the TypeScript SDK writes it last) was dropped unseen from the cap on, and
// its sender never answered; its scan now goes on to the line's end, which is said as
// a line over the cap with the id.
func TestStreamedLineOverTheCapBeforeItsID(t *testing.T) {
	in := `{"method":"tools/call","params":{"a":"` + strings.Repeat("x", 100000) + `"},"id":"late"}` + "\n" + `{"id":2}` + "\n"
	for _, chunk := range []int{1000, 4096, 32768} {
		got := readOutcomes(t, []byte(in), chunk, 50000, 100)
		if len(got) != 3 || got[0].stream == nil || !got[0].stream.end.Over {
			t.Fatalf("chunk %d: outcomes %+v", chunk, got)
		}
		var tl *TooLongError
		if !errors.As(got[1].err, &tl) || string(tl.ID) != `"late"` || string(tl.Method) != `"tools/call"` || tl.Size != int64(len(in)-len(`{"id":2}`)-2) {
			t.Fatalf("chunk %d: after the cap, %+v (%v)", chunk, got[1], got[1].err)
		}
		if string(got[2].msg) != `{"id":2}` {
			t.Fatalf("chunk %d: after the over-cap line: %q", chunk, got[2].msg)
		}
	}
}

// TestBufferedDoesNotAnnounceAStreamedLine: Buffered is asked so that a message may
// be held for the next; a line Read would stream is written before Read returns, so
// it must not be announced as the next message.
func TestBufferedDoesNotAnnounceAStreamedLine(t *testing.T) {
	in := `{"id":1}` + "\n" + `{"id":2,"result":"` + strings.Repeat("x", 5000) + `"}` + "\n"
	r := NewReader(strings.NewReader(in))
	r.SetStream(1000, func(*jsonlex.Peek) LineSink { return &sinkRec{} })
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	if r.Buffered() {
		t.Fatal("Buffered announced a line that Read streams")
	}
}

// TestWriterQueuesBehindAStreamedLine: while a line is written in pieces, what
// others write waits behind it, whole, and leaves with its newline.
func TestWriterQueuesBehindAStreamedLine(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	if err := w.Hold([]byte(`{"held":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Begin(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Write([]byte(`{"own":1}`)) }()
	if err := <-done; err != nil { // queued, not waiting for the line's end
		t.Fatal(err)
	}
	for _, p := range []string{`{"id":2,`, `"result":1}`} {
		if err := w.Part([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	if want := `{"held":1}` + "\n" + `{"id":2,"result":1}` + "\n" + `{"own":1}` + "\n"; out.String() != want {
		t.Fatalf("wrote %q, want %q", out.String(), want)
	}
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:40]) + "…" + string(b[len(b)-40:])
	}
	return string(b)
}

// FuzzStreamedEqualsAssembled is the differential check of streaming against the
// assembled path: for any input, any read size, any cap and any threshold, every
// line is either returned as it is without streaming, or streamed as exactly those
// bytes (a prefix of them when it passed the cap, where the assembled path dropped
// it), with the same end (cut or not), and its end's scan is the whole line's.
func FuzzStreamedEqualsAssembled(f *testing.F) {
	f.Add([]byte(`{"id":1,"result":"abc"}`+"\r\n"+`{"method":"x","params":{"a":"\"}"}}`+"\n"+`{"id":2,"result":1,"id":3}`), 3, 40, 1)
	f.Add([]byte(`{"id":"a\"b","result":{"x":[1,2,{"y":"}"}]}}`+"\n\n  \n"+`[1]`+"\n"+`{"id":9,"error":{}}`), 1, 1000, 5)
	f.Add([]byte(`{"a":"`+strings.Repeat("\\\\", 100)+`","id":1,"result":0}`+"\r"), 7, 64, 2)
	// A line of exactly the cap ended by "\r\n", a read ending between them.
	f.Add([]byte(`{"id":1,"result":"abc"}`+"\r\n"+`{"id":2}`), len(`{"id":1,"result":"abc"}`), len(`{"id":1,"result":"abc"}`)-1, 1) // the fuzz adds 1 to chunk and max
	f.Fuzz(func(t *testing.T, in []byte, chunk, max, threshold int) {
		chunk = 1 + abs(chunk)%97
		max = 1 + abs(max)%4096
		threshold = 1 + abs(threshold)%512
		want := readOutcomes(t, in, chunk, max, 0)
		got := readOutcomes(t, in, chunk, max, threshold)
		if len(got) != len(want) {
			t.Fatalf("%d outcomes streaming, %d whole", len(got), len(want))
		}
		for i := range want {
			w, g := want[i], got[i]
			if g.stream == nil {
				if !bytes.Equal(g.msg, w.msg) || (g.err == nil) != (w.err == nil) {
					t.Fatalf("line %d: %q %v, want %q %v", i, g.msg, g.err, w.msg, w.err)
				}
				continue
			}
			s := g.stream
			if s.end.Over {
				var tl *TooLongError
				if !errors.As(w.err, &tl) || int(s.end.Size) > max+1 {
					t.Fatalf("line %d: over the cap streaming, %v whole", i, w.err)
				}
				continue
			}
			if w.err != nil || !bytes.Equal(s.got.Bytes(), w.msg) || s.end.Size != int64(len(w.msg)) || s.end.Cut != w.unterm {
				t.Fatalf("line %d: streamed %q (size %d, cut %v), want %q (%v, cut %v)", i, s.got.Bytes(), s.end.Size, s.end.Cut, w.msg, w.err, w.unterm)
			}
			var pk jsonlex.Peek
			pk.Write(w.msg)
			if !bytes.Equal(s.peek.ID, pk.ID) || !bytes.Equal(s.peek.Method, pk.Method) || s.peek.Answer != pk.Answer || s.peek.More != pk.More {
				t.Fatalf("line %d: end's scan %+v, the whole line's %+v", i, s.peek, pk)
			}
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestWriterEndsALineStalledWithTooMuchBehindIt: past afterMax waiting behind a line
// written in pieces, the line is ended there (its newline, then what waited), the
// writer that passed the bound does not wait, the line's later pieces are dropped,
// and End says so (ErrLineCut); after it the writer is as before.
func TestWriterEndsALineStalledWithTooMuchBehindIt(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	if err := w.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := w.Part([]byte(`{"id":1,`)); err != nil {
		t.Fatal(err)
	}
	msg := []byte(`"` + strings.Repeat("m", 1<<20) + `"`)
	n := afterMax/len(msg) + 2
	for range n { // from this goroutine: a wait for the line's end would hang here
		if err := w.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Part([]byte(`"result":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.End(); !errors.Is(err, ErrLineCut) {
		t.Fatalf("End: %v, want ErrLineCut", err)
	}
	if err := w.Write([]byte(`{"id":2}`)); err != nil {
		t.Fatal(err)
	}
	want := `{"id":1,` + "\n" + strings.Repeat(string(msg)+"\n", n) + `{"id":2}` + "\n"
	if out.String() != want {
		t.Fatalf("wrote %d bytes %s, want %d bytes %s", out.Len(), clip(out.Bytes()), len(want), clip([]byte(want)))
	}
}
