package framing

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// withBufSize shrinks the read buffer so tests reach the long-line paths with small
// inputs.
func withBufSize(n int) Option {
	return func(r *Reader) { r.buf = make([]byte, n) }
}

type result struct {
	msg     string
	tooLong int64 // size reported by a TooLongError, or -1
}

func readAll(t testing.TB, r *Reader) []result { return readAllAsking(t, r, false) }

// readAllAsking is readAll, asking Buffered before each Read when ask is set, as a
// relay does: what Buffered found of the next line must not change what Read returns.
func readAllAsking(t testing.TB, r *Reader, ask bool) []result {
	t.Helper()
	var out []result
	for {
		if ask {
			r.Buffered()
		}
		msg, err := r.Read()
		var tl *TooLongError
		switch {
		case errors.As(err, &tl):
			out = append(out, result{tooLong: tl.Size})
		case err == io.EOF:
			return out
		case err != nil:
			t.Fatalf("Read: %v", err)
		default:
			if len(msg) == 0 {
				t.Fatalf("Read returned an empty message")
			}
			out = append(out, result{msg: string(msg), tooLong: -1})
		}
	}
}

// expected is the reference framing: split on "\n", drop one trailing "\r", skip
// whitespace-only lines, report lines over max by size.
func expected(input string, max int) []result {
	var out []result
	lines := strings.Split(input, "\n")
	for i, l := range lines {
		if i == len(lines)-1 && l == "" {
			break
		}
		l = strings.TrimSuffix(l, "\r")
		if len(l) > max {
			out = append(out, result{tooLong: int64(len(l))})
			continue
		}
		if strings.Trim(l, " \t\r") == "" {
			continue
		}
		out = append(out, result{msg: l, tooLong: -1})
	}
	return out
}

func check(t testing.TB, input string, max, bufSize int, chunked bool, opts ...Option) {
	t.Helper()
	checkAsking(t, input, max, bufSize, chunked, false, opts...)
}

func checkAsking(t testing.TB, input string, max, bufSize int, chunked, ask bool, opts ...Option) {
	t.Helper()
	var src io.Reader = strings.NewReader(input)
	if chunked {
		src = iotest.OneByteReader(src)
	}
	got := readAllAsking(t, NewReader(src, append([]Option{WithMaxMessage(max), withBufSize(bufSize)}, opts...)...), ask)
	want := expected(input, max)
	if len(got) != len(want) {
		t.Fatalf("input %q (max %d, buf %d): got %d messages %+v, want %d %+v", input, max, bufSize, len(got), got, len(want), want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("input %q (max %d, buf %d): message %d = %+v, want %+v", input, max, bufSize, i, got[i], want[i])
		}
	}
}

// checkLending is check of a Reader that lends its lines (WithLending), asking
// Buffered before each Read as a relay does. Besides returning the reference's
// messages, what it lent must stay as it was for as long as the option promises:
// through every Read that follows a Buffered that reported true, until a Read that
// may read the source. Each lent message is also edited in place and appended to, as
// a key strip and a careless caller would: neither may reach another message.
func checkLending(t testing.TB, input string, max, bufSize int, chunked bool) {
	t.Helper()
	var src io.Reader = strings.NewReader(input)
	if chunked {
		src = iotest.OneByteReader(src)
	}
	r := NewReader(src, WithMaxMessage(max), withBufSize(bufSize), WithLending())
	type lent struct {
		msg  []byte
		want string
	}
	var live []lent // lent messages that must still be intact
	var got []result
	for {
		buffered := r.Buffered()
		if !buffered {
			live = live[:0] // the next Read may read the source
		}
		msg, err := r.Read()
		for i, l := range live {
			if string(l.msg) != l.want {
				t.Fatalf("input %q (max %d, buf %d): lent message %d of %d changed to %q by a Read after Buffered said true, want %q", input, max, bufSize, i, len(live), l.msg, l.want)
			}
		}
		var tl *TooLongError
		switch {
		case errors.As(err, &tl):
			got = append(got, result{tooLong: tl.Size})
			live = live[:0]
			continue
		case err == io.EOF:
		case err != nil:
			t.Fatalf("Read: %v", err)
		default:
			if cap(msg) != len(msg) {
				t.Fatalf("input %q: a lent message has room for %d bytes more: an append would overwrite the next line", input, cap(msg)-len(msg))
			}
			got = append(got, result{msg: string(msg), tooLong: -1})
			// An edit inside the message (the key strip shortens it in place) and an
			// append must leave every other line as it was.
			edited := append([]byte(nil), msg...)
			edited[0] ^= 0x20
			msg[0] ^= 0x20
			_ = append(msg, "\n\n{}"...)
			live = append(live, lent{msg: msg, want: string(edited)})
			continue
		}
		break
	}
	want := expected(input, max)
	if len(got) != len(want) {
		t.Fatalf("input %q (max %d, buf %d), lending: got %d messages %+v, want %d %+v", input, max, bufSize, len(got), got, len(want), want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("input %q (max %d, buf %d), lending: message %d = %+v, want %+v", input, max, bufSize, i, got[i], want[i])
		}
	}
}

func TestReaderFraming(t *testing.T) {
	cases := map[string]string{
		"simple":          "{\"a\":1}\n{\"b\":2}\n",
		"crlf":            "{\"a\":1}\r\n{\"b\":2}\r\n",
		"blank lines":     "\n\r\n  \n{\"a\":1}\n\t\n\n{\"b\":2}\n",
		"no final nl":     "{\"a\":1}\n{\"b\":2}",
		"final cr no nl":  "{\"a\":1}\r",
		"only blank":      "\n\n\r\n",
		"empty":           "",
		"inner cr kept":   "{\"a\":\"x\ry\"}\n",
		"malformed kept":  "not json at all\n{\"a\":\n",
		"spaces inside":   "  { \"a\" : [ 1 , 2 ] }  \n",
		"long lines":      strings.Repeat("x", 100) + "\n" + strings.Repeat("y", 37) + "\n" + strings.Repeat("z", 64),
		"too long middle": "{}\n" + strings.Repeat("q", 300) + "\n[]\n",
		"too long last":   "{}\n" + strings.Repeat("q", 300),
		"too long crlf":   strings.Repeat("q", 201) + "\r\n{}\n",
		"exactly max":     strings.Repeat("m", 200) + "\n" + strings.Repeat("m", 200) + "\r\n",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			for _, buf := range []int{1, 2, 7, 64, 4096} {
				check(t, in, 200, buf, false)
				check(t, in, 200, buf, true)
				check(t, in, 200, buf, false, WithSlab())
				checkLending(t, in, 200, buf, false)
				checkLending(t, in, 200, buf, true)
			}
		})
	}
}

func TestReaderOwnership(t *testing.T) {
	r := NewReader(strings.NewReader("{\"a\":1}\n{\"b\":2}\n"))
	first, _ := r.Read()
	second, _ := r.Read()
	if string(first) != `{"a":1}` || string(second) != `{"b":2}` {
		t.Fatalf("a later Read changed an earlier message: %q %q", first, second)
	}
}

// TestReaderSlabOwnership: messages carved from one block are still each the caller's:
// an edit in place, or an append, of one leaves the others as they were.
func TestReaderSlabOwnership(t *testing.T) {
	var in strings.Builder
	for i := range 2000 { // several blocks' worth
		in.WriteString(`{"n":` + strings.Repeat("7", i%50) + "1}\n")
	}
	in.WriteString(`{"big":"` + strings.Repeat("b", slabMsgMax) + "\"}\n")
	r := NewReader(strings.NewReader(in.String()), WithSlab())
	var msgs [][]byte
	for {
		m, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	want := strings.Split(strings.TrimSuffix(in.String(), "\n"), "\n")
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if cap(m) != len(m) {
			t.Fatalf("message %d has room for %d more bytes: an append would reach the next", i, cap(m)-len(m))
		}
		m[0] = 'X'
		_ = append(m, "junk"...)
	}
	for i, m := range msgs {
		if string(m[1:]) != want[i][1:] {
			t.Fatalf("message %d = %q, want %q: another message's edit reached it", i, m, want[i])
		}
	}
}

func TestReaderLargeMessage(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20) // 48 MiB
	in := append(append([]byte("{\"x\":1}\n"), big...), "\r\n{\"y\":2}\n"...)
	r := NewReader(bytes.NewReader(in))
	var msgs [][]byte
	for {
		m, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) != 3 || !bytes.Equal(msgs[1], big) || string(msgs[2]) != `{"y":2}` {
		t.Fatalf("got %d messages; big intact: %v", len(msgs), len(msgs) > 1 && bytes.Equal(msgs[1], big))
	}
	if cap(msgs[1]) != len(big) {
		t.Errorf("big message has capacity %d for %d bytes: the reader should assemble it exactly once", cap(msgs[1]), len(big))
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("{\"a\":1}\n{\"b\""), iotest.ErrReader(boom)))
	if m, err := r.Read(); err != nil || string(m) != `{"a":1}` {
		t.Fatalf("first Read = %q, %v", m, err)
	}
	// The partial line before the error is still delivered: it is all the peer sent.
	if m, err := r.Read(); err != nil || string(m) != `{"b"` {
		t.Fatalf("second Read = %q, %v", m, err)
	}
	if _, err := r.Read(); !errors.Is(err, boom) {
		t.Fatalf("third Read err = %v, want boom", err)
	}
}

func TestWriterWholeLines(t *testing.T) {
	// Each Write lands whole, as on a pipe, so any interleaving seen is the Writer's fault.
	var out testutil.SyncBuffer
	w := NewWriter(&out)
	msgs := []string{`{"id":1}`, strings.Repeat("a", coalesceMax+10), `[]`}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := w.Write([]byte(msgs[i%len(msgs)])); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	got := readAll(t, NewReader(strings.NewReader(out.String())))
	if len(got) != 400 {
		t.Fatalf("got %d lines, want 400", len(got))
	}
	for _, g := range got {
		ok := false
		for _, m := range msgs {
			ok = ok || g.msg == m
		}
		if !ok {
			t.Fatalf("interleaved or damaged line of %d bytes", len(g.msg))
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\r\n{\"b\":2}"), uint8(16), uint8(3))
	f.Add([]byte(strings.Repeat("x", 70)+"\r\n\n y\n"), uint8(8), uint8(1))
	f.Add([]byte("{\"a\":1}\n \n{\"b\":2}\n{\"c\":3}"), uint8(16), uint8(64+8))
	f.Fuzz(func(t *testing.T, in []byte, max, buf uint8) {
		checkAsking(t, string(in), int(max)+1, int(buf%32)+1, buf&32 != 0, buf&64 != 0)
		checkLending(t, string(in), int(max)+1, int(buf%32)+1, buf&32 != 0)
	})
}

func BenchmarkReaderSmall(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}` + "\n")
	in := bytes.Repeat(line, 1000)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(in))
		for {
			if _, err := r.Read(); err != nil {
				break
			}
		}
	}
}

// countingWriter counts write calls: held messages must leave together.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.Buffer.Write(p)
}

func TestWriterHold(t *testing.T) {
	var out countingWriter
	w := NewWriter(&out)
	for _, m := range []string{`{"a":1}`, `{"b":2}`, `{"c":3}`} {
		if err := w.Hold([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if out.writes != 0 {
		t.Fatalf("held messages were written early (%d writes)", out.writes)
	}
	if err := w.Write([]byte(`{"d":4}`)); err != nil {
		t.Fatal(err)
	}
	if out.writes != 1 || out.String() != "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"d\":4}\n" {
		t.Fatalf("%d writes of %q, want one write of all four in order", out.writes, out.String())
	}
	big := strings.Repeat("x", coalesceMax+1)
	w.Hold([]byte(`{"e":5}`))
	w.Hold([]byte(big))
	w.Flush()
	if !strings.HasSuffix(out.String(), "{\"e\":5}\n"+big+"\n") {
		t.Fatalf("a large held message lost its order or newline")
	}
}

func TestReaderBuffered(t *testing.T) {
	r := NewReader(strings.NewReader("{\"a\":1}\n\n  \n{\"b\":2}\n{\"c\""), withBufSize(64))
	if r.Buffered() {
		t.Fatal("Buffered before any read")
	}
	r.Read()
	if !r.Buffered() {
		t.Fatal("a complete line after blank ones is buffered")
	}
	if m, _ := r.Read(); string(m) != `{"b":2}` {
		t.Fatalf("got %s", m)
	}
	if r.Buffered() {
		t.Fatal("a partial line is not a buffered message")
	}
}

// TestReaderUnterminated: only a last line the stream cut off is unterminated, at any
// buffer size (a long line ends in its fragments), and an over-cap one is not returned.
func TestReaderUnterminated(t *testing.T) {
	for _, bufSize := range []int{4, 16, readSize} {
		r := NewReader(strings.NewReader("{\"a\":1}\n\n{\"b\":\"long line\"}\r\n{\"c\":"), withBufSize(bufSize))
		for i, want := range []struct {
			msg          string
			unterminated bool
		}{{`{"a":1}`, false}, {`{"b":"long line"}`, false}, {`{"c":`, true}} {
			msg, err := r.Read()
			if err != nil || string(msg) != want.msg || r.Unterminated() != want.unterminated {
				t.Fatalf("buf %d, line %d: %q %v unterminated=%v, want %q %v", bufSize, i, msg, err, r.Unterminated(), want.msg, want.unterminated)
			}
		}
		if _, err := r.Read(); err != io.EOF || r.Unterminated() {
			t.Fatalf("buf %d: after the last line: %v unterminated=%v", bufSize, err, r.Unterminated())
		}
	}
}
