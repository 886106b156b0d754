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
	// number, null...); nil when absent or too long to keep (an id over peekIDMax, a
	// method over peekValueMax).
	ID, Method []byte
	// IDOver says the last top-level id member was too long to keep: the message has
	// an id that cannot be told (IDOrNull).
	IDOver bool
	// Answer says the value of a top-level "result" or "error" member has started:
	// the message is an answer, whatever follows.
	Answer bool
	// Error says a top-level "error" member has started (an answer that is an
	// error, as a reader of its Fields takes one with any error member).
	Error bool
	// More says something other than whitespace followed the first value: the line
	// holds more than one (which JSON.parse refuses), or trailing garbage.
	More bool

	// Names, when set, are the top-level members kept in ID and Method instead of
	// "id" and "method": a tools/call result's "isError" and "resultType", say.
	Names *[2]string
	// Tap, when set, is given the bytes of every top-level "result" and "error"
	// value as they pass, in order, a piece at a time: begin says p starts a value (a
	// later duplicate starts again: the last wins, as everywhere here), isErr that it
	// is an error's. What a value stopped at (input p cannot follow, a cut) is what
	// was given.
	Tap func(b []byte, begin, isErr bool)

	piece   []byte // the piece being written, while Tap is set
	at      int    // the index in it of the byte being read
	tap     int8   // the value being read goes to Tap: 1 a result, 2 an error
	tapFrom int    // where in the piece the tapped bytes not yet given start
	tapNew  bool   // the next tapped bytes begin their value
}

// Reset makes p ready for the next message, keeping its scratch space, Names and Tap.
func (p *Peek) Reset() {
	*p = Peek{key: p.key[:0], val: p.val[:0], Names: p.Names, Tap: p.Tap}
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

// IDOrNull is the id to answer the message by: ID, or null when it had an id too
// long to keep — JSON-RPC's id for an error whose request's id cannot be determined.
// (Taken for a notification, a request over the cap with an id over 1,024 bytes was
// never answered, and its sender waited for ever.)
func (p *Peek) IDOrNull() []byte {
	if p.ID == nil && p.IDOver {
		return []byte("null")
	}
	return p.ID
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
	peekValueMax = 1024 // a method (or a Names value) longer than this is not kept
	// peekIDMax bounds an id kept: a request over the cap is answered by its id, so
	// any id a peer may use in earnest is kept; a longer one is answered as null.
	peekIDMax = 64 << 10
)

// Write feeds the next piece of the message. It never fails.
func (p *Peek) Write(b []byte) (int, error) {
	if p.Tap != nil {
		p.piece = b
	}
	i := 0
	// quoteAt is the next '"' in b at or after i (len(b): none), found once per quote:
	// searched again at every backslash, a string of escapes with no quote in the
	// piece cost piece² (a 6 MB line of "\\\\…" held a server's answer 40 s).
	quoteAt := -1
	for i < len(b) && !p.broken && p.state != peekDone {
		if p.inStr && !p.esc && p.target == nil && !(p.depth == 1 && p.state == peekInKey) {
			// Inside a string nothing is kept: skip to its next quote or backslash
			// with IndexByte (vectorised), not a byte at a time. A 64 MB tool result
			// is one string, and a byte loop over it was the whole cost of a scan.
			if quoteAt < i {
				quoteAt = len(b)
				if q := bytes.IndexByte(b[i:], '"'); q >= 0 {
					quoteAt = i + q
				}
			}
			q := quoteAt - i
			if e := bytes.IndexByte(b[i:quoteAt], '\\'); e >= 0 {
				q = e
			}
			if i += q; i == len(b) {
				break
			}
		}
		p.at = i
		p.byte(b[i])
		i++
	}
	if p.tap != 0 {
		// The value goes on in the next piece (or stopped here, if p broke off).
		p.giveTap(b[p.tapFrom:i])
		p.tapFrom = 0
		if p.broken {
			p.tap = 0
		}
	}
	p.piece = nil // the caller's: not kept
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
				p.endValue(true)
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
			p.endValue(false)
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
				p.endValue(false)
			}
			p.state = peekDone
			return
		}
		p.depth--
		if p.state == peekInValue {
			p.keep(c)
			if p.depth == 1 {
				p.endValue(true)
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
				p.endValue(false)
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
	names := &[2]string{"id", "method"}
	if p.Names != nil {
		names = p.Names
	}
	switch {
	case KeyIs(lit, names[0]):
		p.target = &p.ID
	case KeyIs(lit, names[1]):
		p.target = &p.Method
	case KeyIs(lit, "result"):
		p.Answer = true
		p.startTap(1)
	case KeyIs(lit, "error"):
		p.Answer, p.Error = true, true
		p.startTap(2)
	}
}

// startTap starts giving the value that begins at the byte being read to Tap.
func (p *Peek) startTap(kind int8) {
	if p.Tap != nil {
		p.tap, p.tapFrom, p.tapNew = kind, p.at, true
	}
}

// giveTap gives Tap the next bytes of the value being tapped.
func (p *Peek) giveTap(b []byte) {
	if len(b) > 0 || p.tapNew {
		p.Tap(b, p.tapNew, p.tap == 2)
		p.tapNew = false
	}
}

func (p *Peek) keep(c byte) {
	if p.target == nil {
		return
	}
	max := peekValueMax
	if p.target == &p.ID {
		max = peekIDMax
	}
	if len(p.val) >= max {
		p.valOver = true
		return
	}
	p.val = append(p.val, c)
}

// endValue ends the top-level value being read; with its byte says the byte being
// read is its last (a string's quote, a closing bracket), not the one after it.
func (p *Peek) endValue(withByte bool) {
	if p.tap != 0 {
		end := p.at
		if withByte {
			end++
		}
		p.giveTap(p.piece[p.tapFrom:end])
		p.tap = 0
	}
	if p.target == &p.ID {
		p.IDOver = p.valOver // the last id wins, told or not
	}
	if p.target != nil {
		if p.valOver {
			*p.target = nil
		} else {
			*p.target = bytes.Clone(p.val)
		}
	}
	p.state, p.target = peekAfter, nil
}
