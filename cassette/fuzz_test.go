package cassette

import (
	"bytes"
	"errors"
	"io"
	"testing"
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
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := newReader(bytes.NewReader(data), "f", 1<<16)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a LineError", err)
			}
			return
		}
		var out []byte
		out = appendHeader(out, r.Header())
		n := 0
		for {
			c, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var le *LineError
				if !errors.As(err, &le) || le.Line < 2 {
					t.Fatalf("error %v", err)
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
