package relay

import (
	"slices"
	"testing"
)

// TestPendingKeepsExactIDs: what drain returns is each id byte for byte, however it
// was spelled, and none of it aliases the message it came from (a pinned 64 MB
// request, or bytes the reader reuses).
func TestPendingKeepsExactIDs(t *testing.T) {
	ids := []string{`1`, `-7`, `9007199254740993`, `"a"`, `"bir:x:1"`, `"\u0061b"`, `1.0`, `1e3`, `null`, `""`, `0`}
	p := newPending()
	msg := []byte{}
	for _, id := range ids {
		msg = append(msg, id...)
	}
	off := 0
	for _, id := range ids {
		p.add(msg[off : off+len(id)])
		off += len(id)
	}
	for i := range msg {
		msg[i] = 'X' // the message's buffer is gone
	}
	// 1.0 and 1 are the same id: the later replaces the earlier. 1e3 is new.
	var got []string
	for _, id := range p.drain() {
		got = append(got, string(id))
	}
	slices.Sort(got)
	want := []string{`""`, `"\u0061b"`, `"a"`, `"bir:x:1"`, `-7`, `0`, `1.0`, `1e3`, `9007199254740993`, `null`}
	if !slices.Equal(got, want) {
		t.Fatalf("drain = %q, want %q", got, want)
	}
	if p.len() != 0 {
		t.Fatal("drain left entries")
	}
}

func TestPendingRemoveMatchesJSONRPC(t *testing.T) {
	p := newPending()
	p.add([]byte(`"ab"`))
	p.add([]byte(`10`))
	p.remove([]byte(`"\u0061b"`)) // the same string
	p.remove([]byte(`1e1`))       // the same number
	p.remove([]byte(`"10"`))      // not the same id: a string
	if p.len() != 0 {
		t.Fatalf("%d left, want 0", p.len())
	}
	p.add([]byte(`7`))
	p.remove([]byte(`"7"`))
	if p.len() != 1 {
		t.Fatal(`"7" removed the number 7`)
	}
}
