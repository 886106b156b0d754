package relay

import (
	"bytes"
	"slices"
	"strconv"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
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

// TestPendingIntegerKeys: ids held as numbers match as JSON-RPC matches them, at the
// edges of what is held so: signs, zero, 18 and 19 digits, re-printed forms.
func TestPendingIntegerKeys(t *testing.T) {
	for _, c := range []struct{ add, remove string }{
		{`0`, `-0`}, {`0`, `0.0`}, {`-5`, `-5e0`}, {`999999999999999999`, `999999999999999999.0`},
		{`1000000000000000000`, `1e18`}, {`12345678901234567890`, `1234567890123456789e1`}, {`7`, `70e-1`},
	} {
		p := newPending()
		p.add([]byte(c.add))
		if !p.hasKey(jsonlex.IDKey([]byte(c.remove))) {
			t.Errorf("%s is not found as %s", c.add, c.remove)
		}
		p.remove([]byte(c.remove))
		if p.len() != 0 {
			t.Errorf("%s is not removed by %s", c.add, c.remove)
		}
		p.add([]byte(c.remove))
		if got := p.drain(); len(got) != 1 || string(got[0]) != c.remove {
			t.Errorf("drain after adding %s = %q", c.remove, got)
		}
	}
	p := newPending()
	p.add([]byte(`1`))
	p.remove([]byte(`"1"`))
	p.remove([]byte(`-1`))
	p.remove([]byte(`10`))
	if p.len() != 1 {
		t.Fatal("another id removed the number 1")
	}
	if n := testing.AllocsPerRun(100, func() {
		p.add([]byte(`123456`))
		p.remove([]byte(`123456`))
	}); n != 0 {
		t.Errorf("an integer id in and out allocated %v times", n)
	}
}

// FuzzPendingFew: pending, whose first integer ids live in an array before its
// map, holds the same set as a plain map would through any adds, takes and looks,
// past the array's size and back, and drains the same raw ids.
func FuzzPendingFew(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 130, 131, 0, 200})
	f.Add(bytes.Repeat([]byte{1, 5, 9, 77, 140}, 40))
	f.Fuzz(func(t *testing.T, ops []byte) {
		p := newPending()
		ref := map[string]string{} // IDKey -> raw
		for i, op := range ops {
			id := strconv.Itoa(int(op >> 1)) // 0..127: past fewMax and back
			if op%7 == 3 {
				id += ".0" // the same id spelled otherwise: kept raw
			}
			k := jsonlex.IDKey([]byte(id))
			switch {
			case i%5 == 4:
				if got, want := p.hasKey(k), ref[k] != ""; got != want {
					t.Fatalf("op %d: hasKey(%s) = %v, want %v", i, k, got, want)
				}
			case op&1 == 0:
				p.add([]byte(id))
				ref[k] = id
			default:
				_, want := ref[k]
				if got := p.take([]byte(id)); got != want {
					t.Fatalf("op %d: take(%s) = %v, want %v", i, id, got, want)
				}
				delete(ref, k)
			}
			if p.len() != len(ref) {
				t.Fatalf("op %d: len %d, want %d", i, p.len(), len(ref))
			}
		}
		var got, want []string
		for _, id := range p.drain() {
			got = append(got, string(id))
		}
		for _, raw := range ref {
			want = append(want, raw)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("drain = %q, want %q", got, want)
		}
		if p.len() != 0 {
			t.Fatal("drain left entries")
		}
	})
}
