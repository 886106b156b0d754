package budget

import (
	"os"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// compactMax is how much of a streamed answer a StreamCut holds (its compacted form)
// past 4 budgets: an answer whose bytes outside long strings pass it (many items,
// long numbers, a deep structure) is cut from its spill file read back whole.
const compactMax = 4 << 20

// StreamCut cuts a long answer as it streams (docs/budget.md "Long answers"): each
// piece goes to a spill file as it comes, and into a compacted copy of the answer
// where each string body longer than the budget (and 4 KiB) keeps only a head and a
// tail long enough for any cut, the middle counted as a gap. At the end Cut's own
// rules run over that copy, its gaps weighed as the bytes they stand for: the cut
// answer is byte for byte what Cut gives for the whole answer (FuzzStreamCut).
type StreamCut struct {
	b        *Budget
	id       []byte
	spill    *Spill
	f        *os.File
	part     string
	final    string
	werr     error // writing the spill file failed
	n        int   // the answer's bytes so far
	v        jsonlex.Validator
	c        []byte // the compacted answer
	gaps     []gap
	over     bool // c passed its bound: the spill file is read back whole
	long     int  // a string body past this is compacted
	headMin  int  // the least head kept of one
	tailMin  int  // and the least tail
	inString bool
	esc      bool
	depth    int // of the containers open, outside strings
	s        strState
}

// strState is the state of the string body being read.
type strState struct {
	start   int // its body's offset in c
	n       int // its body's bytes so far
	pos     int // the body's token boundary the tokenizer is at
	pend    [12]byte
	np      int
	head    int // the head's end: a token boundary past headMin (0: none yet)
	eliding bool
	cp1     int // the tail (in c after the head) starts at this body offset
	cp2     int // a token boundary tailMin past cp1: where it starts next
	dropped int // body bytes left out (cp1 - head)
	whole   bool
}

// StreamCut is a StreamCut for the answer of the raw id to the host's tools/call,
// whose spill file is opened at once; nil when there is no spill folder or it
// refuses (the answer is then to be read whole: Answer).
func (b *Budget) StreamCut(id []byte) *StreamCut {
	if b.Spill == nil || b.Bytes < 0 {
		return nil
	}
	f, part, final, err := b.Spill.open()
	if err != nil {
		if b.Spill.warned.CompareAndSwap(false, true) {
			b.Spill.log.Warn("bir-proxy: a cut answer could not be kept whole in the spill folder", "dir", b.Spill.dir, "err", err)
		}
		return nil
	}
	return newStreamCut(b, id, f, part, final)
}

func newStreamCut(b *Budget, id []byte, f *os.File, part, final string) *StreamCut {
	long := max(b.Bytes, 4096) + 64
	return &StreamCut{b: b, id: append([]byte(nil), id...), spill: b.Spill, f: f, part: part, final: final,
		long: long, headMin: b.Bytes/2 + 32, tailMin: b.Bytes/2 + 32}
}

// Write takes the next piece of the answer.
func (sc *StreamCut) Write(p []byte) {
	sc.n += len(p)
	if sc.f != nil && sc.werr == nil {
		if _, err := sc.f.Write(p); err != nil {
			sc.werr = err
		}
	}
	sc.v.Write(p)
	if sc.over {
		return
	}
	sc.compact(p)
	if len(sc.c) > compactMax+4*sc.b.Bytes {
		sc.over, sc.c, sc.gaps = true, nil, nil
	}
}

// compact appends p to c, each long string body's middle left out.
func (sc *StreamCut) compact(p []byte) {
	for i := 0; i < len(p); {
		if !sc.inString {
			j := i
			for ; j < len(p) && p[j] != '"'; j++ {
				switch p[j] {
				case '{', '[':
					sc.depth++
				case '}', ']':
					sc.depth--
				}
			}
			if j < len(p) {
				j++ // the quote
				sc.inString, sc.esc = true, false
				sc.c = append(sc.c, p[i:j]...)
				// A string of the answer's own object (the id, which Cut copies
				// whatever its length) is kept whole.
				sc.s = strState{start: len(sc.c), whole: sc.depth < 2}
			} else {
				sc.c = append(sc.c, p[i:j]...)
			}
			i = j
			continue
		}
		// A run of plain ASCII, whole UTF-8 characters (or bytes that are not one)
		// and whole escapes: tokens, their ends boundaries (the run's end is told).
		j := i
		if sc.s.np == 0 && !sc.esc {
			// Short enough that the head ends just past headMin, and the tail's
			// starts are a quarter of tailMin apart.
			lim := len(p)
			if sc.s.head == 0 {
				lim = min(lim, i+max(sc.headMin-sc.s.pos, 1))
			} else {
				lim = min(lim, i+max(sc.tailMin/4, 64))
			}
			for j < lim {
				if c := p[j]; c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
					j++
				} else if c >= utf8.RuneSelf && utf8.FullRune(p[j:]) {
					_, w := utf8.DecodeRune(p[j:])
					j += w
				} else if l := 0; c == '\\' {
					// An escape whole in p (its quote, if any, with it).
					if l = pendToken(p[j:min(j+12, len(p))]); l == 0 {
						break
					}
					j += l
				} else {
					break
				}
			}
		}
		if j > i {
			sc.body(p[i:j])
			sc.tokens(j - i)
			i = j
			continue
		}
		c := p[i]
		i++
		switch {
		case sc.esc:
			sc.esc = false
		case c == '\\':
			sc.esc = true
		case c == '"':
			sc.endString()
			sc.c = append(sc.c, c)
			continue
		}
		sc.c = append(sc.c, c)
		sc.grow(1)
		sc.s.pend[sc.s.np] = c
		sc.s.np++
		sc.token()
	}
}

// body appends bytes of the string body to c, and starts eliding past sc.long.
func (sc *StreamCut) body(b []byte) {
	sc.c = append(sc.c, b...)
	sc.grow(len(b))
}

// grow counts n bytes more of the string body.
func (sc *StreamCut) grow(n int) {
	s := &sc.s
	s.n += n
	if !s.eliding && !s.whole && s.n > sc.long && s.head > 0 {
		s.eliding, s.cp1, s.cp2 = true, s.head, s.head
	}
}

// tokens moves the tokenizer over n bytes of whole tokens.
func (sc *StreamCut) tokens(n int) {
	sc.boundary(sc.s.pos + n)
}

// token decides the tokens in pend it can (tokenEnd's rules, with what has come).
func (sc *StreamCut) token() {
	s := &sc.s
	for s.np > 0 {
		l := pendToken(s.pend[:s.np])
		if l == 0 {
			return
		}
		copy(s.pend[:], s.pend[l:s.np])
		s.np -= l
		sc.boundary(s.pos + l)
	}
}

// pendToken is the length of the token at the start of p, 0 while more bytes are
// needed to tell (as tokenEnd of the whole body would: a string body does not end
// inside an escape).
func pendToken(p []byte) int {
	c := p[0]
	if c == '\\' {
		switch {
		case len(p) < 2:
			return 0
		case p[1] != 'u':
			return 2
		case len(p) < 6:
			return 0
		case !high(p[2:6]):
			return 6
		case len(p) < 8:
			return 0
		case p[6] != '\\' || p[7] != 'u':
			return 6
		case len(p) < 12:
			return 0
		case low(p[8:12]):
			return 12
		}
		return 6
	}
	if c < utf8.RuneSelf {
		return 1
	}
	if !utf8.FullRune(p) {
		return 0
	}
	_, w := utf8.DecodeRune(p)
	return w
}

// boundary moves the body's tokenizer to pos, a token boundary.
func (sc *StreamCut) boundary(pos int) {
	s := &sc.s
	s.pos = pos
	if s.head == 0 && pos >= sc.headMin {
		s.head = pos
	}
	if !s.eliding && !s.whole && s.n > sc.long && s.head > 0 {
		s.eliding, s.cp1, s.cp2 = true, s.head, s.head
	}
	if s.eliding && pos-s.cp2 >= sc.tailMin {
		if d := s.cp2 - s.cp1; d > 0 {
			at := s.start + s.head
			sc.c = append(sc.c[:at], sc.c[at+d:]...)
			s.dropped += d
		}
		s.cp1, s.cp2 = s.cp2, pos
	}
}

// endString ends the string body being read.
func (sc *StreamCut) endString() {
	sc.inString = false
	if sc.s.dropped > 0 {
		sc.gaps = append(sc.gaps, gap{at: sc.s.start + sc.s.head, n: sc.s.dropped})
	}
}

// End ends the answer: ok says the line was whole and a message. It returns what the
// host gets: the cut answer, or the answer as it is when it is not to be cut (read
// back from the spill file, then removed), an error answer when it could not be read
// back, or nil when !ok.
func (sc *StreamCut) End(ok bool) []byte {
	var cerr error
	if sc.f != nil {
		cerr = sc.f.Close()
		sc.f = nil
	}
	if sc.werr == nil {
		sc.werr = cerr
	}
	if !ok {
		os.Remove(sc.part)
		return nil
	}
	var path string
	note := func() string {
		err := sc.werr
		if err == nil {
			err = os.Rename(sc.part, sc.final)
		}
		if err != nil {
			os.Remove(sc.part)
			if sc.spill.warned.CompareAndSwap(false, true) {
				sc.spill.log.Warn("bir-proxy: a cut answer could not be kept whole in the spill folder", "dir", sc.spill.dir, "err", err)
			}
			return cutNote(sc.n, "", err)
		}
		path = sc.final
		sc.spill.pruneSoon()
		return cutNote(sc.n, path, nil)
	}
	valid := sc.v.Valid()
	if valid && !sc.over && !sc.inString {
		out, cut := cutDoc(&doc{b: sc.c, gaps: sc.gaps}, sc.b.Bytes, note)
		sc.c, sc.gaps = nil, nil
		if cut {
			if sc.b.Cut != nil {
				sc.b.Cut(sc.id, path)
			}
			return out
		}
	}
	sc.c, sc.gaps = nil, nil
	// Not cut as it passed: the answer is read back whole (bounded as the line was).
	var msg []byte
	err := sc.werr
	if err == nil {
		msg, err = os.ReadFile(sc.part)
	}
	if err != nil {
		// Nothing of it is left to give: the host's call gets an error, not silence.
		os.Remove(sc.part)
		sc.spill.log.Warn("bir-proxy: a long answer could not be read back from the spill folder", "err", err)
		return jsonlex.ErrorResponse(sc.id, -32603, "bir-proxy: the server's long answer could not be passed on: "+err.Error())
	}
	if valid && sc.over {
		if out, cut := Cut(msg, sc.b.Bytes, note); cut {
			if sc.b.Cut != nil {
				sc.b.Cut(sc.id, path)
			}
			return out
		}
	}
	os.Remove(sc.part)
	return msg
}
