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
	lines := []struct{ line, id, method string }{
		{`{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"t":"` + pad + `"}}`, `41`, `"tools/call"`},
		{`{"result":{"t":"` + pad + `"},"jsonrpc":"2.0","id":"at-the-end"}`, `"at-the-end"`, ``},
		{`{"id":7,"result":"short enough but over the cap ` + strings.Repeat("y", 2000) + `"}`, `7`, ``},
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
		if string(tl.ID) != l.id || string(tl.Method) != l.method || tl.Size != int64(len(l.line)) {
			t.Fatalf("TooLongError id %q method %q size %d, want %q %q %d", tl.ID, tl.Method, tl.Size, l.id, l.method, len(l.line))
		}
	}
	if msg, err := r.Read(); err != nil || string(msg) != `{"id":"next"}` {
		t.Fatalf("after the long lines: %q, %v", msg, err)
	}
	if _, err := r.Read(); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
}
