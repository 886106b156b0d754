package framing

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestTooLongCarriesTheID: a line over the cap is dropped, but its id and method —
// first or last in the object, in any piece of the stream — come with the error, and
// the line after it is read as usual.
func TestTooLongCarriesTheID(t *testing.T) {
	pad := strings.Repeat("x", 300<<10) // several reads and fragments past the cap
	lines := []struct {
		line, id, method string
		early            bool // said as it passed the cap: its id and what it is came first
	}{
		{`{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"t":"` + pad + `"}}`, `41`, `"tools/call"`, true},
		{`{"result":{"t":"` + pad + `"},"jsonrpc":"2.0","id":"at-the-end"}`, `"at-the-end"`, ``, false},
		{`{"id":7,"result":"short enough but over the cap ` + strings.Repeat("y", 2000) + `"}`, `7`, ``, false},
		{`{"id":8,"jsonrpc":"2.0","result":{"t":"` + pad + `"}}`, `8`, ``, true},
		// An id with neither method nor result before the cap: either side's; told
		// only at the end, when the whole line has said which.
		{`{"id":9,"pad":"` + pad + `","method":"late"}`, `9`, `"late"`, false},
	}
	var in strings.Builder
	for _, l := range lines {
		in.WriteString(l.line + "\r\n")
	}
	in.WriteString(`{"id":"next"}` + "\n")
	r := NewReader(strings.NewReader(in.String()), WithMaxMessage(1024))
	for _, l := range lines {
		_, err := r.Read()
		var tl *TooLongError
		if !errors.As(err, &tl) {
			t.Fatalf("got %v, want a TooLongError", err)
		}
		if string(tl.ID) != l.id || string(tl.Method) != l.method || tl.Early != l.early {
			t.Fatalf("TooLongError id %q method %q early %v, want %q %q %v", tl.ID, tl.Method, tl.Early, l.id, l.method, l.early)
		}
		if l.early && (tl.Size <= 1024 || tl.Size > int64(len(l.line))) || !l.early && tl.Size != int64(len(l.line)) {
			t.Fatalf("TooLongError size %d (early %v) for a %d-byte line", tl.Size, tl.Early, len(l.line))
		}
	}
	if msg, err := r.Read(); err != nil || string(msg) != `{"id":"next"}` {
		t.Fatalf("after the long lines: %q, %v", msg, err)
	}
	if _, err := r.Read(); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
}

// endlessLine is a line that never ends after its head.
type endlessLine struct {
	head string
	n    int
}

func (e *endlessLine) Read(p []byte) (int, error) {
	if e.n < len(e.head) {
		k := copy(p, e.head[e.n:])
		e.n += k
		return k, nil
	}
	for i := range p {
		p[i] = 'x'
	}
	e.n += len(p)
	return len(p), nil
}

// TestEndlessLineIsToldAtTheCap: a line that never ends is told as it passes the cap
// when its head said what it is, after about the cap's bytes: its sender is answered
// while the line goes on (it was never answered), and memory stays bounded.
func TestEndlessLineIsToldAtTheCap(t *testing.T) {
	const capBytes = 1 << 20
	src := &endlessLine{head: `{"jsonrpc":"2.0","id":"big","result":{"content":[{"type":"text","text":"`}
	r := NewReader(src, WithMaxMessage(capBytes))
	_, err := r.Read()
	var tl *TooLongError
	if !errors.As(err, &tl) || !tl.Early || string(tl.ID) != `"big"` {
		t.Fatalf("got %v, want an early TooLongError for \"big\"", err)
	}
	if src.n > 3*capBytes {
		t.Errorf("%d bytes read before the line was told, for a %d-byte cap", src.n, capBytes)
	}
}
