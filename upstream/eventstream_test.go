package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// refEvent is what the reference parser dispatches, with the id and retry in force.
type refEvent struct {
	name, data string
	id         string
	retry      time.Duration
}

// refParse is the WHATWG algorithm written the plain way (the whole input in memory,
// split into lines first), to check the streaming reader against.
func refParse(in string) []refEvent {
	in = strings.TrimPrefix(in, "\xEF\xBB\xBF")
	var lines []string
	for {
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			break // the unterminated rest is never processed
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	capped := func(s string) string {
		if len(s) > smallFields {
			return s[:smallFields]
		}
		return s
	}
	var out []refEvent
	var name, data string
	var hasData bool
	var id string
	var retry time.Duration
	for _, l := range lines {
		if l == "" {
			if hasData {
				out = append(out, refEvent{name: name, data: data, id: id, retry: retry})
			}
			name, data, hasData = "", "", false
			continue
		}
		if l[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(l, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			if hasData {
				data += "\n"
			}
			data += value
			hasData = true
		case "event":
			name = capped(value)
		case "id":
			if v := capped(value); !strings.ContainsRune(v, 0) {
				id = v
			}
		case "retry":
			if ms, ok := digits([]byte(capped(value))); ok {
				retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	return out
}

// chunked hands out its input n bytes at a time.
type chunked struct {
	s string
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.s))
	copy(p, c.s[:k])
	c.s = c.s[k:]
	return k, nil
}

func parseAll(t testing.TB, in string, chunk, bufSize int) []refEvent {
	sr := newSSEReaderSize(&chunked{s: in, n: chunk}, 0, bufSize)
	var out []refEvent
	for {
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, refEvent{name: ev.Name, data: string(ev.Data), id: sr.LastID, retry: sr.Retry})
	}
}

func checkSSE(t testing.TB, in string) {
	want := refParse(in)
	for _, c := range []struct{ chunk, buf int }{{1, 16}, {3, 7}, {7, 64}, {1 << 20, sseReadBuf}} {
		got := parseAll(t, in, c.chunk, c.buf)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("input %q (chunks of %d, buffer %d):\n got %+v\nwant %+v", in, c.chunk, c.buf, got, want)
		}
	}
}

func TestSSEReader(t *testing.T) {
	for _, in := range []string{
		"data: {\"a\":1}\n\n",
		"data:{\"a\":1}\r\n\r\n",
		"data: x\rdata: y\r\r",
		"\xEF\xBB\xBFdata: bom\n\n",
		": comment\nevent: endpoint\ndata: /messages?sessionId=1\n\n",
		"id: 7\nretry: 1500\ndata:\n\n",           // a priming event: id, no message
		"id: 7\ndata\n\ndata: a\ndata:  b\n\n",    // a bare field name; a second space stays
		"data: cut off at the end",                // never dispatched
		"retry: 12x\nid: a\x00b\ndata: z\n\n",     // bad retry and id ignored
		"event: one\n\ndata: two\n\n",             // an event without data resets the name
		"datum: no\ndata: yes\n\n",                // an unknown field
		"data: a\r\n\ndata: b\n\r\n",              // mixed terminators
		strings.Repeat("x", 40) + "\ndata: q\n\n", // a name longer than the small buffers
	} {
		checkSSE(t, in)
	}
}

// TestSSEReaderHugeEvent reads a 50 MB data line in small reads: no line cap, and the
// message comes out whole and exact.
func TestSSEReaderHugeEvent(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 50<<20/16)
	stream := io.MultiReader(strings.NewReader("id: 1\ndata: "), bytes.NewReader(payload), strings.NewReader("\n\ndata: next\n\n"))
	sr := newSSEReader(stream, 0)
	ev, err := sr.Next()
	if err != nil || !bytes.Equal(ev.Data, payload) {
		t.Fatalf("first event: %v, %d bytes (want %d, equal=%v)", err, len(ev.Data), len(payload), bytes.Equal(ev.Data, payload))
	}
	if cap(ev.Data) != len(payload) {
		t.Errorf("the event's data has capacity %d for %d bytes: it should be exact", cap(ev.Data), len(payload))
	}
	ev, err = sr.Next()
	if err != nil || string(ev.Data) != "next" {
		t.Fatalf("second event: %v %q", err, ev.Data)
	}
}

func TestSSEReaderCap(t *testing.T) {
	sr := newSSEReader(strings.NewReader("data: 0123456789\n\ndata: ok\n\n"), 5)
	ev, err := sr.Next()
	if err != nil || !ev.TooLong || ev.Data != nil || ev.Size != 10 {
		t.Fatalf("over the cap: %v %+v", err, ev)
	}
	// Said once; the stream goes on with the next event.
	ev, err = sr.Next()
	if err != nil || string(ev.Data) != "ok" {
		t.Fatalf("after an over-cap event: %v %+v", err, ev)
	}
}

// endless is a data line that never ends, counting what was read of it.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	if e.n == 0 {
		e.n = copy(p, "data: ")
		return e.n, nil
	}
	for i := range p {
		p[i] = 'x'
	}
	e.n += len(p)
	return len(p), nil
}

// TestSSEReaderEndlessEvent: an event that passes the cap is said at once, not when
// it ends: one that never ends was read for ever, and its request never answered.
func TestSSEReaderEndlessEvent(t *testing.T) {
	const capBytes = 1 << 20
	src := &endless{}
	sr := newSSEReader(src, capBytes)
	ev, err := sr.Next()
	if err != nil || !ev.TooLong || ev.Size <= capBytes {
		t.Fatalf("an endless event: %v %+v", err, ev)
	}
	if src.n > capBytes+2*sseReadBuf {
		t.Errorf("%d bytes read of an event over a %d-byte cap", src.n, capBytes)
	}
}

func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"data: {}\n\n", "data:a\r\rdata:b\r\n\r\n", "\xEF\xBB\xBF:c\nid:1\nretry:5\ndata\n\n",
		"event:x\ndata: 1\ndata: 2\n\n", "data: x", "\r\n\n\r", "id\nid:\x00\ndata:q\n\n",
	} {
		f.Add(s)
	}
	// Nesting-depth seed: an event's data is a peer's JSON, read by nothing recursive.
	f.Add("data: " + strings.Repeat("[", 1<<20) + "\n\n")
	f.Add("data: 0123456789id: evil\nretry: 1\n\ndata: ok\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		checkSSE(t, in)
		checkSSECapped(t, in)
	})
}

// checkSSECapped checks a capped reader against the reference: an event over the cap
// is said TooLong (once), and every other event is what the reference yields, ids and
// retries included. An over-cap event the stream never ends is said all the same.
func checkSSECapped(t testing.TB, in string) {
	const max = 4
	want := refParse(in)
	for _, c := range []struct{ chunk, buf int }{{1, 16}, {3, 7}, {7, 64}} {
		sr := newSSEReaderSize(&chunked{s: in, n: c.chunk}, max, c.buf)
		i := 0
		for {
			ev, err := sr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if i == len(want) {
				if !ev.TooLong {
					t.Fatalf("input %q (chunks of %d, buffer %d): an event past the reference's: %+v", in, c.chunk, c.buf, ev)
				}
				i = len(want) + 1 // an over-cap event at the end, never ended
				continue
			}
			if i > len(want) {
				t.Fatalf("input %q (chunks of %d, buffer %d): more events than the reference", in, c.chunk, c.buf)
			}
			w := want[i]
			i++
			if len(w.data) > max {
				if !ev.TooLong {
					t.Fatalf("input %q (chunks of %d, buffer %d): event %d not said over the cap: %+v", in, c.chunk, c.buf, i, ev)
				}
				continue
			}
			got := refEvent{name: ev.Name, data: string(ev.Data), id: sr.LastID, retry: sr.Retry}
			if ev.TooLong || got != w {
				t.Fatalf("input %q (chunks of %d, buffer %d): event %d\n got %+v (TooLong %v)\nwant %+v", in, c.chunk, c.buf, i, got, ev.TooLong, w)
			}
		}
		if i < len(want) {
			t.Fatalf("input %q (chunks of %d, buffer %d): %d events, want %d", in, c.chunk, c.buf, i, len(want))
		}
	}
}

// An over-cap data line is reported as it passes the cap, in the middle of the line:
// the rest of that line is data, not fields. Read as fields, a payload that happened
// to be cut by a read just before "id:" set the stream's Last-Event-ID (or its retry),
// and a cut before "data:" or a bare line end could end the event early.
func TestSSEReaderCapMidLine(t *testing.T) {
	in := "data: 0123456789id: evil\nretry: 1\n\ndata: ok\n\n"
	for chunk := 1; chunk <= len(in); chunk++ {
		sr := newSSEReaderSize(&chunked{s: in, n: chunk}, 5, 16)
		ev, err := sr.Next()
		if err != nil || !ev.TooLong {
			t.Fatalf("chunks of %d: over the cap: %v %+v", chunk, err, ev)
		}
		ev, err = sr.Next()
		if err != nil || string(ev.Data) != "ok" || ev.TooLong {
			t.Fatalf("chunks of %d: after an over-cap event: %v %+v", chunk, err, ev)
		}
		if sr.HasID || sr.LastID != "" {
			t.Fatalf("chunks of %d: the rest of an over-cap data line set the id %q", chunk, sr.LastID)
		}
		if sr.Retry != time.Millisecond {
			t.Fatalf("chunks of %d: retry %v, want 1ms", chunk, sr.Retry)
		}
	}
}
