package budget

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// streamCut runs msg through a StreamCut in pieces of chunk bytes, with its spill
// folder in dir, and returns what the host gets and the whole cut of msg with the
// same note.
func streamCut(t testing.TB, dir string, msg []byte, b, chunk int) (got, want []byte, wantOK bool) {
	t.Helper()
	bg := &Budget{Bytes: b, Spill: NewSpill(dir, nil)}
	sc := bg.StreamCut([]byte("1"))
	if sc == nil {
		t.Fatal("no StreamCut")
	}
	final := sc.final
	for p := msg; len(p) > 0; {
		n := min(chunk, len(p))
		sc.Write(p[:n])
		p = p[n:]
	}
	got = sc.End(true)
	want, wantOK = Cut(msg, b, func() string { return cutNote(len(msg), final, nil) })
	if !wantOK {
		want = msg
	} else if kept, err := os.ReadFile(final); err != nil || !bytes.Equal(kept, msg) {
		t.Fatalf("the spill file: %d bytes (%v), want the answer's %d", len(kept), err, len(msg))
	}
	return got, want, wantOK
}

// streamShapes are answers Cut cuts, in shapes the streamed cut must give the same
// for: one long text, several items, an image, structuredContent, isError and _meta,
// escapes and multi-byte UTF-8 all along (the cut lands among them), members in an
// unusual order, an answer not to cut.
func streamShapes() map[string]string {
	unit := `héllo \"wörld\" \u00e9 \ud83d\ude00 日本語 \\ \n 😀 \t`
	long := strings.Repeat(unit, 400<<10/len(unit))
	x := strings.Repeat("x", 300<<10)
	return map[string]string{
		"one text":   `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"HEAD` + x + `TAIL"}]}}`,
		"escapes":    `{"jsonrpc":"2.0","id":"a\u002d1","result":{"content":[{"type":"text","text":"` + long + `"}],"isError":true,"_meta":{"trace":"m-1"}}}`,
		"several":    `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"a` + long + `"},{"type":"text","text":"short"},{"type":"text","annotations":{"p":1},"text":"` + x + `"},{"type":"text","text":"` + long[:9000] + `"}]}}`,
		"image":      `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"before"},{"type":"image","mimeType":"image/png","data":"` + strings.Repeat("QUFB", 75000) + `"},{"type":"image","data":"QUFB"},{"type":"text","text":"after` + x + `"}]}}`,
		"structured": `{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"` + strings.Repeat("s", 30000) + `"}],"structuredContent":{"rows":"` + strings.Repeat("r", 200000) + `"}}}`,
		"small sc":   `{"jsonrpc":"2.0","id":4,"result":{"structuredContent":{"rows":"r"},"content":[{"type":"text","text":"` + long + `"}],"resultType":"complete"}}`,
		"odd order":  `{"result":{"isError":false,"content":[{"text":"` + long + `","type":"text"}]},"id":5,"jsonrpc":"2.0"}`,
		"big frame":  `{"jsonrpc":"2.0","id":6,"result":{"content":[{"type":"text","text":"` + long + `","annotations":{"n":"` + strings.Repeat("n", 9000) + `"}}]}}`,
		"not cut":    `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"short"}]},"pad":"` + x + `"}`,
		"an error":   `{"jsonrpc":"2.0","id":8,"error":{"code":1,"message":"` + x + `"}}`,
		"many items": `{"jsonrpc":"2.0","id":10,"result":{"content":[{"type":"text","text":"` + x + `"},` + strings.Repeat(`{"type":"image","data":"QUFB"},`, 200000) + `{"type":"text","text":"end"}]}}`,
		"invalid":    `{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"` + x + `"}]}`,
	}
}

// TestStreamCutEqualsCut: for each shape, budget and piece size, the streamed cut is
// byte for byte Cut's of the whole answer, and the spill file holds the answer.
func TestStreamCutEqualsCut(t *testing.T) {
	dir := t.TempDir()
	for name, msg := range streamShapes() {
		for _, b := range []int{0, 100, 4000, 40000, 100000} {
			for _, chunk := range []int{1 << 20, 4093, 7} {
				if chunk == 7 && (b != 4000 || len(msg) > 2<<20) {
					continue
				}
				got, want, _ := streamCut(t, dir, []byte(msg), b, chunk)
				if !bytes.Equal(got, want) {
					t.Errorf("%s, budget %d, pieces of %d: the streamed cut differs:\n got %.400s…%.300s\nwant %.400s…%.300s", name, b, chunk, got, tail(got), want, tail(want))
				}
			}
		}
	}
}

func tail(b []byte) []byte { return b[max(0, len(b)-300):] }

// TestStreamCutHoldsLittle: a 20 MB text is compacted to at most 4 budgets: a head
// of about B/2, a tail of B/2 to B (and the rest of what append reserved).
func TestStreamCutHoldsLittle(t *testing.T) {
	bg := &Budget{Bytes: 4000, Spill: NewSpill(t.TempDir(), nil)}
	sc := bg.StreamCut([]byte("1"))
	sc.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`))
	piece := bytes.Repeat([]byte(`日本語 \ud83d\ude00 \"`), 4096)
	peak := 0
	for n := 0; n < 20<<20; n += len(piece) {
		sc.Write(piece)
		peak = max(peak, cap(sc.c))
	}
	sc.Write([]byte(`"}]}}`))
	if out := sc.End(true); len(out) > 4000+Slack+100 {
		t.Fatalf("the cut answer: %d bytes", len(out))
	}
	if peak > 4*4000 {
		t.Errorf("held %d bytes of a 20 MB text", peak)
	}
}

// FuzzStreamCut: for any answer (each ~ in it standing for a long run of text with
// escapes and multi-byte characters), budget and piece size, the streamed cut is
// Cut's of the whole answer, or the answer itself when Cut leaves it.
func FuzzStreamCut(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"~"}]}}`), uint16(100), uint16(5), uint8(3))
	f.Add([]byte(`{"id":1,"result":{"content":[{"type":"text","text":"a~b"},{"type":"image","data":"~"}],"structuredContent":{"a":"~"},"isError":true}}`), uint16(4000), uint16(977), uint8(40))
	f.Add([]byte(`{"id":"~","result":{"~":1,"content":[{"text":"~","type":"text","x":"~"}]}}`), uint16(10), uint16(1), uint8(1))
	unit := `aé\u00e9\ud83d\ude00日\n\"\\`
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, msg []byte, budget, chunk uint16, rep uint8) {
		if len(msg) > 4096 {
			return
		}
		full := bytes.ReplaceAll(msg, []byte("~"), []byte(strings.Repeat(unit, int(rep)*40)))
		got, want, _ := streamCut(t, dir, full, int(budget), int(chunk)+1)
		if !bytes.Equal(got, want) {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Fatalf("budget %d, pieces of %d: the streamed cut differs at %d of %d/%d:\n got %q\nwant %q", budget, chunk+1, i, len(got), len(want), got[max(0, i-60):min(len(got), i+60)], want[max(0, i-60):min(len(want), i+60)])
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	})
}
