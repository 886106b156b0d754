package jsonlex

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
)

// JSNumber is the number a JavaScript host makes of the id raw: JSON.parse's double
// for a number literal, Number() of the text for a string literal (a TypeScript SDK
// host matches answers by Number(response.id), so the id "1", 1.0000000000000001 and
// 0.1e1 all answer its request 1). ok is false when it is NaN (any other literal, or
// text that is no number).
//
// The work is linear in raw, whatever it holds: a number is reduced to at most
// maxDigits significant digits (and a sticky last one) and a bounded exponent before
// strconv.ParseFloat reads it, so a megabyte of digits or an exponent of a million
// digits is read once; ParseFloat alone saturates exponents at 10^5 and would read
// "1" + a million zeros + "e-1000000" as +Inf where JavaScript reads 1.
func JSNumber(raw []byte) (float64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	if raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9' {
		return decimal(string(raw))
	}
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return 0, false
	}
	s, ok := DecodeString(raw)
	if !ok {
		return 0, false
	}
	return jsStringNumber(s)
}

// jsStringNumber is JavaScript's StringToNumber of s.
func jsStringNumber(s string) (float64, bool) {
	s = strings.TrimFunc(s, func(r rune) bool {
		// JavaScript's StrWhiteSpaceChar: white space and line terminators.
		return r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r' || r == '\u2028' || r == '\u2029' || r == '\ufeff' || unicode.Is(unicode.Zs, r)
	})
	switch s {
	case "":
		return 0, true
	case "Infinity", "+Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	}
	if len(s) > 2 && s[0] == '0' {
		switch s[1] {
		case 'x', 'X':
			return radix(s[2:], 16, 4)
		case 'o', 'O':
			return radix(s[2:], 8, 3)
		case 'b', 'B':
			return radix(s[2:], 2, 1)
		}
	}
	return decimal(s)
}

// radix is the value of the digits s in base (bits each), rounded to the nearest
// double, ties to even, as V8 rounds them: no sign, no separator.
func radix(s string, base, bits int) (float64, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		d := 99
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case c >= 'a' && c <= 'z':
			d = int(c-'a') + 10
		case c >= 'A' && c <= 'Z':
			d = int(c-'A') + 10
		}
		if d >= base {
			return 0, false
		}
	}
	s = strings.TrimLeft(s, "0")
	if len(s)*bits > 1024+bits {
		// At least 2^1024: past the largest double.
		return math.Inf(1), true
	}
	if s == "" {
		return 0, true
	}
	n, ok := new(big.Int).SetString(s, base)
	if !ok {
		return 0, false
	}
	f, _ := new(big.Float).SetInt(n).Float64()
	return f, true
}

// maxDigits is how many significant digits decide a double's rounding: a halfway
// case has at most 767, so 800 and a sticky digit for the rest round as all of them.
const maxDigits = 800

// decimal is JavaScript's StrDecimalLiteral s (a JSON number is one) as a double:
// [+-] digits [. digits] [(e|E) [+-] digits], the digits on at least one side of the
// point.
func decimal(s string) (float64, bool) {
	i, neg := 0, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	// The significant digits (from the first that is not 0), and the power of ten
	// of the first: the value is 0.sig × 10^point.
	var sig []byte
	point, digits, trailing := 0, 0, 0
	seenPoint := false
	for ; i < len(s); i++ {
		c := s[i]
		if c == '.' && !seenPoint {
			seenPoint = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		digits++
		switch {
		case c == '0' && len(sig) == 0 && trailing == 0:
			if seenPoint {
				point-- // a leading zero after the point
			}
			continue
		case c == '0':
			trailing++ // kept only if a digit that is not 0 comes after
		default:
			if len(sig) < maxDigits {
				for ; trailing > 0 && len(sig) < maxDigits; trailing-- {
					sig = append(sig, '0')
				}
			}
			if len(sig) < maxDigits {
				sig = append(sig, c)
			} else {
				sig = append(sig[:maxDigits], '1') // sticky: something past them
			}
			trailing = 0
		}
		if !seenPoint {
			point++
		}
	}
	if digits == 0 {
		return 0, false
	}
	// point counted every integer digit once sig started, and trailing zeros of the
	// integer part too (they are in the count, not in sig).
	exp := int64(0)
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		n := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if exp < 1e12 {
				exp = exp*10 + int64(s[i]-'0') // saturated: 10^12 is past any double
			}
			n++
		}
		if n == 0 {
			return 0, false
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return 0, false
	}
	if len(sig) == 0 {
		if neg {
			return math.Copysign(0, -1), true
		}
		return 0, true
	}
	e := int64(point) + exp
	var f float64
	switch {
	case e > 400: // at least 10^399
		f = math.Inf(1)
	case e < -400: // less than 10^-400: rounds to 0
		f = 0
	default:
		b := make([]byte, 0, len(sig)+16)
		b = append(append(append(b, "0."...), sig...), 'e')
		b = strconv.AppendInt(b, e, 10)
		f, _ = strconv.ParseFloat(string(b), 64) // ErrRange gives ±Inf or 0, as JS does
	}
	if neg {
		f = -f
	}
	return f, true
}
