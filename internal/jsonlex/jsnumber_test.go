package jsonlex

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// TestJSNumber: ids as a JavaScript host reads them (the values are node's, v20:
// Number(JSON.parse(id))), megabytes of padding, leading zeros, digits and exponent
// among them, read once each.
func TestJSNumber(t *testing.T) {
	const mb = 1 << 20
	inf := math.Inf(1)
	for _, c := range []struct {
		id   string
		want float64
		ok   bool
	}{
		{"1", 1, true},
		{"1.0000000000000001", 1, true},
		{"0.99999999999999999", 1, true},
		{"1." + strings.Repeat("0", 80), 1, true},
		{"0." + strings.Repeat("0", 70) + "1e71", 1, true},
		{"9007199254740993", 9007199254740992, true},
		{"9007199254740995", 9007199254740996, true},
		{"-0", math.Copysign(0, -1), true},
		{"1e400", inf, true},
		{"-1e400", -inf, true},
		{"1e-400", 0, true},
		{"1" + strings.Repeat("0", mb) + "e-" + strconv.Itoa(mb), 1, true},
		{"0." + strings.Repeat("0", mb) + "1e" + strconv.Itoa(mb+1), 1, true},
		{"1e" + strings.Repeat("9", mb), inf, true},
		{"1e-" + strings.Repeat("9", mb), 0, true},
		{"1" + strings.Repeat("0", mb), inf, true},
		{"2." + strings.Repeat("0", mb) + "1", 2, true},
		// Halfway between 1 and its next double, then a 1 a megabyte later: up.
		{"1.00000000000000011102230246251565404236316680908203125", 1, true},
		{"1.00000000000000011102230246251565404236316680908203125" + strings.Repeat("0", mb) + "1", 1.0000000000000002, true},
		{`"1"`, 1, true},
		{`" 1\n"`, 1, true},
		{`"\u00a0\u20281.5\ufeff"`, 1.5, true},
		{`""`, 0, true},
		{`"  "`, 0, true},
		{`"0x1"`, 1, true},
		{`"0X20000000000001"`, 9007199254740992, true},
		{`"0x20000000000003"`, 9007199254740996, true},
		{`"0b101"`, 5, true},
		{`"0o17"`, 15, true},
		{`"0x` + strings.Repeat("0", mb) + `1"`, 1, true},
		{`"0x` + strings.Repeat("f", mb) + `"`, inf, true},
		{`"0x` + strings.Repeat("f", 256) + `"`, inf, true},
		{`"0x1` + strings.Repeat("0", 256) + `"`, inf, true},
		{`"0x1` + strings.Repeat("0", 255) + `"`, math.Ldexp(1, 1020), true},
		{`"0x` + strings.Repeat("0", mb) + `1` + strings.Repeat("0", 255) + `"`, math.Ldexp(1, 1020), true},
		{`"Infinity"`, inf, true},
		{`"-Infinity"`, -inf, true},
		{`"+.5"`, 0.5, true},
		{`"5."`, 5, true},
		{`"00012"`, 12, true},
		{`"` + strings.Repeat(" ", mb) + `7"`, 7, true},
		{`"1e0"`, 1, true},
		{`"0b"`, 0, false},
		{`"00x1"`, 0, false},
		{`"-0x1"`, 0, false},
		{`"1e"`, 0, false},
		{`".e1"`, 0, false},
		{`"."`, 0, false},
		{`"1_0"`, 0, false},
		{`"inf"`, 0, false},
		{`"infinity"`, 0, false},
		{`"NaN"`, 0, false},
		{`"0x1p3"`, 0, false},
		{`"1 2"`, 0, false},
		{`"0x1g"`, 0, false},
		{`"a"`, 0, false},
		{"null", 0, false},
		{"true", 0, false},
		{"", 0, false},
		{`"0`, 0, false},
		{`"`, 0, false},
	} {
		got, ok := JSNumber([]byte(c.id))
		if ok != c.ok || ok && (got != c.want || math.Signbit(got) != math.Signbit(c.want)) {
			t.Errorf("JSNumber(%.60q…) = %v, %v; want %v, %v", c.id, got, ok, c.want, c.ok)
		}
	}
}

// FuzzJSNumber: a decimal is the double nearest its exact value (big.Rat), ties to
// even; a radix string too; and nothing panics.
func FuzzJSNumber(f *testing.F) {
	for _, s := range []string{"1", "1.0000000000000001", "-0.5e-3", "1e400", `"0x1f"`, `" 12 "`, `"0b"`, `".5"`, "0.1e1", `"Infinity"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := JSNumber(raw)
		if len(raw) > 2000 {
			return
		}
		s := string(raw)
		if s != "" && s[0] == '"' {
			d, dok := DecodeString(raw)
			dok = dok && len(s) >= 2 && s[len(s)-1] == '"'
			if !dok {
				if ok {
					t.Fatalf("JSNumber(%q) = %v for a literal that is no string", raw, got)
				}
				return
			}
			if strings.TrimSpace(d) != d || d == "" {
				return // white space, and "" (0): the table's
			}
			s = d
			if len(s) > 2 && s[0] == '0' && strings.ContainsRune("xXoObB", rune(s[1])) {
				base := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[s[1]]
				n, nok := new(big.Int).SetString(s[2:], base)
				nok = nok && !strings.ContainsAny(s[2:], "+-_")
				if nok != ok {
					t.Fatalf("JSNumber(%q) ok %v, big.Int %v", raw, ok, nok)
				}
				if ok {
					want, _ := new(big.Float).SetInt(n).Float64()
					if want != got {
						t.Fatalf("JSNumber(%q) = %v, want %v", raw, got, want)
					}
				}
				return
			}
		}
		if i := strings.IndexAny(s, "eE"); !ok || strings.HasSuffix(s, "Infinity") || i >= 0 && len(strings.TrimLeft(s[i+1:], "+-0")) > 3 {
			return // big.Rat reads exponents by multiplication: only small ones
		}
		r, rok := new(big.Rat).SetString(strings.TrimPrefix(s, "+"))
		if !rok {
			t.Fatalf("JSNumber(%q) = %v, big.Rat cannot read it", raw, got)
		}
		if want, _ := r.Float64(); want != got {
			t.Fatalf("JSNumber(%q) = %v, want %v", raw, got, want)
		}
	})
}
