package jcs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

type fpVectorFile struct {
	CorrelationKey string     `json:"correlationKey"`
	Vectors        []fpVector `json:"vectors"`
}

type fpVector struct {
	Arguments   string  `json:"arguments"`
	CallID      *string `json:"callId"`
	Canonical   *string `json:"canonical"`
	Fingerprint string  `json:"fingerprint"`
}

func loadFingerprintVectors(t testing.TB) fpVectorFile {
	t.Helper()
	path := testutil.ContractFile(t, "fingerprint-vectors.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var vf fpVectorFile
	if err := json.Unmarshal(data, &vf); err != nil {
		t.Fatalf("decode vectors: %v", err)
	}
	if len(vf.Vectors) == 0 || vf.CorrelationKey == "" {
		t.Fatalf("vectors file %s holds no vectors", path)
	}
	return vf
}

// withoutTopLevelKey stands in for the real correlation key remover: it
// rebuilds the object from its members minus those named key, keeping every
// value's bytes as they were, and returns the removed value's string.
func withoutTopLevelKey(t *testing.T, raw []byte, key string) ([]byte, *string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("arguments %q are not an object", raw)
	}
	var out bytes.Buffer
	var removed *string
	out.WriteByte('{')
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("read key: %v", err)
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			t.Fatalf("read value: %v", err)
		}
		name := tok.(string)
		if name == key {
			var s string
			if err := json.Unmarshal(value, &s); err != nil {
				t.Fatalf("correlation value %s: %v", value, err)
			}
			removed = &s
			continue
		}
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		out.Write(k)
		out.WriteByte(':')
		out.Write(value)
	}
	out.WriteByte('}')
	return out.Bytes(), removed
}

func jcsOutput(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	err := Canonicalize(&b, raw)
	return b.Bytes(), err
}

func sha256Of(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestFingerprintVectors(t *testing.T) {
	vf := loadFingerprintVectors(t)
	for i, v := range vf.Vectors {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			args, callID := withoutTopLevelKey(t, []byte(v.Arguments), vf.CorrelationKey)
			if (callID == nil) != (v.CallID == nil) || (callID != nil && *callID != *v.CallID) {
				t.Fatalf("removed call id %v, vector says %v", callID, v.CallID)
			}
			if v.Canonical != nil {
				got, err := jcsOutput(args)
				if err != nil {
					t.Fatalf("Canonicalize(%s): %v", args, err)
				}
				if string(got) != *v.Canonical {
					t.Fatalf("Canonicalize(%s)\n got %s\nwant %s", args, got, *v.Canonical)
				}
			}
			fp, err := Fingerprint(args)
			if err != nil {
				t.Fatalf("Fingerprint(%s): %v", args, err)
			}
			if fp != v.Fingerprint {
				t.Fatalf("Fingerprint(%.80s)\n got %s\nwant %s", args, fp, v.Fingerprint)
			}
		})
	}
}

func TestFingerprintOfAbsentArgumentsIsEmptyObject(t *testing.T) {
	want := sha256Of([]byte("{}"))
	for _, in := range [][]byte{nil, {}, []byte("null"), []byte(" \r\n\tnull\n")} {
		got, err := Fingerprint(in)
		if err != nil || got != want {
			t.Errorf("Fingerprint(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
}

func TestFingerprintOfNonObjectIsItsOwnJCS(t *testing.T) {
	for in, canon := range map[string]string{
		`[ 1.0, {"b":1,"a":2} ]`: `[1,{"a":2,"b":1}]`,
		`"x\u0041"`:              `"xA"`,
		` 1e3 `:                  `1000`,
		`true`:                   `true`,
	} {
		got, err := Fingerprint([]byte(in))
		if err != nil || got != sha256Of([]byte(canon)) {
			t.Errorf("Fingerprint(%s) = %s, %v; want hash of %s", in, got, err, canon)
		}
	}
	if _, err := Fingerprint([]byte("  ")); err == nil {
		t.Error("whitespace-only arguments are not JSON, yet fingerprinted")
	}
}

// esNumbers maps JSON literals to String(JSON.parse(literal)) as printed by
// Node v20 (V8).
var esNumbers = [][2]string{
	{"0", "0"}, {"-0", "0"}, {"0.0", "0"}, {"-0.0", "0"}, {"0e10", "0"},
	{"1", "1"}, {"-1", "-1"}, {"100", "100"}, {"1.0", "1"}, {"1.5", "1.5"}, {"-1.5", "-1.5"},
	{"1e2", "100"}, {"1E2", "100"}, {"1e+2", "100"},
	{"1e-7", "1e-7"}, {"123e-20", "1.23e-18"}, {"0.000001", "0.000001"}, {"0.0000001", "1e-7"},
	{"1e21", "1e+21"}, {"1e20", "100000000000000000000"},
	{"123456789012345680000", "123456789012345680000"}, {"999999999999999999999", "1e+21"},
	{"1e-6", "0.000001"},
	{"1.7976931348623157e308", "1.7976931348623157e+308"}, {"-1.7976931348623157e308", "-1.7976931348623157e+308"},
	{"5e-324", "5e-324"}, {"2.4703282292062328e-324", "5e-324"}, {"2.4703282292062327e-324", "0"},
	{"2.2250738585072014e-308", "2.2250738585072014e-308"}, {"1e-400", "0"}, {"-1e-400", "0"},
	{"9007199254740993", "9007199254740992"}, {"9007199254740992", "9007199254740992"},
	{"18014398509481985", "18014398509481984"},
	{"0.1", "0.1"}, {"0.2", "0.2"}, {"0.30000000000000004", "0.30000000000000004"},
	{"1e23", "1e+23"}, {"8.41e21", "8.41e+21"}, {"1.2e-6", "0.0000012"}, {"1.23456789e-7", "1.23456789e-7"},
	{"123456.789", "123456.789"}, {"0.000123", "0.000123"}, {"4.35", "4.35"}, {"0.1e1", "1"}, {"10e-1", "1"},
	{"12345678901234567890", "12345678901234567000"}, {"1234567890123456789012", "1.2345678901234568e+21"},
	{"3.141592653589793238462643383279", "3.141592653589793"},
	{"100000000000000000000", "100000000000000000000"}, {"1000000000000000000000", "1e+21"},
	{"0.00001234", "0.00001234"}, {"1e308", "1e+308"}, {"1e-323", "1e-323"},
	{"4.9406564584124654e-324", "5e-324"}, {"144115188075855877", "144115188075855870"},
	{"6.02214076e23", "6.02214076e+23"}, {"-123.456e-300", "-1.23456e-298"},
	{"1.00000000000000011102230246251565404236316680908203125", "1"},
	{"1.0000000000000001110223024625156540423631668090820312500000000000001", "1.0000000000000002"},
	{"7.038531e-26", "7.038531e-26"}, {"9.999999999999999e22", "1e+23"}, {"5e-7", "5e-7"},
	{"0.00000100", "0.000001"}, {"1e-5", "0.00001"}, {"100e-9", "1e-7"},
	{"1.2345678901234567e-200", "1.2345678901234567e-200"}, {"2e0", "2"},
	{"1234567.1234567890", "1234567.123456789"},
}

func TestNumbersPrintAsECMAScript(t *testing.T) {
	for _, c := range esNumbers {
		got, err := jcsOutput([]byte(c[0]))
		if err != nil || string(got) != c[1] {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", c[0], got, err, c[1])
		}
		// Inside containers the same path must run.
		got, err = jcsOutput([]byte(`{"n":[` + c[0] + `]}`))
		if want := `{"n":[` + c[1] + `]}`; err != nil || string(got) != want {
			t.Errorf("Canonicalize(%s in an array) = %s, %v; want %s", c[0], got, err, want)
		}
	}
}

func TestNumbersOverflowingADoubleAreRejected(t *testing.T) {
	for _, in := range []string{"1e400", "-1e309", "[1.8e308]", `{"a":` + strings.Repeat("9", 400) + `}`} {
		if got, err := jcsOutput([]byte(in)); err == nil || len(got) != 0 {
			t.Errorf("Canonicalize(%.40s) = %s; JSON.parse makes Infinity, which has no JCS form", in, got)
		}
	}
	// The largest integer literal that stays finite must not be refused.
	if _, err := jcsOutput([]byte(strings.Repeat("9", 308))); err != nil {
		t.Errorf("308-digit integer refused: %v", err)
	}
}

// The decimal shortcut must agree with the float path on every literal it
// accepts; literals come in many spellings of the same and nearby values.
func TestShortDecimalAgreesWithShortestDigits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for range 100000 {
		lit := randomNumberLiteral(r)
		var b1, b2 [32]byte
		fast, p1, ok := shortDecimal(b1[:0], []byte(lit))
		if !ok {
			continue
		}
		checked++
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			t.Fatalf("ParseFloat(%s): %v", lit, err)
		}
		slow, p2 := shortestDigits(b2[:0], math.Abs(f))
		if string(fast) != string(slow) || (len(fast) > 0 && p1 != p2) {
			t.Fatalf("literal %s: shortcut gives 0.%s e%d, float path 0.%s e%d", lit, fast, p1, slow, p2)
		}
	}
	if checked < 25000 {
		t.Fatalf("only %d literals took the shortcut; the generator no longer exercises it", checked)
	}
}

func TestKeysSortByUTF16CodeUnits(t *testing.T) {
	// Expected output from the npm canonicalize package: U+E000..U+FFFF sort
	// after astral characters, whose first surrogate is 0xD800..0xDBFF.
	in := `{"\ue000":1,"😀":2,"z":3,"é":4,"\uffff":5,"𐀀":6,"a":7,"":8,"A":9,"\u007f":10,"ab":11,` +
		`"a\u0000":12,"\ud800\udc00x":13,"ﬀ":14,"\u00e9\u0301":15}`
	want := "{\"\":8,\"A\":9,\"a\":7,\"a\\u0000\":12,\"ab\":11,\"z\":3,\"\x7f\":10,\"é\":4,\"é\u0301\":15," +
		"\"𐀀\":6,\"𐀀x\":13,\"😀\":2,\"\ue000\":1,\"ﬀ\":14,\"\uffff\":5}"
	got, err := jcsOutput([]byte(in))
	if err != nil || string(got) != want {
		t.Fatalf("got  %s, %v\nwant %s", got, err, want)
	}
}

// A big object with keys drawn from code units around every ordering
// boundary (ASCII, Latin-1, below and above the surrogate block, astral),
// spelled raw or escaped, with many duplicates, must match the reference.
func TestBigObjectMatchesReference(t *testing.T) {
	alphabet := []string{"a", "b", "Z", "é", "\\u00e9", "\\u0062", "中", "\\ue000", "\uffff", "😀", "\\ud83d\\ude00", "𐀀", "\\n", "~"}
	r := rand.New(rand.NewPCG(9, 9))
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range 5000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for range 1 + r.IntN(3) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		fmt.Fprintf(&b, `":%d`, i)
	}
	b.WriteByte('}')
	want, ok := referenceCanonical(b.Bytes())
	if !ok {
		t.Fatal("reference refused the input")
	}
	got, err := jcsOutput(b.Bytes())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("got  %.300s, %v\nwant %.300s", got, err, want)
	}
	if n := bytes.Count(got, []byte(":")); n < 500 || n > 4000 {
		t.Fatalf("%d distinct keys; the generator no longer makes a mix of duplicates", n)
	}
}

func TestDuplicateKeysLastWins(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1,"a":2}`:                                  `{"a":2}`,
		`{"a":1,"b":0,"\u0061":3}`:                       `{"a":3,"b":0}`,
		`{"a":{"x":[1,{"y":2}]},"a":"last"}`:             `{"a":"last"}`,
		`{"a":"first","b":1,"a":{"z":1,"y":2}}`:          `{"a":{"y":2,"z":1},"b":1}`,
		`{"o":{"k":1,"k":2,"k":3},"p":[{"q":1,"q":[]}]}`: `{"o":{"k":3},"p":[{"q":[]}]}`,
		`{"😀":1,"\ud83d\ude00":2}`:                       `{"😀":2}`,
	} {
		got, err := jcsOutput([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
}

func TestStringsEscapeAsJSONStringify(t *testing.T) {
	// Expected output from JSON.stringify: only controls, '"' and '\' are
	// escaped; DEL, U+2028, BOM and U+FFFF stay raw; '\/' loses its escape.
	in := `{"s":"\u0000\u0008\u0009\u000a\u000b\u000c\u000d\u001f\u0020\u0022\u005c\u002f\u007f\u0080` +
		`\u2028\u2029\ufeff\uFFFF\uD834\uDD1E\"\\\/\b\f\n\r\t"}`
	want := "{\"s\":\"\\u0000\\b\\t\\n\\u000b\\f\\r\\u001f \\\"\\\\/\x7f\u0080\u2028\u2029\ufeff\uffff𝄞" +
		"\\\"\\\\/\\b\\f\\n\\r\\t\"}"
	got, err := jcsOutput([]byte(in))
	if err != nil || string(got) != want {
		t.Fatalf("got  %q, %v\nwant %q", got, err, want)
	}
}

func TestInvalidUTF8DecodesAsWHATWG(t *testing.T) {
	// Buffer.from(bytes).toString("utf8") in Node: a truncated sequence is
	// one U+FFFD however many of its bytes are present; a byte that cannot
	// start or continue a sequence is one U+FFFD each.
	in := []byte("[\"\xe2\x82A\xf0\x9f\x98x\xed\xa0\x80\xff\xc0\xafok\xe2\x82\"]")
	want := "[\"\uFFFDA\uFFFDx\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFDok\uFFFD\"]"
	got, err := jcsOutput(in)
	if err != nil || string(got) != want {
		t.Fatalf("got  %q, %v\nwant %q", got, err, want)
	}
	// Keys decode the same way before they are compared: "\xe2\x82" is one
	// U+FFFD, so it collides with the literal U+FFFD key and the last wins.
	got, err = jcsOutput([]byte("{\"\xe2\x82\":1,\"\uFFFD\":2,\"\xff\xfe\":3}"))
	if want := "{\"\uFFFD\":2,\"\uFFFD\uFFFD\":3}"; err != nil || string(got) != want {
		t.Fatalf("got  %q, %v\nwant %q", got, err, want)
	}
}

func TestLoneSurrogatesHaveNoCanonicalForm(t *testing.T) {
	// canonicalize@5.1.0 throws "Lone surrogate is not allowed" (RFC 8785
	// requires well-formed Unicode), so the host has no fingerprint for these.
	for _, in := range []string{
		`"\ud800"`, `"\udc00"`, `"a\ud83dx"`, `"\ud83d\ud83d\ude00"`, `"\ude00\ud83d"`,
		`{"\ud800":1}`, `["ok","\uDBFF\u0041"]`, `"\ud83d\\ude00"`,
	} {
		if got, err := jcsOutput([]byte(in)); err == nil {
			t.Errorf("Canonicalize(%s) = %s; want an error", in, got)
		}
	}
	if got, err := jcsOutput([]byte(`"\uD83D\uDE00\ud800\udc00"`)); err != nil || string(got) != `"😀𐀀"` {
		t.Errorf("well-formed pairs: got %s, %v", got, err)
	}
}

// JSON.parse itself accepts lone surrogates and overflowing numbers; only
// canonicalize refuses them, and only if they survive duplicate removal.
func TestProblemsInReplacedDuplicatesDoNotCount(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"\ud800","a":1}`:                              `{"a":1}`,
		`{"a":1e400,"a":2}`:                                 `{"a":2}`,
		`{"a":[{"b":"\udc00"},-1e999],"a":0}`:               `{"a":0}`,
		`[{"x":{"y":"\ud800"},"x":{}}]`:                     `[{"x":{}}]`,
		`{"a":{"b":1,"b":[1e999]},"a":{"b":[1e999],"b":1}}`: `{"a":{"b":1}}`,
	} {
		got, err := jcsOutput([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{
		`{"a":1,"a":"\ud800"}`, `{"a":2,"a":1e400}`, `{"\ud800":1,"\ud800":2}`,
		`[{"a":"\ud800","a":1},"\ud800"]`, `{"a":{"b":1,"b":[1e999]}}`,
	} {
		var b bytes.Buffer
		if err := Canonicalize(&b, []byte(in)); err == nil || b.Len() != 0 {
			t.Errorf("Canonicalize(%s) = %q, %v; want an error and no output", in, b.Bytes(), err)
		}
	}
}

func TestInvalidJSONIsAnErrorAndWritesNothing(t *testing.T) {
	for _, in := range []string{
		``, ` `, `{`, `}`, `[`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{'a':1}`, `{"a" 1}`,
		`[1 2]`, `1 2`, `01`, `1.`, `.5`, `+1`, `-`, `1e`, `1e+`, `0x10`, `NaN`, `Infinity`, `-Infinity`,
		`tru`, `nulll`, `True`, `"abc`, `"a\"`, "\"a\x01\"", "\"a\nb\"", `"\x41"`, `"\u12"`, `"\u12g4"`,
		"\xef\xbb\xbf{}", "{}\x00", `[]]`, `{"a":1}}`, `[{]`, `{[]}`, `{"a":1 "b":2}`, "\u00a0{}",
	} {
		var b bytes.Buffer
		err := Canonicalize(&b, []byte(in))
		if err == nil {
			t.Errorf("Canonicalize(%q) = %q; want an error", in, b.Bytes())
			continue
		}
		if b.Len() != 0 {
			t.Errorf("Canonicalize(%q) failed but wrote %q", in, b.Bytes())
		}
		if _, err := Fingerprint([]byte(in)); err == nil && in != "" {
			t.Errorf("Fingerprint(%q) succeeded", in)
		}
	}
}

func TestWhitespaceIsDropped(t *testing.T) {
	got, err := jcsOutput([]byte(" \t\r\n{ \"b\" :\n[ 1 ,\t2 ] , \"a\" : { } }\r\n"))
	if want := `{"a":{},"b":[1,2]}`; err != nil || string(got) != want {
		t.Fatalf("got %s, %v; want %s", got, err, want)
	}
}

// Depth is not limited (the host's JSON.parse and canonicalize@5.1.0 handle
// millions of levels), and nothing recurses, so deep input can neither blow
// the goroutine stack nor be refused.
func TestDeepNesting(t *testing.T) {
	for _, depth := range []int{10_000, 200_000} {
		in := strings.Repeat("[ ", depth) + strings.Repeat("]", depth)
		got, err := jcsOutput([]byte(in))
		if want := strings.Repeat("[", depth) + strings.Repeat("]", depth); err != nil || string(got) != want {
			t.Fatalf("depth %d arrays: err %v, output matches %v", depth, err, string(got) == want)
		}
		in = strings.Repeat(`{"k":[{"b":0, "a":`, depth/2) + "1" + strings.Repeat("}]}", depth/2)
		got, err = jcsOutput([]byte(in))
		want := strings.Repeat(`{"k":[{"a":`, depth/2) + "1" + strings.Repeat(`,"b":0}]}`, depth/2)
		if err != nil || string(got) != want {
			t.Fatalf("depth %d objects: err %v, output matches %v", depth, err, string(got) == want)
		}
	}
	// Unbalanced deep input fails cleanly.
	if _, err := jcsOutput([]byte(strings.Repeat("[", 1_000_000))); err == nil {
		t.Fatal("unterminated deep array accepted")
	}
}

type jcsFailingWriter struct{ left int }

var errJCSWriterFull = errors.New("writer full")

func (w *jcsFailingWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errJCSWriterFull
	}
	w.left -= len(p)
	return len(p), nil
}

func TestCanonicalizeReportsWriteErrors(t *testing.T) {
	in := []byte(`{"s":"` + strings.Repeat("x", 200_000) + `","t":[1,2,3]}`)
	err := Canonicalize(&jcsFailingWriter{left: 100_000}, in)
	if !errors.Is(err, errJCSWriterFull) {
		t.Fatalf("Canonicalize into a failing writer: %v; want %v", err, errJCSWriterFull)
	}
}

// bigStringArgs builds {"content": s, "path": ...} where s has n bytes of
// text of the given flavour, and the canonical form expected for it.
func bigStringArgs(n int, escaped bool) (args, canon []byte) {
	var in, out bytes.Buffer
	in.Grow(n + 64)
	out.Grow(n + 64)
	in.WriteString(`{"path":"/tmp/x","content":"`)
	out.WriteString(`{"content":"`)
	chunkIn, chunkOut := strings.Repeat("abcdefgh", 16), strings.Repeat("abcdefgh", 16)
	if escaped {
		chunkIn = `line\n\u00e9t\u00E9 中文 "` + "\xe2\x82" + `\/\t\u0001` + strings.Repeat("z", 64)
		chunkOut = `line\n` + "été 中文 \"" + "\uFFFD" + `/\t\u0001` + strings.Repeat("z", 64)
		chunkIn = strings.Replace(chunkIn, `"`, `\"`, 1)
		chunkOut = strings.Replace(chunkOut, `"`, `\"`, 1)
	}
	for in.Len() < n {
		in.WriteString(chunkIn)
		out.WriteString(chunkOut)
	}
	in.WriteString(`"}`)
	out.WriteString(`","path":"/tmp/x"}`)
	return in.Bytes(), out.Bytes()
}

func TestBigStringsStreamWithoutCopies(t *testing.T) {
	const size = 8 << 20
	for _, escaped := range []bool{false, true} {
		args, canon := bigStringArgs(size, escaped)
		want := sha256Of(canon)
		canon = nil
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got, err := Fingerprint(args)
		runtime.ReadMemStats(&after)
		if err != nil || got != want {
			t.Fatalf("escaped=%v: Fingerprint = %s, %v; want %s", escaped, got, err, want)
		}
		// A decode into Go strings or a canonical copy would allocate at
		// least the payload size.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/64 {
			t.Errorf("escaped=%v: fingerprinting %d bytes allocated %d bytes", escaped, len(args), alloc)
		}
	}
}

// randomNumberLiteral spells numbers the ways JSON producers do, plus long
// and extreme ones that exercise rounding.
func randomNumberLiteral(r *rand.Rand) string {
	sign := ""
	if r.IntN(4) == 0 {
		sign = "-"
	}
	switch r.IntN(6) {
	case 0:
		return sign + strconv.Itoa(r.IntN(1_000_000))
	case 1:
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 0.5
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	case 2:
		f := r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
		return strconv.FormatFloat(f, "efg"[r.IntN(3)], r.IntN(20)-1, 64)
	case 3:
		return sign + strconv.FormatFloat(float64(r.Int64N(1<<62))/float64(int64(1)<<r.IntN(62)), 'f', r.IntN(18), 64)
	default:
		// Digits with a point and an exponent placed at random.
		var b strings.Builder
		b.WriteString(sign)
		n := 1 + r.IntN(25)
		digits := make([]byte, n)
		for i := range digits {
			digits[i] = byte('0' + r.IntN(10))
			if r.IntN(3) == 0 {
				digits[i] = '0'
			}
		}
		intPart := digits[:1+r.IntN(n)]
		intPart = bytes.TrimLeft(intPart, "0")
		if len(intPart) == 0 {
			intPart = []byte("0")
		}
		b.Write(intPart)
		if frac := digits[len(digits)-r.IntN(n):]; len(frac) > 0 {
			b.WriteByte('.')
			b.Write(frac)
		}
		if r.IntN(2) == 0 {
			fmt.Fprintf(&b, "%c%d", "eE"[r.IntN(2)], r.IntN(640)-330)
		}
		return b.String()
	}
}

// randomJSON generates a value for differential tests: mixed whitespace,
// duplicate and order-sensitive keys, escapes, raw UTF-8, and now and then
// invalid UTF-8, lone surrogates and overflowing numbers.
func randomJSON(r *rand.Rand, b *bytes.Buffer, depth int) {
	ws := func() {
		for range r.IntN(3) {
			b.WriteByte(" \t\r\n"[r.IntN(4)])
		}
	}
	ws()
	kind := r.IntN(10)
	if depth > 4 {
		kind = r.IntN(6)
	}
	switch kind {
	case 0, 1:
		b.WriteString(randomNumberLiteral(r))
	case 2:
		b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	case 3, 4, 5:
		randomJSONString(r, b, 8)
	case 6, 7:
		b.WriteByte('[')
		for i := range r.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			randomJSON(r, b, depth+1)
		}
		ws()
		b.WriteByte(']')
	default:
		b.WriteByte('{')
		for i := range r.IntN(6) {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			if r.IntN(2) == 0 {
				b.WriteString(jcsKeyPool[r.IntN(len(jcsKeyPool))])
			} else {
				randomJSONString(r, b, 3)
			}
			ws()
			b.WriteByte(':')
			randomJSON(r, b, depth+1)
		}
		ws()
		b.WriteByte('}')
	}
	ws()
}

var jcsKeyPool = []string{
	`"a"`, `"\u0061"`, `"b"`, `"A"`, `""`, `"é"`, `"\u00e9"`, `"\ue000"`, `"\uffff"`, `"😀"`,
	`"\ud83d\ude00"`, `"𐀀"`, `"aa"`, `"a\u0000"`, `"_bir_call_id"`, `"\u007f"`, `"ﬀ"`,
}

func randomJSONString(r *rand.Rand, b *bytes.Buffer, maxLen int) {
	b.WriteByte('"')
	for range r.IntN(maxLen + 1) {
		switch r.IntN(12) {
		case 0:
			b.WriteString([]string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`}[r.IntN(8)])
		case 1:
			fmt.Fprintf(b, `\u%04x`, r.IntN(0x80))
		case 2:
			cu := r.IntN(0x10000)
			if cu >= 0xD800 && cu < 0xE000 && r.IntN(20) != 0 {
				cu = 0xE000 + r.IntN(0x2000) // keep lone surrogates rare
			}
			fmt.Fprintf(b, []string{`\u%04x`, `\u%04X`}[r.IntN(2)], cu)
		case 3:
			c := 0x10000 + r.IntN(0x100000)
			hi, lo := 0xD800+(c-0x10000)>>10, 0xDC00+(c-0x10000)&0x3FF
			fmt.Fprintf(b, `\u%04x\u%04x`, hi, lo)
		case 4:
			c := rune(0x80 + r.IntN(0x10FFFF-0x80))
			if !utf8.ValidRune(c) {
				c = '\u2028'
			}
			b.WriteRune(c)
		case 5:
			if r.IntN(10) == 0 {
				b.Write([][]byte{{0xff}, {0xe2, 0x82}, {0xf0, 0x9f, 0x98}, {0xed, 0xa0, 0x80}, {0xc0, 0xaf}, {0x80}}[r.IntN(6)])
			} else {
				b.WriteString("\x7f")
			}
		default:
			b.WriteByte(byte(' ' + r.IntN(95)))
			if b.Bytes()[b.Len()-1] == '"' || b.Bytes()[b.Len()-1] == '\\' {
				b.Truncate(b.Len() - 1)
				b.WriteString("x")
			}
		}
	}
	b.WriteByte('"')
}

// nodeScript runs canonicalize over base64 lines of UTF-8 text on stdin the
// way the host does (bytes decoded as UTF-8, JSON.parse, canonicalize), and
// prints "ok <base64 canonical>" or "err <message>" per line.
const jcsNodeScript = `
const { default: canonicalize } = await import(require('url').pathToFileURL(process.env.CANONICALIZE_JS));
const lines = require('fs').readFileSync(0, 'utf8').split('\n').filter(Boolean);
const out = [];
for (const l of lines) {
  try {
    const c = canonicalize(JSON.parse(Buffer.from(l, 'base64').toString('utf8')));
    out.push('ok ' + Buffer.from(c, 'utf8').toString('base64'));
  } catch (e) { out.push('err ' + String(e.message).replace(/\s+/g, ' ')); }
}
process.stdout.write(out.join('\n') + '\n');
`

// TestAgainstNodeCanonicalize compares with the host's own implementation
// on generated input. It needs node and the npm canonicalize package named by
// BIR_CANONICALIZE_JS (canonicalize's lib/canonicalize.js), which scripts/test
// sets to the copy e2e/ installs from its lockfile. Without it the test skips,
// except in CI, where a missing prerequisite must not pass for a check that ran.
func TestAgainstNodeCanonicalize(t *testing.T) {
	lib := os.Getenv("BIR_CANONICALIZE_JS")
	if lib == "" {
		const how = "set BIR_CANONICALIZE_JS to node_modules/canonicalize/lib/canonicalize.js to compare with the host (scripts/test does)"
		if testutil.InCI() {
			t.Fatal("CI is set but BIR_CANONICALIZE_JS is not: " + how)
		}
		t.Skip(how)
	}
	if _, err := os.Stat(lib); err != nil {
		t.Fatalf("BIR_CANONICALIZE_JS: %v", err)
	}
	n := 20000
	if testing.Short() {
		n = 2000
	}
	r := rand.New(rand.NewPCG(7, 8))
	inputs := make([][]byte, n)
	var stdin bytes.Buffer
	for i := range inputs {
		var b bytes.Buffer
		randomJSON(r, &b, 0)
		if i%10 == 0 && b.Len() > 1 { // some invalid JSON too
			cut := r.IntN(b.Len())
			b = *bytes.NewBuffer(append(b.Bytes()[:cut:cut], b.Bytes()[cut+1:]...))
		}
		inputs[i] = b.Bytes()
	}
	// The flat index's inputs, and keys sharing long prefixes (the index's fast
	// comparison), whole and cut short.
	for _, g := range flatGolden {
		inputs = append(inputs, []byte(g.in))
	}
	r2 := rand.New(rand.NewPCG(11, 12))
	for range n / 10 {
		doc := sharedPrefixDoc(r2)
		inputs = append(inputs, doc, doc[:1+r2.IntN(len(doc))]) // node skips empty lines
	}
	for _, in := range inputs {
		stdin.WriteString(base64.StdEncoding.EncodeToString(in))
		stdin.WriteByte('\n')
	}
	cmd := exec.CommandContext(testutil.Context(t), "node", "--input-type=commonjs", "-e", "(async () => {"+jcsNodeScript+"})()")
	cmd.Env = append(os.Environ(), "CANONICALIZE_JS="+lib)
	cmd.Stdin = &stdin
	cmd.Stderr = os.Stderr
	outp, err := cmd.Output()
	if err != nil {
		t.Fatalf("run node: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(outp))
	sc.Buffer(nil, 1<<24)
	agreedErr, agreedOK := 0, 0
	for i := 0; sc.Scan(); i++ {
		line := sc.Text()
		got, err := jcsOutput(inputs[i])
		if rest, ok := strings.CutPrefix(line, "ok "); ok {
			want, _ := base64.StdEncoding.DecodeString(rest)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("input %q\n got %q, %v\nnode %q", inputs[i], got, err, want)
			}
			agreedOK++
		} else {
			if err == nil {
				t.Fatalf("input %q: node says %q, we produced %q", inputs[i], line, got)
			}
			agreedErr++
		}
	}
	if agreedOK+agreedErr != len(inputs) {
		t.Fatalf("node answered %d of %d inputs", agreedOK+agreedErr, len(inputs))
	}
	t.Logf("agreed with node on %d canonical forms and %d errors", agreedOK, agreedErr)
}

func BenchmarkFingerprintSmall(b *testing.B) {
	args := []byte(`{"path":"/home/user/project/src/main.go","content":"package main\n\nfunc main() {}\n",` +
		`"options":{"overwrite":true,"mode":420,"encoding":"utf-8"},"tags":["a","b","c"]}`)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fingerprint(args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFingerprint64MBString(b *testing.B) {
	args, _ := bigStringArgs(64<<20, false)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fingerprint(args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFingerprint64MBEscapedString(b *testing.B) {
	args, _ := bigStringArgs(64<<20, true)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fingerprint(args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFingerprintNumberArray(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	var buf bytes.Buffer
	buf.WriteString(`{"embedding":[`)
	for i := range 1 << 20 {
		if i > 0 {
			buf.WriteByte(',')
		}
		if i%2 == 0 {
			buf.WriteString(strconv.FormatFloat(r.NormFloat64(), 'g', -1, 64))
		} else {
			buf.WriteString(strconv.FormatFloat(r.NormFloat64(), 'f', 6, 64))
		}
	}
	buf.WriteString(`]}`)
	args := buf.Bytes()
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fingerprint(args); err != nil {
			b.Fatal(err)
		}
	}
}

// memShapes builds inputs of about n bytes in the shapes that stress the
// index: nesting (objects in objects, objects in arrays in objects), many
// members, many small objects, and text that looks like structure.
func memShapes(n int) map[string][]byte {
	shapes := map[string][]byte{}
	d := n / 6
	shapes["nested objects"] = []byte(`{"x":` + strings.Repeat(`{"a":`, d) + "1" + strings.Repeat("}", d) + "}")
	k := n / 8
	shapes["objects in arrays in objects"] = []byte(strings.Repeat(`{"a":[`, k) + "1" + strings.Repeat("]}", k))
	shapes["nested arrays"] = []byte(strings.Repeat("[", n/2) + strings.Repeat("]", n/2))
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i*7919%1000003) + `":0`)
	}
	b.WriteByte('}')
	shapes["wide object"] = bytes.Clone(b.Bytes())
	b.Reset()
	b.WriteByte('[')
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"b":1,"a":{"d":[2],"c":3}}`)
	}
	b.WriteByte(']')
	shapes["many small objects"] = bytes.Clone(b.Bytes())
	shapes["minimal objects"] = []byte("[" + strings.Repeat(`{"":0},`, n/7) + "{}]")
	shapes["string of structure"] = []byte(`{"s":"` + strings.Repeat(`{\":`, n/4) + `"}`)
	shapes["escaped JSON in a string"] = []byte(`{"s":"` + strings.Repeat(`{\"k\":[1,{\"a\":\"\\u00e9\"}]},`, n/30) + `"}`)
	return shapes
}

// TestFingerprintMemoryIsProportional: what fingerprinting allocates is a
// small multiple of the input whatever its shape. The index it replaced
// took 57 times the input for nested objects (64 bytes a level, times the
// copies of five slices grown by append), 45 for objects in arrays, 22 for
// many small objects.
func TestFingerprintMemoryIsProportional(t *testing.T) {
	const size = 2 << 20
	for name, in := range memShapes(size) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Fingerprint(in)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Nested objects take 5 words a 6-byte level (3 in the index, 2 on
		// the writing pass's stack), objects in arrays in objects 7 words
		// an 8-byte level; 128 KiB is the writer's buffer.
		alloc := after.TotalAlloc - before.TotalAlloc
		if limit := 5*uint64(len(in)) + 128<<10; alloc > limit {
			t.Errorf("%s: fingerprinting %d bytes allocated %d bytes (%.1f times), over %d", name, len(in), alloc, float64(alloc)/float64(len(in)), limit)
		}
		t.Logf("%s: %.2f times the input", name, float64(alloc)/float64(len(in)))
	}
}

// typicalArgs builds tool arguments of about n bytes as an edit tool gets
// them: a few options and a list of small objects with strings to escape.
func typicalArgs(n int) []byte {
	r := rand.New(rand.NewPCG(7, 8))
	var b bytes.Buffer
	b.WriteString(`{"path":"/home/user/project/src/main.go","options":{"overwrite":true,"mode":420,"encoding":"utf-8"},"edits":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"oldText":"line %d\tof the file \"x\"","newText":"replacement %d","line":%d,"meta":{"author":"u%d","ts":%d.5}}`,
			i, r.IntN(1000), i*3, r.IntN(9), r.IntN(1e9))
	}
	b.WriteString(`],"dryRun":false}`)
	return b.Bytes()
}

// BenchmarkFingerprintShapes: typical arguments of 1 KB to 256 KB, and the
// shapes of memShapes at 1 MB.
func BenchmarkFingerprintShapes(b *testing.B) {
	type input struct {
		name string
		in   []byte
	}
	inputs := []input{{"typical1k", typicalArgs(1 << 10)}, {"typical8k", typicalArgs(8 << 10)}, {"typical256k", typicalArgs(256 << 10)}}
	shapes := memShapes(1 << 20)
	for _, k := range []string{"nested objects", "objects in arrays in objects", "wide object", "many small objects"} {
		inputs = append(inputs, input{strings.ReplaceAll(k, " ", "_"), shapes[k]})
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Fingerprint(in.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
