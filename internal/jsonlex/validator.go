package jsonlex

import (
	"encoding/binary"
	"math/bits"
)

// Validator is Valid for a value that arrives in pieces: Write each piece in order,
// then Valid says whether all of it was exactly one JSON value with only JSON
// whitespace around it — the same judgement as Valid of the whole. It keeps one bit
// per open container and a few bytes of state, never the input: a line streamed past
// the proxy is checked without being held. The zero value is ready for use.
type Validator struct {
	st     vstate
	after  vstate // in a string: the state once it ends (a key's colon, or next)
	sub    uint8  // in a string: 1 after a backslash, 2..5 in a \u escape; in a number its part; in a literal the bytes matched
	lit    string // the literal being matched
	depth  uint
	stack  []uint64 // one bit per open container, set for an object
	small  [4]uint64
	object bool // the innermost open container is an object
}

type vstate uint8

const (
	vValue      vstate = iota // expecting a value (the start, or after ':' / ',' in an array)
	vFirstValue               // just after '[': a value or ']'
	vFirstKey                 // just after '{': a key or '}'
	vKey                      // after ',' in an object: a key
	vColon                    // after a key: ':'
	vNext                     // after a value: ',' or the container's end
	vString                   // inside a string
	vNumber                   // inside a number
	vLiteral                  // inside true/false/null
	vDone                     // the value is over: whitespace only
	vBad
)

// Number parts (sub, in vNumber).
const (
	numSign  = iota // after '-': a digit
	numZero         // after a leading 0: '.', 'e' or the end
	numInt          // in the integer digits
	numDot          // after '.': a digit
	numFrac         // in the fraction digits
	numE            // after 'e': a sign or a digit
	numESign        // after the exponent's sign: a digit
	numExp          // in the exponent digits
)

// Broken reports that what was written can no longer be the start of a valid JSON
// text, whatever follows: a reader may stop feeding it.
func (v *Validator) Broken() bool { return v.st == vBad }

// Depth is how many containers are open: a reader bounds it (the stack costs a bit a
// level).
func (v *Validator) Depth() int { return int(v.depth) }

// Reset makes v ready for the next value.
func (v *Validator) Reset() {
	*v = Validator{stack: v.stack[:0]}
}

// Valid reports whether what was written is one whole JSON value.
func (v *Validator) Valid() bool {
	switch v.st {
	case vDone:
		return true
	case vNumber:
		// A number at the top ends with the input.
		return v.depth == 0 && (v.sub == numZero || v.sub == numInt || v.sub == numFrac || v.sub == numExp)
	}
	return false
}

// Write feeds the next piece. It never fails; Valid says the outcome.
func (v *Validator) Write(b []byte) (int, error) {
	for i := 0; i < len(b) && v.st != vBad; i++ {
		c := b[i]
		switch v.st {
		case vString:
			if v.sub == 0 {
				// Most bytes of a string are plain: skip them eight at a time while
				// none is special, then a table look each.
				for i+8 <= len(b) {
					if m := stringStop(binary.LittleEndian.Uint64(b[i:])); m != 0 {
						i += bits.TrailingZeros64(m) / 8
						break
					}
					i += 8
				}
				if i == len(b) {
					return len(b), nil
				}
				c = b[i]
				for plainInString[c] == 1 {
					if i++; i == len(b) {
						return len(b), nil
					}
					c = b[i]
				}
			}
			v.stringByte(c)
		case vNumber:
			if !v.numberByte(c) {
				// The number ended at c, which belongs to what follows it.
				v.st = v.afterValue()
				i--
			}
		case vLiteral:
			if c != v.lit[v.sub] {
				v.st = vBad
				break
			}
			if v.sub++; int(v.sub) == len(v.lit) {
				v.st = v.afterValue()
			}
		default:
			v.structural(c)
		}
	}
	return len(b), nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// afterValue is the state once a value has ended.
func (v *Validator) afterValue() vstate {
	if v.depth == 0 {
		return vDone
	}
	return vNext
}

func (v *Validator) structural(c byte) {
	if isSpace(c) {
		return
	}
	switch v.st {
	case vDone:
		v.st = vBad
	case vColon:
		if c != ':' {
			v.st = vBad
			return
		}
		v.st = vValue
	case vKey, vFirstKey:
		switch {
		case c == '"':
			v.st, v.after, v.sub = vString, vColon, 0
		case c == '}' && v.st == vFirstKey:
			v.pop()
		default:
			v.st = vBad
		}
	case vNext:
		switch {
		case c == ',' && v.object:
			v.st = vKey
		case c == ',':
			v.st = vValue
		case c == '}' && v.object, c == ']' && !v.object:
			v.pop()
		default:
			v.st = vBad
		}
	case vValue, vFirstValue:
		if c == ']' && v.st == vFirstValue {
			v.pop()
			return
		}
		v.startValue(c)
	}
}

func (v *Validator) startValue(c byte) {
	switch {
	case c == '{' || c == '[':
		v.push(c == '{')
		if c == '{' {
			v.st = vFirstKey
		} else {
			v.st = vFirstValue
		}
	case c == '"':
		v.st, v.after, v.sub = vString, 0, 0
	case c == '-':
		v.st, v.sub = vNumber, numSign
	case c == '0':
		v.st, v.sub = vNumber, numZero
	case '1' <= c && c <= '9':
		v.st, v.sub = vNumber, numInt
	case c == 't':
		v.st, v.lit, v.sub = vLiteral, "true", 1
	case c == 'f':
		v.st, v.lit, v.sub = vLiteral, "false", 1
	case c == 'n':
		v.st, v.lit, v.sub = vLiteral, "null", 1
	default:
		v.st = vBad
	}
}

func (v *Validator) push(object bool) {
	if v.stack == nil {
		v.stack = v.small[:0]
	}
	if v.depth/64 == uint(len(v.stack)) {
		v.stack = append(v.stack, 0)
	}
	if object {
		v.stack[v.depth/64] |= 1 << (v.depth % 64)
	} else {
		v.stack[v.depth/64] &^= 1 << (v.depth % 64)
	}
	v.depth++
	v.object = object
}

func (v *Validator) pop() {
	v.depth--
	if v.depth > 0 {
		d := v.depth - 1
		v.object = v.stack[d/64]&(1<<(d%64)) != 0
	}
	v.st = v.afterValue()
}

func (v *Validator) stringByte(c byte) {
	switch {
	case v.sub == 1:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			v.sub = 0
		case 'u':
			v.sub = 2
		default:
			v.st = vBad
		}
	case v.sub >= 2:
		if !isHex(c) {
			v.st = vBad
			return
		}
		if v.sub++; v.sub == 6 {
			v.sub = 0
		}
	case c == '"':
		if v.after == vColon {
			v.st = vColon
		} else {
			v.st = v.afterValue()
		}
	case c == '\\':
		v.sub = 1
	case c < 0x20:
		v.st = vBad
	}
}

// numberByte takes c as the number's next byte, reporting false when c is not part
// of it (the number ended before c: fine only in a part that may end).
func (v *Validator) numberByte(c byte) bool {
	digit := '0' <= c && c <= '9'
	switch v.sub {
	case numSign:
		switch {
		case c == '0':
			v.sub = numZero
		case digit:
			v.sub = numInt
		default:
			v.st = vBad
			return true
		}
	case numZero, numInt:
		switch {
		case digit && v.sub == numInt:
		case c == '.':
			v.sub = numDot
		case c == 'e' || c == 'E':
			v.sub = numE
		case digit: // a digit after a leading 0
			v.st = vBad
			return true
		default:
			return false
		}
	case numDot:
		if !digit {
			v.st = vBad
			return true
		}
		v.sub = numFrac
	case numFrac:
		switch {
		case digit:
		case c == 'e' || c == 'E':
			v.sub = numE
		default:
			return false
		}
	case numE:
		switch {
		case c == '+' || c == '-':
			v.sub = numESign
		case digit:
			v.sub = numExp
		default:
			v.st = vBad
			return true
		}
	case numESign:
		if !digit {
			v.st = vBad
			return true
		}
		v.sub = numExp
	case numExp:
		if !digit {
			return false
		}
	}
	return true
}
