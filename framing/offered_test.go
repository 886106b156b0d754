package framing

import (
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// TestOfferedIsTheWholeLineOnly: while start decides, Offered is the line when all of
// it was read already (its terminator not included), and nil when only its head was;
// after start it is nil again.
func TestOfferedIsTheWholeLineOnly(t *testing.T) {
	whole := `{"id":1,"result":{"a":"xxxx"}}`
	in := whole + "\r\n" + `{"id":2,"result":{"b":"` // the second never ends
	r := NewReader(&chunked{b: []byte(in), n: len(whole) + 2 + 10})
	var seen []string
	r.SetStream(1, func(*jsonlex.Peek) LineSink {
		seen = append(seen, string(r.Offered()))
		return nil
	})
	if msg, err := r.Read(); err != nil || string(msg) != whole {
		t.Fatalf("Read: %q, %v", msg, err)
	}
	if r.Offered() != nil {
		t.Fatal("Offered outside start")
	}
	if len(seen) != 1 || seen[0] != whole {
		t.Fatalf("start saw %q, want the first line whole", seen)
	}
	r.Read() // the second line's head is offered with the stream's end not yet read
	if len(seen) < 2 || seen[1] != "" {
		t.Fatalf("start saw %q, want nothing of a line not all read", seen)
	}
}

// TestOfferedOfALineInFragments: a line longer than the read buffer, all read, is
// held in fragments, not one slice: Offered is nil (it streams as before), also
// when its newline is the first byte after a fragment.
func TestOfferedOfALineInFragments(t *testing.T) {
	for _, n := range []int{readSize, readSize + 1, 2 * readSize, readSize - 1} {
		line := `{"id":1,"result":"` + string(make([]byte, 0)) + pad(n-len(`{"id":1,"result":""}`)) + `"}`
		r := NewReader(&chunked{b: []byte(line + "\n"), n: len(line) + 1})
		var seen []string
		r.SetStream(1, func(*jsonlex.Peek) LineSink {
			seen = append(seen, string(r.Offered()))
			return nil
		})
		msg, err := r.Read()
		if err != nil || string(msg) != line {
			t.Fatalf("%d bytes: Read %d bytes, %v", n, len(msg), err)
		}
		for _, s := range seen {
			if s != "" && s != line {
				t.Fatalf("%d bytes: start saw %d bytes as the whole line", n, len(s))
			}
		}
	}
}

func pad(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}
