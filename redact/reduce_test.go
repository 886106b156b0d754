package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// writeSplit writes in to r in fragments whose sizes come from seed (0: whole).
func writeSplit(r *Reducer, in []byte, seed uint64) {
	if seed == 0 {
		r.Write(in)
		return
	}
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	most := 1 + int(seed%9000)
	least := len(in) / 4096 // a few thousand fragments at most: each costs a few hash calls
	for len(in) > 0 {
		k := min(len(in), max(least, 1+rng.IntN(most)))
		r.Write(in[:k])
		in = in[k:]
	}
}

// sameReduced fails t unless a Reducer fed in (split by seed) reports what Report
// reports on the whole, or, in the one documented non-exact case (the stand-in
// outgrew maxStandIn), the summary of the whole text.
func sameReduced(t testing.TB, r *Reducer, in []byte, budget int, seed uint64) {
	t.Helper()
	r.Reset()
	writeSplit(r, in, seed)
	got, clipped := r.Report(budget)
	want, wantClipped := Report(in, budget)
	if r.sh.over {
		if !clipped || !(bytes.HasPrefix(got, []byte(`"[clipped text, `)) || len(got) < 12) {
			t.Fatalf("over the stand-in's bound, the report of %d bytes is %.200q, not the summary", len(in), got)
		}
		return
	}
	if !bytes.Equal(got, want) || clipped != wantClipped {
		t.Fatalf("reduced report of %.300q (%d bytes, budget %d, split %d) =\n%.2000s %v\nReport gives\n%.2000s %v",
			in, len(in), budget, seed, got, clipped, want, wantClipped)
	}
	if n := r.Retained(); n > maxStandIn+plainKeep+64<<10 {
		t.Fatalf("the reducer holds %d bytes", n)
	}
}

// grown builds from in one of the big shapes the Reducer cuts (mode picks which): in as
// a long text item, repeated as array items and object members, nested deep, and held
// as JSON text in a long string with a secret.
func grown(in []byte, mode uint8) []byte {
	rep := func(n int, sep string) string {
		if len(in) == 0 {
			return strings.Repeat(" ", n)
		}
		var b strings.Builder
		for b.Len() < n {
			if b.Len() > 0 {
				b.WriteString(sep)
			}
			b.Write(in)
		}
		return b.String()
	}
	asResult := func(s string) []byte {
		return must(json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}))
	}
	switch mode % 8 {
	case 1:
		return asResult(rep(stubAt+200, ""))
	case 2:
		return []byte("[" + rep(150*max(len(in), 1), ",") + "]")
	case 3:
		return []byte(strings.Repeat("[", 40) + string(in) + strings.Repeat("]", 40))
	case 4:
		var b strings.Builder
		b.WriteString("{")
		for i := 0; i < 1030; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"k%d":`, i)
			b.Write(in)
		}
		b.WriteString("}")
		return []byte(b.String())
	case 5:
		return asResult(`{"password":"hunter2-Zq9x","pad":"` + strings.Repeat("x", stubAt) + `","v":` + string(in) + `}`)
	case 6:
		return asResult(string(asResult(`{"token":"Zq9xK2mPv7Lw4","v":[` + rep(stubAt*2, ",") + `]}`)))
	case 7:
		return []byte(`{"a":"` + strings.Repeat("é\\u00e9\\\"", stubAt/3) + string(in) + `"}`)
	}
	return in
}

func TestReducerMatchesReport(t *testing.T) {
	var r Reducer
	ins := differentialInputs(t)
	for _, in := range ins {
		for mode := uint8(0); mode < 8; mode++ {
			if mode > 0 && len(in) > 8<<10 {
				break
			}
			g := grown(in, mode)
			for _, budget := range []int{0, 700, 40} {
				for _, seed := range []uint64{1 + uint64(mode), 4099} {
					sameReduced(t, &r, g, budget, seed)
				}
			}
		}
	}
}

// TestReducerHidesEmbeddedSecret: a string holding JSON is shown as JSON, its secret
// redacted, whatever its size up to innerMax, when the string is cut and its JSON is
// not in the stand-in.
func TestReducerHidesEmbeddedSecret(t *testing.T) {
	const secret = "Zq9xK2mPv7Lw4-secret"
	var r Reducer
	for _, n := range []int{100, stubAt, 64 << 10, 1 << 20, innerMax + 10} {
		inner := `{"items":[` + strings.Repeat(`{"a":"b"},`, n/10) + `{"password":"` + secret + `"}],"password":"` + secret + `"}`
		in := must(json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": inner}}}))
		for _, budget := range []int{0, 700} {
			sameReduced(t, &r, in, budget, 0)
			sameReduced(t, &r, in, budget, 4093)
			if out, _ := r.Report(budget); bytes.Contains(out, []byte(secret)) {
				t.Errorf("the report of a %d-byte embedded JSON shows its secret: %.300s", n, out)
			}
		}
	}
}

// TestReducerOverBound: a value whose stand-in would outgrow maxStandIn gets the
// summary, and nothing of it.
func TestReducerOverBound(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("[")
	for i := 0; i < 100; i++ {
		b.WriteString(`{"password":"Zq9xK2mPv7Lw4",`)
		for j := 0; j < 1000; j++ {
			fmt.Fprintf(&b, `"m%d":"%s",`, j, strings.Repeat("v", 40))
		}
		b.WriteString(`"end":1},`)
	}
	b.WriteString("1]")
	var r Reducer
	writeSplit(&r, b.Bytes(), 99)
	out, clipped := r.Report(0)
	if !r.sh.over || !clipped || !bytes.HasPrefix(out, []byte(`"[clipped text, `)) {
		t.Fatalf("over = %v, report %.200s", r.sh.over, out)
	}
	if r.Retained() > plainKeep+8<<10 {
		t.Errorf("over the bound the reducer still holds %d bytes", r.Retained())
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestReducerMemory: a 64 MB text result and a 16 MB image, streamed in 64 KiB
// fragments that are never held together, leave the reducer holding well under 1 MB.
func TestReducerMemory(t *testing.T) {
	line := []byte("The quick brown fox jumps over the lazy dog; see https://example.com/a?b=c for more.\\n")
	img := make([]byte, 48<<10) // 64 KiB of base64 a fragment
	for i := range img {
		img[i] = byte(i*7 + i>>8)
	}
	imgB64 := []byte(base64.StdEncoding.EncodeToString(img))
	for _, c := range []struct {
		name       string
		head, tail string
		frag       []byte
		n          int
	}{
		{"64MB text", `{"content":[{"type":"text","text":"`, `"}]}`, bytes.Repeat(line, (64<<10)/len(line)), 1024},
		{"16MB image", `{"content":[{"type":"image","mimeType":"image/png","data":"`, `"}]}`, imgB64, 256},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := new(Reducer)
			r.Write([]byte(c.head))
			frag := make([]byte, len(c.frag))
			for i := 0; i < c.n; i++ {
				copy(frag, c.frag) // the caller's buffer, reused
				r.Write(frag)
			}
			r.Write([]byte(c.tail))
			// what the reducer holds: the live heap with it, less the live heap without
			with := heapInUse()
			retained := r.Retained()
			out, clipped := r.Report(0)
			runtime.KeepAlive(r)
			r = nil
			held := uint64(0)
			if without := heapInUse(); with > without {
				held = with - without
			}
			if !clipped || !bytes.Contains(out, []byte("[clipped ")) {
				t.Errorf("report %.300s", out)
			}
			if retained > 64<<10 || held > 512<<10 {
				t.Errorf("holds %d bytes by its count, %d by the heap's", retained, held)
			}
			t.Logf("%s: retained %d bytes by its count, %d by the heap's; report %d bytes", c.name, retained, held, len(out))
		})
	}
}

// TestReducerStreamsMatchWhole holds the big shapes of the memory test to Report's
// report of the same bytes whole (at a size Report can be run on here).
func TestReducerStreamsMatchWhole(t *testing.T) {
	var r Reducer
	for _, in := range [][]byte{bigText(8 << 20), bigImage(4 << 20), bigArray(50000)} {
		for _, budget := range []int{0, 700} {
			sameReduced(t, &r, in, budget, 65536)
			// cut off: not JSON, so the first bytes as text, with the whole's length and hash
			sameReduced(t, &r, in[:len(in)/2], budget, 65536)
			// something after it
			sameReduced(t, &r, append(in[:len(in):len(in)], " x"...), budget, 65536)
		}
	}
}

// TestReducerEdgeShapes: long keys, top-level long strings, pairs and flags whose value
// is cut, media and name/value look-ahead, JSON held after long white space or with
// long escapes, and escapes (a \u pair among them) straddling the kept part's end.
func TestReducerEdgeShapes(t *testing.T) {
	var r Reducer
	long := strings.Repeat("ab\\u00e9c", 2000)
	var ins []string
	for _, s := range []string{
		`{"` + long + `password": 1, "x": "` + long + `"}`,
		`"` + long + `"`,
		`  "` + long + `"  `,
		`["X-Api-Key", "` + long + `"]`,
		`["--password", "` + long + `", "-p", "` + long + `"]`,
		`[{"name":"API_KEY","value":"` + long + `"}]`,
		`{"value":"` + long + `","name":"token"}`,
		`{"data":"` + strings.Repeat("QUJD", 3000) + `","type":"image"}`,
		`"` + strings.Repeat(" ", 5000) + `{\"password\":\"hunter22\"}"`,
		`"{\"password\":\"hunter22\",\"x\":\"` + strings.Repeat(`\\\"`, 3000) + `\"}"`,
		`"{\"a\":\"` + strings.Repeat("\\\\u0041", 3000) + `\"}"`,
		`{"a":"` + strings.Repeat("x", 5000) + `\ud83d\ude00` + `"}`,
	} {
		ins = append(ins, s)
	}
	for k := stubAt - 16; k < stubAt+16; k++ {
		ins = append(ins, `{"a":"`+strings.Repeat("x", k)+`\ud83d\ude00\n\"`+strings.Repeat("y", 300)+`"}`)
		ins = append(ins, `"{\"password\":\"hunter22\",\"x\":\"`+strings.Repeat("x", k)+`\\ud83d\\ude00\"}"`)
	}
	for _, s := range ins {
		for _, b := range []int{0, 700, 256, 100} {
			for _, seed := range []uint64{0, 1, 5, 4099} {
				sameReduced(t, &r, []byte(s), b, seed)
			}
		}
	}
}

// FuzzReducer: any bytes, grown into any big shape, split anywhere: the reduced
// report is Report's (or the summary, over the bound).
func FuzzReducer(f *testing.F) {
	for _, in := range differentialInputs(f) {
		if len(in) < 8<<10 {
			f.Add(in, uint8(0), uint64(0), uint16(0))
			f.Add(in, uint8(1), uint64(13), uint16(300))
			f.Add(in, uint8(5), uint64(4099), uint16(0))
		}
	}
	var r Reducer
	f.Fuzz(func(t *testing.T, in []byte, mode uint8, seed uint64, b uint16) {
		budget := int(b)
		if b%7 == 0 {
			budget = 0
		}
		sameReduced(t, &r, grown(in, mode), budget, seed)
	})
}

func benchReducer(b *testing.B, in []byte) {
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	var r Reducer
	for b.Loop() {
		r.Reset()
		for p := in; len(p) > 0; {
			k := min(len(p), 64<<10)
			r.Write(p[:k])
			p = p[k:]
		}
		r.Report(0)
	}
}

func BenchmarkReducerText64MB(b *testing.B)  { benchReducer(b, bigText(64<<20)) }
func BenchmarkReducerImage16MB(b *testing.B) { benchReducer(b, bigImage(16<<20)) }
func BenchmarkReducerArray(b *testing.B)     { benchReducer(b, bigArray(100000)) }
func BenchmarkReducerSmallArgs(b *testing.B) { benchReducer(b, []byte(smallArgs)) }
