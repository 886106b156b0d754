package jsonlex

import (
	"strings"
	"testing"
)

// FuzzValidator is the differential check of the streaming Validator against Valid:
// for any input cut into pieces anywhere, the two agree.
func FuzzValidator(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,-0.5e+3,"x\u00e9\"",true,false,null,{}],"b":{}}`, ` [ ] `, `0`, `-`, `01`, `1.`, `1e`, `"\u12"`,
		`{"a" 1}`, `{,}`, `[1,]`, `{"a":1,}`, "\"\x01\"", `tru`, `nul`, `[[[[[[]]]]]]`, `{"a":1}}`, `1 2`, "\t{}\r\n", `"`, ``, `123`, `-12.5E-7 `,
	} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, in []byte, step int) {
		step = 1 + int(uint(step)%17)
		var v Validator
		for i := 0; i < len(in); i += step {
			v.Write(in[i:min(i+step, len(in))])
		}
		if got, want := v.Valid(), Valid(in); got != want {
			t.Fatalf("Validator in pieces of %d says %v, Valid %v, for %q", step, got, want, in)
		}
		v.Reset()
		v.Write(in)
		if got, want := v.Valid(), Valid(in); got != want {
			t.Fatalf("Validator whole says %v, Valid %v, for %q", got, want, in)
		}
	})
}

func TestValidatorDeep(t *testing.T) {
	var v Validator
	for range 100000 {
		v.Write([]byte("["))
	}
	for range 100000 {
		v.Write([]byte("]"))
	}
	if !v.Valid() {
		t.Fatal("100000 levels of [] are valid")
	}
}

func TestStringStop(t *testing.T) {
	for i := range 8 {
		for _, c := range []byte{0, 0x1f, '"', '\\'} {
			b := []byte("abcdefgh")
			b[i] = c
			if stringStop(leUint64(b)) == 0 {
				t.Fatalf("%q: not special", b)
			}
		}
		b := []byte("abcdefgh")
		b[i] = 0xe9
		if stringStop(leUint64(b)) != 0 {
			t.Fatalf("%q: special", b)
		}
	}
	if stringStop(leUint64([]byte(" !#[]~\x7f\xff"))) != 0 {
		t.Fatal("plain bytes said special")
	}
}

func leUint64(b []byte) uint64 {
	var x uint64
	for i := 7; i >= 0; i-- {
		x = x<<8 | uint64(b[i])
	}
	return x
}

func BenchmarkValidatorString(b *testing.B) {
	line := []byte(`{"id":1,"result":{"content":[{"type":"text","text":"` + string(make([]byte, 0)) + strings.Repeat("abcdefghij", 100000) + `"}]}}`)
	b.SetBytes(int64(len(line)))
	var v Validator
	for b.Loop() {
		v.Reset()
		v.Write(line)
	}
	if !v.Valid() {
		b.Fatal("invalid")
	}
}

func BenchmarkValidWhole(b *testing.B) {
	line := []byte(`{"id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("abcdefghij", 100000) + `"}]}}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if !Valid(line) {
			b.Fatal("invalid")
		}
	}
}
