package framing

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestCapEdgesStreamedEqualsAssembled: FuzzStreamedEqualsAssembled's check for lines
// past the first read buffer (the fuzz's caps stay under it, so fragments, offer's
// over-cap check and the newline Buffered found never meet a line of 64 KiB): lines
// of the cap minus one, the cap and the cap plus one, with and without a final "\r",
// whose head decides early or only at the end, read in chunks that end on the
// buffer's edges.
func TestCapEdgesStreamedEqualsAssembled(t *testing.T) {
	for _, max := range []int{readSize - 2, readSize - 1, readSize, readSize + 1, 3*readSize - 1, 3 * readSize} {
		for _, d := range []int{-1, 0, 1} {
			for _, cr := range []string{"", "\r"} {
				for _, head := range []string{`{"id":1,"result":"`, `{"x":"`} {
					tail := `"}`
					if head == `{"x":"` {
						tail = `","id":1,"result":1}`
					}
					n := max + d - len(head) - len(tail) // the line's length without "\r": the cap's d off
					line := head + strings.Repeat("a", n) + tail + cr
					in := []byte(line + "\n" + `{"id":2}` + "\n")
					for _, chunk := range []int{1 << 20, readSize, readSize - 1, readSize + 1, 4096, len(line), len(line) - 1} {
						for _, th := range []int{1, 4096, readSize, readSize + 1} {
							name := fmt.Sprintf("max%d/d%d/cr%v/%s/chunk%d/th%d", max, d, cr != "", head[:4], chunk, th)
							want := readOutcomes(t, in, chunk, max, 0)
							got := readOutcomes(t, in, chunk, max, th)
							if len(got) != len(want) {
								t.Fatalf("%s: %d outcomes streaming, %d whole", name, len(got), len(want))
							}
							for i := range want {
								w, g := want[i], got[i]
								if g.stream == nil {
									if !bytes.Equal(g.msg, w.msg) || (g.err == nil) != (w.err == nil) {
										t.Fatalf("%s: line %d: %d bytes %v, want %d bytes %v", name, i, len(g.msg), g.err, len(w.msg), w.err)
									}
									continue
								}
								s := g.stream
								if s.end.Over {
									var tl *TooLongError
									if !errors.As(w.err, &tl) {
										t.Fatalf("%s: line %d: over the cap streaming, %v whole", name, i, w.err)
									}
									continue
								}
								if w.err != nil || !bytes.Equal(s.got.Bytes(), w.msg) || s.end.Size != int64(len(w.msg)) || s.end.Cut != w.unterm {
									t.Fatalf("%s: line %d: streamed %d bytes (size %d, cut %v), want %d (%v, cut %v)", name, i, s.got.Len(), s.end.Size, s.end.Cut, len(w.msg), w.err, w.unterm)
								}
							}
							if d <= 0 && (len(want) != 2 || want[0].err != nil) {
								t.Fatalf("%s: a line within the cap was not read: %+v", name, want)
							}
							if d > 0 && (len(want) != 2 || want[0].err == nil) {
								t.Fatalf("%s: a line over the cap was read", name)
							}
						}
					}
				}
			}
		}
	}
}

// TestAskingReadsTheSame: Buffered before every Read changes nothing Read returns,
// for lines around the cap and the read buffer's size, blank lines, "\r\n" and a
// last line without a newline.
func TestAskingReadsTheSame(t *testing.T) {
	big := strings.Repeat("b", readSize-3)
	in := []byte("\n \r\n" + `{"id":1}` + "\r\n\n" + `{"id":"` + big + `"}` + "\n" + `{"id":2}` + "\n\r\n" +
		`{"id":"` + big + big + `"}` + "\r\n" + `{"id":3}` + "\n" + big + "\n" + `{"id":4}`)
	maxes := []int{8, readSize - 1, readSize, readSize + 4, 1 << 20}
	chunks := []int{1, 3, 7, 4096, readSize - 1, readSize, readSize + 1, 1 << 20}
	ths := []int{0, 1, 9, readSize}
	if testing.Short() {
		// Byte-at-a-time reads of the whole product took most of the package's
		// seconds; -short keeps one of each edge (FuzzReader covers the rest).
		maxes, chunks, ths = []int{8, readSize, 1 << 20}, []int{3, readSize - 1, readSize + 1}, []int{0, readSize}
	}
	for _, max := range maxes {
		for _, chunk := range chunks {
			for _, th := range ths {
				want := readOutcomes(t, in, chunk, max, th)
				got := readAsking(t, in, chunk, max, th, true)
				if len(got) != len(want) {
					t.Fatalf("max %d chunk %d th %d: %d outcomes asking, %d not", max, chunk, th, len(got), len(want))
				}
				for i := range want {
					w, g := want[i], got[i]
					if !bytes.Equal(g.msg, w.msg) || (g.err == nil) != (w.err == nil) || (g.stream == nil) != (w.stream == nil) || g.unterm != w.unterm {
						t.Fatalf("max %d chunk %d th %d: line %d: %d bytes %v, want %d bytes %v", max, chunk, th, i, len(g.msg), g.err, len(w.msg), w.err)
					}
					if g.stream != nil && !bytes.Equal(g.stream.got.Bytes(), w.stream.got.Bytes()) {
						t.Fatalf("max %d chunk %d th %d: line %d streamed otherwise", max, chunk, th, i)
					}
				}
			}
		}
	}
}

// TestBufferedLeavesABlankLineOverTheCapToRead: a line of only whitespace longer than
// the cap is a TooLongError from Read; Buffered, asked first (as a relay does under
// load), consumed it as a blank line, so whether the peer's over-cap line was
// reported depended on the relay's load (FuzzReader found it).
func TestBufferedLeavesABlankLineOverTheCapToRead(t *testing.T) {
	for _, blank := range []string{"  ", " \t \r", strings.Repeat(" ", 40)} {
		checkAsking(t, "0\n"+blank+"\n1\n", len(strings.TrimSuffix(blank, "\r"))-1, 64, false, true)
	}
}
