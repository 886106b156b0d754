package jsonlex

import "bytes"

// Peek reads a JSON-RPC message as a stream of pieces, keeping nothing of it but its
// top-level "id" and "method" values. It is for a line too long to hold: the line is
// dropped, yet its id must be found — wherever it sits in the object, first or last
// (the TypeScript SDK writes it last) — so that its sender gets an answer instead of
// waiting forever. Of duplicate members the last wins, as everywhere in this package.
//
// It follows structure only (strings, nesting, separators), like the rest of the
// package, and never fails loudly: on input it cannot follow it stops looking, and
// what it found so far stands.
type Peek struct {
	depth  int
	inStr  bool
	esc    bool
	state  peekState
	broken bool

	key     []byte // the top-level key being read, raw, without quotes
	keyOver bool
	target  *[]byte // where the value being read goes: &ID, &Method, or nil
	val     []byte
	valOver bool
	nested  bool // the value being read is an object or array

	// ID and Method are the raw values found (a string literal with its quotes, a
	// number, null...); nil when absent or too long to be an id (over peekValueMax).
	ID, Method []byte
	// Answer says the value of a top-level "result" or "error" member has started:
	// the message is an answer, whatever follows.
	Answer bool
	// More says something other than whitespace followed the first value: the line
	// holds more than one (which JSON.parse refuses), or trailing garbage.
	More bool
}

// Reset makes p ready for the next message, keeping its scratch space.
func (p *Peek) Reset() {
	*p = Peek{key: p.key[:0], val: p.val[:0]}
}

// Broken reports whether p met input it cannot follow (the line is not an object, or
// not JSON): what it found stands, but nothing after that point was read.
func (p *Peek) Broken() bool { return p.broken }

// Done reports whether the top-level object closed: what was read is one whole
// object by its structure (strings, escapes and nesting balanced), not validated.
func (p *Peek) Done() bool { return p.state == peekDone }

// Decided reports whether what was read so far says how the message is routed, by
// its id and a method or the start of a result or error — or, for a notification,
// its method (a later "id" makes it a request: the caller reads ID again at the end).
func (p *Peek) Decided() bool {
	return p.Method != nil || p.ID != nil && p.Answer
}

type peekState uint8

const (
	peekStart peekState = iota
	peekKey             // expecting a key or '}'
	peekInKey
	peekColon
	peekValue // expecting a value
	peekInValue
	peekAfter // after a value: ',' or '}'
	peekDone
)

const (
	peekKeyMax   = 64   // "\u0069\u0064" is 12 bytes: no spelling of id or method is longer
	peekValueMax = 1024 // an id longer than this is not one a peer will be answered by
)

// Write feeds the next piece of the message. It never fails.
func (p *Peek) Write(b []byte) (int, error) {
	i := 0
	for i < len(b) && !p.broken && p.state != peekDone {
		if p.inStr && !p.esc && p.target == nil && !(p.depth == 1 && p.state == peekInKey) {
			// Inside a string nothing is kept: skip to its next quote or backslash
			// with IndexByte (vectorised), not a byte at a time. A 64 MB tool result
			// is one string, and a byte loop over it was the whole cost of a scan.
			rest := b[i:]
			q := bytes.IndexByte(rest, '"')
			if q < 0 {
				q = len(rest)
			}
			if e := bytes.IndexByte(rest[:q], '\\'); e >= 0 {
				q = e
			}
			if i += q; i == len(b) {
				break
			}
		}
		p.byte(b[i])
		i++
	}
	if p.state == peekDone && !p.More {
		for ; i < len(b); i++ {
			if c := b[i]; c != ' ' && c != '\t' && c != '\r' && c != '\n' {
				p.More = true
				break
			}
		}
	}
	return len(b), nil
}

func (p *Peek) byte(c byte) {
	if p.inStr {
		switch {
		case p.esc:
			p.esc = false
		case c == '\\':
			p.esc = true
		case c == '"':
			p.inStr = false
		}
		switch {
		case p.depth == 1 && p.state == peekInKey:
			if !p.inStr {
				p.state = peekColon
			} else if len(p.key) < peekKeyMax {
				p.key = append(p.key, c)
			} else {
				p.keyOver = true
			}
		case p.depth == 1 && p.state == peekInValue:
			p.keep(c)
			if !p.inStr {
				p.endValue()
			}
		default:
			if p.state == peekInValue {
				p.keep(c)
			}
		}
		return
	}
	switch c {
	case ' ', '\t', '\r', '\n':
		if p.depth == 1 && p.state == peekInValue && !p.nested {
			p.endValue()
		}
		return
	case '"':
		p.inStr = true
		if p.depth == 1 {
			switch p.state {
			case peekKey:
				p.state, p.key, p.keyOver = peekInKey, p.key[:0], false
				return
			case peekValue:
				p.startValue(false)
			}
		}
		if p.state == peekInValue {
			p.keep(c)
		}
		return
	case '{', '[':
		if p.depth == 0 {
			if c != '{' {
				p.broken = true
				return
			}
			p.depth, p.state = 1, peekKey
			return
		}
		if p.depth == 1 && p.state == peekValue {
			p.startValue(true)
		}
		p.depth++
		if p.state == peekInValue {
			p.keep(c)
		}
		return
	case '}', ']':
		if p.depth == 1 {
			if p.state == peekInValue && !p.nested {
				p.endValue()
			}
			p.state = peekDone
			return
		}
		p.depth--
		if p.state == peekInValue {
			p.keep(c)
			if p.depth == 1 {
				p.endValue()
			}
		}
		return
	case ':':
		if p.depth == 1 {
			if p.state != peekColon {
				p.broken = true
				return
			}
			p.state = peekValue
			return
		}
	case ',':
		if p.depth == 1 {
			if p.state == peekInValue && !p.nested {
				p.endValue()
			}
			p.state = peekKey
			return
		}
	default:
		if p.depth == 1 && p.state == peekValue {
			p.startValue(false) // a number or literal
		}
	}
	if p.state == peekInValue {
		p.keep(c)
	}
}

func (p *Peek) startValue(nested bool) {
	p.state, p.nested, p.val, p.valOver, p.target = peekInValue, nested, p.val[:0], false, nil
	if p.keyOver {
		return
	}
	lit := make([]byte, 0, len(p.key)+2)
	lit = append(append(append(lit, '"'), p.key...), '"')
	switch {
	case KeyIs(lit, "id"):
		p.target = &p.ID
	case KeyIs(lit, "method"):
		p.target = &p.Method
	case KeyIs(lit, "result"), KeyIs(lit, "error"):
		p.Answer = true
	}
}

func (p *Peek) keep(c byte) {
	if p.target == nil {
		return
	}
	if len(p.val) >= peekValueMax {
		p.valOver = true
		return
	}
	p.val = append(p.val, c)
}

func (p *Peek) endValue() {
	if p.target != nil {
		if p.valOver {
			*p.target = nil
		} else {
			*p.target = bytes.Clone(p.val)
		}
	}
	p.state, p.target = peekAfter, nil
}
