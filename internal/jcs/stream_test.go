package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// streamBounds are a Stream's bounds for a test; zero means the defaults.
type streamBounds struct{ exact, member, held int }

func newTestStream(b streamBounds) *Stream {
	return &Stream{exactBound: b.exact, memberBound: b.member, heldBound: b.held}
}

// streamSum writes data to s in pieces of the given sizes (cycled; the rest in one
// piece when none) and returns Sum.
func streamSum(s *Stream, data []byte, pieces []int) (string, error) {
	s.Reset()
	for k := 0; len(data) > 0; k++ {
		n := len(data)
		if len(pieces) > 0 {
			n = min(max(pieces[k%len(pieces)], 1), len(data))
		}
		if w, err := s.Write(data[:n]); w != n || err != nil {
			return "", errors.New("Write refused a piece")
		}
		data = data[n:]
	}
	return s.Sum()
}

// tinyBounds make everything past a few bytes take the streaming path.
var tinyBounds = []streamBounds{
	{exact: 0, member: 1, held: 1 << 20},
	{exact: 3, member: 4, held: 1 << 20},
	{exact: 1, member: 16, held: 1 << 20},
	{exact: 8, member: 64, held: 1 << 20},
	{exact: 1, member: 8, held: 200},
}

var pieceSets = [][]int{nil, {1}, {2}, {3, 1, 7}, {5}, {13, 2}}

// checkStream holds Stream to Fingerprint on data under bounds b: equal whenever the
// stream succeeds, and success whenever within the exact bound. It returns the
// stream's error.
func checkStream(t *testing.T, s *Stream, data []byte, b streamBounds, pieces []int) error {
	t.Helper()
	want, wantErr := Fingerprint(data)
	got, err := streamSum(s, data, pieces)
	if err == nil && (wantErr != nil || got != want) {
		t.Fatalf("bounds %+v pieces %v: Stream(%q) = %s, want %s, %v", b, pieces, data, got, want, wantErr)
	}
	exact := b.exact
	if b == (streamBounds{}) {
		exact = StreamExactBound
	}
	if len(data) <= exact && (err == nil) != (wantErr == nil) {
		t.Fatalf("bounds %+v pieces %v: within the exact bound, Stream(%q): %v; Fingerprint: %v", b, pieces, data, err, wantErr)
	}
	if err != nil && wantErr == nil && !errors.Is(err, ErrNeedsWhole) {
		t.Fatalf("bounds %+v pieces %v: Stream(%q) failed with %v where Fingerprint succeeds", b, pieces, data, err)
	}
	return err
}

// inOrder returns data's canonical form, and the same indented, when Fingerprint
// succeeds: text whose keys come in order, so no speculation can fail.
func inOrder(data []byte) [][]byte {
	c, err := jcsOutput(data)
	if err != nil {
		return nil
	}
	var b bytes.Buffer
	if json.Indent(&b, c, " ", "\t") != nil {
		return [][]byte{c}
	}
	return [][]byte{c, b.Bytes()}
}

func TestStreamVectors(t *testing.T) {
	vf := loadFingerprintVectors(t)
	s := new(Stream)
	for i, v := range vf.Vectors {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			args, _ := withoutTopLevelKey(t, []byte(v.Arguments), vf.CorrelationKey)
			for _, b := range append([]streamBounds{{}}, tinyBounds...) {
				*s = Stream{exactBound: b.exact, memberBound: b.member, heldBound: b.held}
				for _, p := range pieceSets {
					err := checkStream(t, s, args, b, p)
					got, _ := s.Sum()
					if err == nil && got != v.Fingerprint {
						t.Fatalf("bounds %+v: %s, want %s", b, got, v.Fingerprint)
					}
					if b == (streamBounds{}) && err != nil {
						t.Fatalf("default bounds: %v", err)
					}
				}
			}
		})
	}
}

// FuzzStream: for any input, bounds and fragmentation, Stream's Sum is Fingerprint's
// when it succeeds, succeeds within the exact bound exactly when Fingerprint does,
// fails past it only with ErrNeedsWhole where Fingerprint succeeds, and succeeds on
// input whose keys come in order (canonical, and indented): no speculation can fail.
func FuzzStream(f *testing.F) {
	for _, v := range loadFingerprintVectors(f).Vectors {
		f.Add([]byte(v.Arguments), uint16(0x1234))
	}
	for _, seed := range []string{
		`{"path":"x","content":"` + strings.Repeat("abcd", 40) + `"}`,
		`{"b":{"y":"` + strings.Repeat("q", 50) + `","x":"` + strings.Repeat("r", 60) + `"},"a":1}`,
		`{"a":1,"a":2}`, `{"\ud83d\ude00":1,"\ue000":2}`, `"\ud800"`, `{"a":"\ud800","a":0}`, `1e400`,
		"\"\xe2\x82A\"", "\"\xf0\x9f\x98\x80\xf0\x9f\"", `[[[[{}]]]]`, `{"a":[1,{"b":null}],"c":"\u0000"}`, `[1,]`, ` null `,
		`{"z":[{"k":"` + strings.Repeat("v", 40) + `","j":2}],"a":0}`, `{"a":{"b":{"c":"` + strings.Repeat("d", 80) + `"}}}`,
		`[1e20,-0,0.1,1E-7,123456789012345678901234567890]`, `{"x":"\ud83d\ude00\ud83d"}`,
	} {
		f.Add([]byte(seed), uint16(0x0101))
		f.Add([]byte(seed), uint16(0x3307))
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 40 {
		var b bytes.Buffer
		randomJSON(r, &b, 0)
		f.Add(b.Bytes(), uint16(r.Uint32()))
	}
	f.Fuzz(func(t *testing.T, data []byte, knobs uint16) {
		b := streamBounds{
			exact:  int(knobs & 0xF),
			member: 1 + int(knobs>>4&0x3F),
			held:   []int{1 << 20, 64, 256, 4096}[knobs>>10&3],
		}
		pieces := []int{1 + int(knobs>>12), 1 + int(knobs&7), 1 + int(knobs>>3&15)}
		s := newTestStream(b)
		checkStream(t, s, data, b, pieces)
		checkStream(t, s, data, b, nil)
		for _, o := range inOrder(data) {
			b.held = 1 << 20
			s := newTestStream(b)
			if err := checkStream(t, s, o, b, pieces); err != nil {
				t.Fatalf("keys in order %q, bounds %+v: %v", o, b, err)
			}
		}
	})
}

// TestStreamRandom runs the fuzz target's checks over generated values, in every
// bound and fragmentation of the tables above.
func TestStreamRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := new(Stream)
	for range 3000 {
		var b bytes.Buffer
		randomJSON(r, &b, 0)
		data := b.Bytes()
		for _, bd := range tinyBounds {
			s.exactBound, s.memberBound, s.heldBound = bd.exact, bd.member, bd.held
			checkStream(t, s, data, bd, pieceSets[r.IntN(len(pieceSets))])
		}
		for _, o := range inOrder(data) {
			bd := streamBounds{0, 1 + r.IntN(20), 1 << 20}
			s.exactBound, s.memberBound, s.heldBound = bd.exact, bd.member, bd.held
			if err := checkStream(t, s, o, bd, pieceSets[r.IntN(len(pieceSets))]); err != nil {
				t.Fatalf("keys in order %q: %v", o, err)
			}
		}
	}
}

// bigArgs is {"path":"x","content":"<n bytes>"}, the shape streaming is for.
func bigArgs(n int) []byte {
	var b bytes.Buffer
	b.Grow(n + 64)
	b.WriteString(`{"path":"/src/main.go","content":"`)
	chunk := strings.Repeat("abcdefgh", 16)
	for b.Len() < n {
		b.WriteString(chunk)
	}
	b.WriteString(`","mode":"0644"}`)
	return b.Bytes()
}

func TestStreamPastTheExactBound(t *testing.T) {
	s := new(Stream)
	const n = 3 << 19 // 1.5 MiB
	cases := map[string][]byte{
		"big string member":  bigArgs(n),
		"escaped big string": func() []byte { a, _ := bigStringArgs(n, true); return a }(),
		"nested": []byte(`{"z":1,"files":[{"name":"a","data":{"b64":"` + strings.Repeat("QUJD", n/4) +
			`","kind":"png"}},{"name":"b"}],"g":[1,2]}`),
		"two big members in order": []byte(`{"a":"` + strings.Repeat("x", n/2) + `","b":"` + strings.Repeat("y", n/2) + `"}`),
		"big array":                []byte("[" + strings.Repeat(`{"v":1.50,"k":"x"},`, n/19) + "null]"),
		"big top-level string":     []byte(`"` + strings.Repeat("é\\n", n/4) + `"`),
		"padded null":              []byte(strings.Repeat(" ", n) + "null "),
		"medium member, then a big one sorting before it": []byte(`{"prompt":"` + strings.Repeat("p", 200<<10) + `","image":"` + strings.Repeat("i", n) + `"}`),
		"held members then big":                           []byte(`{"m":{` + strings.Repeat(`"k":"`+strings.Repeat("w", 1000)+`",`, 100) + `"c":"` + strings.Repeat("c", n) + `"}}`),
	}
	for name, data := range cases {
		want, wantErr := Fingerprint(data)
		if wantErr != nil {
			t.Fatalf("%s: Fingerprint: %v", name, wantErr)
		}
		for _, p := range [][]int{{4093}, {65536 + 17}} {
			got, err := streamSum(s, data, p)
			if err != nil || got != want {
				t.Fatalf("%s, pieces %v: Stream %s, %v; Fingerprint %s", name, p, got, err, want)
			}
		}
	}
}

// TestStreamSpeculationFailures: past the exact bound, each way the order of the
// keys can defeat writing as it comes gives ErrNeedsWhole, and each way the input
// has no canonical form gives Fingerprint's kind of error.
func TestStreamSpeculationFailures(t *testing.T) {
	big := strings.Repeat("x", 2<<20)
	needsWhole := map[string]string{
		"a later key sorts before the big member":              `{"b":"` + big + `","a":1}`,
		"a later duplicate replaces the big member":            `{"b":"` + big + `","b":1}`,
		"a later key sorts before an enclosing key":            `{"m":{"c":"` + big + `"},"a":1}`,
		"a duplicate of an enclosing key":                      `{"m":{"c":"` + big + `"},"m":1}`,
		"a later key in an array's object":                     `[{"b":"` + big + `","a":0}]`,
		"members held past the held bound":                     `{"z":"` + big + `",` + strings.Repeat(`"k`+strings.Repeat("a", 100)+`":1,`, 10000) + `"zz":0}`,
		"wide object of small members, big last":               `{` + strings.Repeat(`"k":"`+strings.Repeat("v", 200)+`",`, 6000) + `"a":"` + big + `"}`,
		"a held member whose canonical form is past the bound": `{"z":"` + big + `","zz":[` + strings.Repeat("1e20,", 50000) + `0]}`,
		"a key longer than its bound":                          `{"` + big + `":1}`,
		"a number longer than its bound":                       `[` + strings.Repeat(" ", 2<<20) + "0." + strings.Repeat("0", 5000) + `1]`,
		"nesting past the depth bound":                         strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20),
		"a big member after one that sorts after it":           `{"c":"` + big + `","b":"` + big + `"}`,
		"a key after the big member sorts first":               `{"path":"x","edits":[{"oldText":"` + big + `","newText":"y"}],"dryRun":false}`,
	}
	s := new(Stream)
	for name, data := range needsWhole {
		_, err := streamSum(s, []byte(data), []int{1 << 16})
		if !errors.Is(err, ErrNeedsWhole) {
			t.Errorf("%s: Stream: %v, want ErrNeedsWhole", name, err)
		}
		if _, err := Fingerprint([]byte(data)); err != nil {
			t.Errorf("%s: Fingerprint: %v (the case should have a fingerprint)", name, err)
		}
	}
	noForm := map[string]string{
		"lone surrogate in the big string":          `{"c":"` + big + `\ud800"}`,
		"lone surrogate in a held member":           `{"c":"` + big + `","d":"\udc00"}`,
		"overflowing number written as it comes":    `[` + strings.Repeat("0,", 1<<20) + `1e400]`,
		"not JSON past the bound":                   `{"c":"` + big + `",}`,
		"unterminated":                              `{"c":"` + big,
		"control character in the streamed string":  `{"c":"` + big + "\x01" + `"}`,
		"data after the value":                      `"` + big + `" 1`,
		"bad escape in the streamed string":         `["` + big + `\x"]`,
		"lone surrogate replaced by a later member": `{"c":"` + big + `","d":"\udc00","d":1}`, // no error: replaced
	}
	for name, data := range noForm {
		_, err := streamSum(s, []byte(data), []int{1 << 16})
		_, wantErr := Fingerprint([]byte(data))
		if (err == nil) != (wantErr == nil) || errors.Is(err, ErrNeedsWhole) {
			t.Errorf("%s: Stream: %v; Fingerprint: %v", name, err, wantErr)
		}
	}
}

// TestStreamMemory: 64 MB of arguments in the shape streaming is for cost a fresh
// Stream well under 2 MB (the exact buffer grown to its bound, the held and replay
// buffers, the writer), and a reused one next to nothing.
func TestStreamMemory(t *testing.T) {
	data := bigArgs(64 << 20)
	want, err := Fingerprint(data)
	if err != nil {
		t.Fatal(err)
	}
	measure := func(s *Stream) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got, err := streamSum(s, data, []int{64 << 10})
		runtime.ReadMemStats(&after)
		if err != nil || got != want {
			t.Fatalf("Stream: %s, %v; want %s", got, err, want)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	s := new(Stream)
	fresh := measure(s)
	reused := measure(s)
	t.Logf("64 MB arguments: a fresh Stream allocated %d bytes, a reused one %d", fresh, reused)
	if fresh > 1700<<10 {
		t.Errorf("a fresh Stream allocated %d bytes for 64 MB of arguments", fresh)
	}
	if reused > 16<<10 {
		t.Errorf("a reused Stream allocated %d bytes for 64 MB of arguments", reused)
	}
}

// TestStreamMemoryIsBounded: what a fresh Stream allocates does not grow with the
// input, whatever its shape (the ones that defeat streaming included), and stays
// under 7 MiB: 1.3 MiB of exact buffer, the member buffers, and the held members and
// open objects up to their bound.
func TestStreamMemoryIsBounded(t *testing.T) {
	alloc := func(in []byte) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		streamSum(new(Stream), in, []int{64 << 10})
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	shapes := func(n int) map[string][]byte {
		m := memShapes(n)
		m["deep members"] = []byte(strings.Repeat(`{"a":`, n/5) + "1" + strings.Repeat("}", n/5))
		m["content"] = bigArgs(n)
		return m
	}
	small, large := shapes(3<<19), shapes(4<<20)
	for name := range small {
		a, b := alloc(small[name]), alloc(large[name])
		t.Logf("%s: %d bytes for 1.5 MiB, %d for 4 MiB", name, a, b)
		if b > 7<<20 || b > a+64<<10 {
			t.Errorf("%s: a Stream allocated %d bytes for 1.5 MiB, %d for 4 MiB", name, a, b)
		}
	}
}

func benchmarkStream(b *testing.B, n int) {
	data := bigArgs(n)
	b.Run("Fingerprint", func(b *testing.B) {
		var f Fingerprinter
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := f.Fingerprint(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Stream", func(b *testing.B) {
		s := new(Stream)
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := streamSum(s, data, []int{64 << 10}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkStream1MB(b *testing.B)  { benchmarkStream(b, 1<<20) }
func BenchmarkStream16MB(b *testing.B) { benchmarkStream(b, 16<<20) }

// TestStreamLifecycle: the zero value is ready, Reset starts afresh after success
// and after failure, Sum repeats its answer, a Write after Sum fails the next Sum, and a
// value past 2 GiB is refused as Fingerprint refuses it.
func TestStreamLifecycle(t *testing.T) {
	var s Stream
	if got, err := s.Sum(); err != nil || got != mustFingerprint(t, nil) {
		t.Fatalf("zero Stream: %s, %v; want the fingerprint of {}", got, err)
	}
	big := bigArgs(2 << 20)
	for range 2 {
		if _, err := streamSum(&s, []byte(`{"b":"`+strings.Repeat("x", 2<<20)+`","a":1}`), nil); !errors.Is(err, ErrNeedsWhole) {
			t.Fatalf("want ErrNeedsWhole, got %v", err)
		}
		got, err := streamSum(&s, big, []int{1000})
		if err != nil || got != mustFingerprint(t, big) {
			t.Fatalf("after Reset: %s, %v", got, err)
		}
		if again, err := s.Sum(); err != nil || again != got {
			t.Fatalf("Sum again: %s, %v; want %s", again, err, got)
		}
		s.Write([]byte(" "))
		if _, err := s.Sum(); err == nil {
			t.Fatal("Sum after a late Write succeeded: it no longer covers what was written")
		}
	}
	s.Reset()
	s.Write([]byte("1"))
	s.Sum()
	s.Reset()
	s.Write([]byte(`"`))
	s.total = 1 << 31
	s.Write([]byte(`"`))
	if _, err := s.Sum(); err == nil || errors.Is(err, ErrNeedsWhole) {
		t.Fatalf("past 2 GiB: %v, want a refusal", err)
	}
}

func mustFingerprint(t *testing.T, b []byte) string {
	t.Helper()
	fp, err := Fingerprint(b)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// TestStreamSplitsAnywhere: text that decodes differently when a sequence is cut
// (truncated and invalid UTF-8, surrogate pairs, escapes, numbers) gives the same
// answer streamed, cut in two at every byte.
func TestStreamSplitsAnywhere(t *testing.T) {
	inputs := []string{
		"\"a\xe2\x82\xacb\xe2\x82\"", "\"\xf0\x9f\x98\x80\xf0\x9f\x98\"", "\"\xed\xa0\x80\xc0\xaf\xf4\x90\x80\x80\xe0\x9f\xbf\"",
		"[\"\xe2\x82\\n\", \"\xf0\x90\\u00e9\"]", `{"k":"\ud83d\ude00\u00e9\"\\\/\b\f\n\r\t\u0001"}`, `["\ud83d\ud83d\ude00"]`,
		`{"b":[1.0e2,-0.0,1E-7,0.000001,123456789012345678901],"a":true,"c":null}`, `{"a":{"b":"x","a":"y"},"a":[{"z":1,"y":2}]}`,
		"{\"\xe2\x82\":1,\"\xe2\x82\xac\":2}", `{"\u00e9":1,"é":2}`,
	}
	s := new(Stream)
	for _, in := range inputs {
		data := []byte(in)
		for _, b := range []streamBounds{{exact: 0, member: 1, held: 1 << 20}, {exact: 0, member: 1 << 10, held: 1 << 20}} {
			s.exactBound, s.memberBound, s.heldBound = b.exact, b.member, b.held
			_, fpErr := Fingerprint(data)
			for _, p := range append(cuts(len(data)), []int{1}) {
				// Within the member bound nothing is speculated on.
				if err := checkStream(t, s, data, b, p); err != nil && fpErr == nil && b.member > len(data) {
					t.Fatalf("%q in pieces %v: %v", data, p, err)
				}
			}
		}
	}
}

// cuts is each way to cut n bytes in two.
func cuts(n int) [][]int {
	var cs [][]int
	for c := 1; c < n; c++ {
		cs = append(cs, []int{c, n})
	}
	return cs
}
