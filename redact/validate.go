package redact

// validator is jsonlex.Valid fed in fragments: it says whether the bytes written so
// far, taken whole, are one valid JSON text. A Reducer of embedded JSON runs one over
// the decoded string, since the renderer shows a string as JSON only when all of it
// is valid (innerDoc). It keeps one bit per open container, up to maxValidDepth.
type validator struct {
	st    uint8
	num   uint8 // the number state while st is vNum
	key   bool  // the string being read is an object key
	esc   bool  // after a backslash in a string
	hex   uint8 // \u digits still to come
	lit   string
	li    int
	depth int
	stack []uint64 // bit set: the container at that depth is an object
	dead  bool
	deep  bool // more nesting than maxValidDepth: given up on, not judged
}

// maxValidDepth bounds the nesting a validator follows (its stack is a bit a level).
const maxValidDepth = 1 << 16

const (
	vValue    uint8 = iota // a value must start (white space first)
	vArrFirst              // after '[': a value or ']'
	vObjFirst              // after '{': a key or '}'
	vKey                   // after ',' in an object: a key
	vColon                 // after a key
	vNext                  // after a value: ',' or a closer (only space at the top)
	vStr                   // in a string
	vNum                   // in a number
	vLit                   // in true, false or null
)

// Number states: after '-', after a leading 0, in the integer digits, after '.', in
// the fraction, after 'e', after its sign, in the exponent.
const (
	nSign uint8 = iota
	nZero
	nInt
	nDot
	nFrac
	nE
	nESign
	nExp
)

func numberDone(n uint8) bool { return n == nZero || n == nInt || n == nFrac || n == nExp }

func (v *validator) write(p []byte) {
	for i := 0; i < len(p) && !v.dead; i++ {
		c := p[i]
		switch v.st {
		case vStr:
			if v.esc {
				v.esc = false
				switch c {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				case 'u':
					v.hex = 4
				default:
					v.dead = true
				}
				continue
			}
			if v.hex > 0 {
				if hexValue(c) < 0 {
					v.dead = true
				}
				v.hex--
				continue
			}
			// the plain run of the string at once
			j := i
			for j < len(p) && plainInStr(p[j]) {
				j++
			}
			if j == len(p) {
				i = j
				continue
			}
			i = j
			switch c = p[i]; {
			case c == '"':
				if v.key {
					v.st = vColon
				} else {
					v.st = vNext
				}
			case c == '\\':
				v.esc = true
			default: // a control character
				v.dead = true
			}
		case vNum:
			if v.numByte(c) {
				continue
			}
			if !numberDone(v.num) {
				v.dead = true
				continue
			}
			v.st = vNext
			i-- // the byte after the number is read as what follows a value
		case vLit:
			if c != v.lit[v.li] {
				v.dead = true
				continue
			}
			if v.li++; v.li == len(v.lit) {
				v.st = vNext
			}
		default:
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				continue
			}
			v.token(c)
		}
	}
}

// numByte takes c into the number being read, or says it is not part of it.
func (v *validator) numByte(c byte) bool {
	digit := '0' <= c && c <= '9'
	switch v.num {
	case nSign:
		switch {
		case c == '0':
			v.num = nZero
		case digit:
			v.num = nInt
		default:
			return false
		}
	case nZero, nInt:
		switch {
		case digit && v.num == nInt:
		case c == '.':
			v.num = nDot
		case c == 'e' || c == 'E':
			v.num = nE
		default:
			return false
		}
	case nDot, nFrac:
		switch {
		case digit:
			v.num = nFrac
		case v.num == nFrac && (c == 'e' || c == 'E'):
			v.num = nE
		default:
			return false
		}
	case nE:
		switch {
		case c == '+' || c == '-':
			v.num = nESign
		case digit:
			v.num = nExp
		default:
			return false
		}
	case nESign, nExp:
		if !digit {
			return false
		}
		v.num = nExp
	}
	return true
}

// token reads the non-space byte c in a state between tokens.
func (v *validator) token(c byte) {
	switch v.st {
	case vObjFirst:
		if c == '}' {
			v.close()
			return
		}
		fallthrough
	case vKey:
		if c != '"' {
			v.dead = true
			return
		}
		v.st, v.key = vStr, true
	case vColon:
		if c != ':' {
			v.dead = true
			return
		}
		v.st = vValue
	case vNext:
		switch {
		case v.depth == 0:
			v.dead = true
		case c == ',':
			if v.inObject() {
				v.st = vKey
			} else {
				v.st = vValue
			}
		case c == '}' && v.inObject(), c == ']' && !v.inObject():
			v.close()
		default:
			v.dead = true
		}
	case vArrFirst:
		if c == ']' {
			v.close()
			return
		}
		fallthrough
	case vValue:
		v.value(c)
	}
}

func (v *validator) value(c byte) {
	switch {
	case c == '{' || c == '[':
		if v.depth >= maxValidDepth {
			v.dead, v.deep = true, true
			return
		}
		if v.depth/64 == len(v.stack) {
			v.stack = append(v.stack, 0)
		}
		if c == '{' {
			v.stack[v.depth/64] |= 1 << (v.depth % 64)
			v.st = vObjFirst
		} else {
			v.stack[v.depth/64] &^= 1 << (v.depth % 64)
			v.st = vArrFirst
		}
		v.depth++
	case c == '"':
		v.st, v.key = vStr, false
	case c == '-':
		v.st, v.num = vNum, nSign
	case c == '0':
		v.st, v.num = vNum, nZero
	case '1' <= c && c <= '9':
		v.st, v.num = vNum, nInt
	case c == 't':
		v.st, v.lit, v.li = vLit, "true", 1
	case c == 'f':
		v.st, v.lit, v.li = vLit, "false", 1
	case c == 'n':
		v.st, v.lit, v.li = vLit, "null", 1
	default:
		v.dead = true
	}
}

func (v *validator) inObject() bool {
	d := v.depth - 1
	return v.stack[d/64]&(1<<(d%64)) != 0
}

func (v *validator) close() {
	v.depth--
	v.st = vNext
}

// valid says whether what was written is one whole JSON text.
func (v *validator) valid() bool {
	if v.dead || v.depth != 0 {
		return false
	}
	return v.st == vNext || v.st == vNum && numberDone(v.num)
}

func plainInStr(c byte) bool { return strPlain[c] }

// strPlain marks the bytes a JSON string holds as themselves. The table is only ever read.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func hexValue(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
