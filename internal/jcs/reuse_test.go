package jcs

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// reused returns a Fingerprinter that has fingerprinted other values before: a big one
// (its scanner's slices outgrew the workspace), one with a lone surrogate (the dry
// run), and one that failed.
func reused() *Fingerprinter {
	f := new(Fingerprinter)
	var big strings.Builder
	big.WriteString(`{`)
	for i := range 300 {
		if i > 0 {
			big.WriteString(",")
		}
		big.WriteString(`"k` + strings.Repeat("z", i%7) + string(rune('a'+i%26)) + `":{"x":[1,2,{"y":"` + strings.Repeat("v", i) + `"}]}`)
	}
	big.WriteString(`}`)
	f.Fingerprint([]byte(big.String()))
	f.Fingerprint([]byte(`{"a":"\ud800","a":1}`))
	f.Fingerprint([]byte(`{"a":`))
	return f
}

func TestFingerprinterMatchesFingerprint(t *testing.T) {
	vf := loadFingerprintVectors(t)
	f := reused()
	for _, v := range vf.Vectors {
		args, _ := withoutTopLevelKey(t, []byte(v.Arguments), vf.CorrelationKey)
		got, err := f.Fingerprint(args)
		if err != nil || got != v.Fingerprint {
			t.Fatalf("Fingerprinter.Fingerprint(%.80s) = %s, %v; want %s", args, got, err, v.Fingerprint)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		var b bytes.Buffer
		randomJSON(r, &b, 0)
		want, wantErr := Fingerprint(b.Bytes())
		got, err := f.Fingerprint(b.Bytes())
		if got != want || (err == nil) != (wantErr == nil) {
			t.Fatalf("Fingerprinter.Fingerprint(%.80s) = %s, %v; Fingerprint gives %s, %v", b.Bytes(), got, err, want, wantErr)
		}
	}
}

// A Canonicalizer must not keep, or reset, a *bufio.Writer it was given: NewWriterSize
// returns such a writer itself when it is big enough.
func TestCanonicalizerLeavesTheCallersWriterAlone(t *testing.T) {
	var c Canonicalizer
	var out bytes.Buffer
	w := bufio.NewWriterSize(&out, 1<<20)
	w.WriteString("before ")
	if err := c.Canonicalize(w, []byte(`{"b":1,"a":2}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.Canonicalize(&bytes.Buffer{}, []byte(`[3]`)); err != nil {
		t.Fatal(err)
	}
	w.WriteString(" after")
	w.Flush()
	if got, want := out.String(), `before {"a":2,"b":1} after`; got != want {
		t.Fatalf("the caller's writer holds %q, want %q", got, want)
	}
}

func BenchmarkFingerprinterSmall(b *testing.B) {
	args := []byte(`{"owner":"bir-dev","repo":"bir-proxy","title":"Relay drops unknown fields","labels":["bug","relay"],"milestone":3,"draft":false}`)
	b.Run("Fingerprint", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Fingerprint(args)
		}
	})
	b.Run("Fingerprinter", func(b *testing.B) {
		var f Fingerprinter
		b.ReportAllocs()
		for b.Loop() {
			f.Fingerprint(args)
		}
	})
}

// FuzzFingerprinter: a Fingerprinter used before gives what Fingerprint gives.
func FuzzFingerprinter(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `"\ud800"`, `{"a":"\ud800","a":0}`, `1e400`, `[[[[{}]]]]`, `[1,]`, ` null `, `{"b":[1,{"c":"\u0000"}],"a":"é"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := Fingerprint(data)
		got, err := reused().Fingerprint(data)
		if got != want || (err == nil) != (wantErr == nil) {
			t.Fatalf("Fingerprinter.Fingerprint(%q) = %s, %v; Fingerprint gives %s, %v", data, got, err, want, wantErr)
		}
	})
}
