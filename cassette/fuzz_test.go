package cassette

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// FuzzReader: any bytes either read as a cassette or fail with a LineError; nothing
// panics, and what reads is read again the same from its own re-encoding.
func FuzzReader(f *testing.F) {
	h := `{"bir-cassette":1,"server":"s","command":["x"],"recordedAt":"2026-01-01T00:00:00Z","era":"session","initialize":{"protocolVersion":"2025-11-25"},"tools":[{"name":"a"}]}` + "\n"
	f.Add([]byte(h))
	f.Add([]byte(h + `{"seq":1,"tool":"a","arguments":{"k":[1,2,{"z":null}]},"outcome":"ok","result":{"content":[]},"startedAt":"2026-01-01T00:00:00Z","durationMs":1.5}` + "\n"))
	f.Add([]byte(h + `{"seq":1,"tool":"a","outcome":"rpc_error","error":{"code":1},"startedAt":"2026-01-01T00:00:00Z","durationMs":0}` + "\n" + `{"end":true,"calls":1}` + "\n"))
	f.Add([]byte(`{"bir-cassette":7}` + "\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte(h + `{"seq":1,"tool":"a"`))
	f.Add([]byte(h + `{"seq":1,"tool":"a","outcome":"ok","startedAt":"2026-01-01T00:00:00Z","durationMs":0,"tooLarge":9}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := newReader(bytes.NewReader(data), "f", 1<<16)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a LineError", err)
			}
			return
		}
		// Skip (verify's check) reads the same calls and fails the same way.
		rs, _ := newReader(bytes.NewReader(data), "f", 1<<16)
		skipped, skipErr := 0, error(nil)
		for skipErr = rs.Skip(); skipErr == nil; skipErr = rs.Skip() {
			skipped++
		}
		var out []byte
		out = appendHeader(out, r.Header(), nil)
		n := 0
		for {
			c, err := r.Next()
			if err == io.EOF {
				if skipErr != io.EOF || skipped != n {
					t.Fatalf("Next read %d calls to the end, Skip %d then %v", n, skipped, skipErr)
				}
				break
			}
			if err != nil {
				var le *LineError
				if !errors.As(err, &le) || le.Line < 2 {
					t.Fatalf("error %v", err)
				}
				if skipErr == nil || skipErr.Error() != err.Error() || skipped != n {
					t.Fatalf("Next read %d calls then %v, Skip %d then %v", n, err, skipped, skipErr)
				}
				return
			}
			n++
			out = appendCall(out, c)
		}
		r2, err := newReader(bytes.NewReader(out), "again", 1<<20)
		if err != nil {
			t.Fatalf("re-encoded header does not read: %v\n%s", err, out)
		}
		for range n {
			if _, err := r2.Next(); err != nil {
				t.Fatalf("re-encoded call does not read: %v\n%s", err, out)
			}
		}
	})
}

// FuzzDecodeCall: the reader's own decoder of a call line accepts what encoding/json
// (strict) accepts and reads the same values, and refuses what it refuses.
func FuzzDecodeCall(f *testing.F) {
	f.Add([]byte(`{"seq":1,"tool":"a","arguments":{"k":[1]},"redacted":true,"redactedKeys":["$.k"],"outcome":"ok","result":{"x":1},"startedAt":"2026-01-01T00:00:00.5Z","durationMs":1.25}`))
	f.Add([]byte(`{"seq":1,"tool":"a","tool":"b","outcome":"ok","error":null}`))
	f.Add([]byte(`{"seq":1.5,"tool":"a"}`))
	f.Add([]byte(`{"seq":1,"bogus":2}`))
	f.Add([]byte(`{"seq":3,"tool":"big","outcome":"ok","startedAt":"2026-01-01T00:00:00Z","durationMs":2,"tooLarge":104857643}`))
	f.Add([]byte(`{"seq":1,"end":true}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if !jsonlex.Valid(line) || len(line) == 0 || line[0] != '{' {
			return
		}
		var a, b, c Call
		ea := decodeCall(line, &a, true)
		eb := strict(line, &b)
		if ec := decodeCall(line, &c, false); (ec == nil) != (ea == nil) || ea == nil &&
			(!bytes.Equal(a.Arguments, c.Arguments) || !bytes.Equal(a.Result, c.Result) || !bytes.Equal(a.Error, c.Error) || a.Seq != c.Seq || a.Tool != c.Tool) {
			t.Fatalf("kept %+v (%v), not kept %+v (%v): %s", a, ea, c, ec, line)
		}
		if (ea == nil) != (eb == nil) {
			// encoding/json is laxer on some spellings (case-insensitive keys, a
			// string with invalid UTF-8): refusing more is allowed, accepting more not.
			if ea == nil {
				t.Fatalf("decodeCall took what encoding/json refuses (%v): %s", eb, line)
			}
			return
		}
		if ea != nil {
			return
		}
		for _, r := range []*[]byte{(*[]byte)(&b.Arguments), (*[]byte)(&b.Result), (*[]byte)(&b.Error)} {
			if string(*r) == "null" {
				*r = nil // decodeCall reads a null as absent
			}
		}
		if a.Seq != b.Seq || a.Tool != b.Tool || a.Outcome != b.Outcome || !a.StartedAt.Equal(b.StartedAt) || a.DurationMs != b.DurationMs ||
			a.Redacted != b.Redacted || a.TooLarge != b.TooLarge || !bytes.Equal(a.Arguments, b.Arguments) || !bytes.Equal(a.Result, b.Result) || !bytes.Equal(a.Error, b.Error) {
			t.Fatalf("decodeCall %+v, encoding/json %+v: %s", a, b, line)
		}
	})
}

// FuzzReadLine: a line read from a source that seeks (measured first, then read at
// its size) and from one that does not (ReadLine, gathered in pieces) are the same
// lines, with the same refusals, as splitting the bytes at each newline; buffers of
// 16 bytes make every line a long one.
func FuzzReadLine(f *testing.F) {
	f.Add([]byte("a\nbb\r\nccc"), uint8(3))
	f.Add([]byte(strings.Repeat("x", 40)+"\n"+strings.Repeat("y", 20)+"\n"), uint8(30))
	f.Add([]byte("\n\n"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, m uint8) {
		max := int(m) + 1
		src := bytes.NewReader(data)
		seek := &Reader{br: bufio.NewReaderSize(src, 16), src: src, max: max}
		pipe := bufio.NewReaderSize(struct{ io.Reader }{bytes.NewReader(data)}, 16)
		rest := data
		for {
			a, aWhole, aErr := seek.readMeasured()
			b, bWhole, bErr := ReadLine(pipe, max)
			var want []byte
			wantWhole, wantErr := false, error(nil)
			i := bytes.IndexByte(rest, '\n')
			switch {
			case len(rest) == 0:
				wantErr = io.EOF
			case i >= 0 && i+1 > max, i < 0 && len(rest) > max:
				wantErr = errors.New("longer")
			case i >= 0:
				want, wantWhole, rest = bytes.TrimSuffix(rest[:i], []byte("\r")), true, rest[i+1:]
			default:
				want, rest = rest, nil
			}
			if (aErr == nil) != (wantErr == nil) || (bErr == nil) != (wantErr == nil) {
				t.Fatalf("errors %v, %v; want %v", aErr, bErr, wantErr)
			}
			if wantErr != nil {
				return
			}
			if !bytes.Equal(b, want) || bWhole != wantWhole || aWhole != wantWhole || (aWhole && !bytes.Equal(a, want)) {
				t.Fatalf("lines %q %v, %q %v; want %q %v", a, aWhole, b, bWhole, want, wantWhole)
			}
		}
	})
}
