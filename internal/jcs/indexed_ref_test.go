package jcs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// canonicalizeIndexed is Canonicalize as it was before the flat index: the
// reference the flat index must match byte for byte and error for error.
func canonicalizeIndexed(w io.Writer, raw []byte) error {
	ws := new(jcsWorkspace)
	ix, err := jcsScan(raw, ws)
	if err != nil {
		return err
	}
	if ix.suspect >= 0 {
		dry := newJCSEmitter(raw, ix, ws, bufio.NewWriterSize(io.Discard, 512))
		dry.run()
		if dry.bad != nil {
			return dry.bad
		}
	}
	bw := bufio.NewWriterSize(w, jcsBufferSize(len(raw)))
	e := newJCSEmitter(raw, ix, ws, bw)
	e.run()
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write canonical JSON: %w", err)
	}
	return nil
}

func fingerprintIndexed(args []byte) (string, error) {
	if argumentsAbsent(args) {
		args = []byte("{}")
	}
	h := sha256.New()
	if err := canonicalizeIndexed(h, args); err != nil {
		return "", fmt.Errorf("fingerprint arguments: %w", err)
	}
	const prefix = "sha256:"
	var out [len(prefix) + 2*sha256.Size]byte
	copy(out[:], prefix)
	hex.Encode(out[len(prefix):], h.Sum(nil))
	return string(out[:]), nil
}

// The index the flat one replaced, kept as it was but for its types' names.

// jcsWorkspace backs the slices of both passes with arrays sized for typical
// tool arguments, so a small call costs one allocation instead of a dozen
// slice regrowths; bigger inputs simply outgrow them.
type jcsWorkspace struct {
	objects [8]jcsObject
	members [32]jcsMember
	pending [32]jcsMember
	open    [8]jcsOpenObject
	frames  [8]jcsFrame
	kinds   [2]uint64 // reused by each pass in turn
	num     [32]byte
}

// jcsIndex is what the validating pass learns and the writing pass needs: the
// members of every object, so they can be sorted. Arrays, strings and
// numbers are not recorded (the writing pass walks them again in the raw
// bytes), which keeps the extra memory for big strings and long arrays near
// zero.
type jcsIndex struct {
	objects []jcsObject // in order of their '{' offset
	members []jcsMember
	suspect int // offset of the first lone surrogate or infinite number, or -1
}

// Offsets are uint32 to halve the index, with the top bit free for a flag;
// scan refuses input past 2 GiB.
type jcsObject struct {
	start, end uint32 // offset of '{', offset just past '}'
	first, n   uint32 // members[first : first+n]; n has orderedObject set once sorted
}

const jcsOrdered = 1 << 31

type jcsMember struct {
	key    uint32 // offset of the key's content, past its opening quote
	keyLen uint32 // content length; plainKey bit set when no escapes and ASCII only
	value  uint32 // offset of the value's first byte
}

const jcsPlainKey = 1 << 31

func (m jcsMember) keyEnd() uint32 { return m.key + m.keyLen&^jcsPlainKey }

func (m jcsMember) keyBytes(raw []byte) []byte { return raw[m.key:m.keyEnd()] }

// jcsOpenObject is an object the scanner is inside of: its slot in
// jcsIndex.objects and where its members start on the pending stack.
type jcsOpenObject struct {
	obj, base uint32
}

// indexedScanner is the validating pass recording the old index.
type indexedScanner struct {
	jcsScanner
	open    []jcsOpenObject
	pending []jcsMember // members of the objects still open, innermost last
	ix      jcsIndex
}

func jcsScan(raw []byte, ws *jcsWorkspace) (*jcsIndex, error) {
	if uint64(len(raw)) > math.MaxInt32 {
		return nil, &jcsError{offset: 0, reason: "input larger than 2 GiB"}
	}
	s := indexedScanner{
		jcsScanner: jcsScanner{raw: raw, kinds: jcsKinds{bits: ws.kinds[:0]}, suspectAt: -1},
		open:       ws.open[:0],
		pending:    ws.pending[:0],
		ix:         jcsIndex{objects: ws.objects[:0], members: ws.members[:0]},
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	s.ix.suspect = s.suspectAt
	return &s.ix, nil
}

func (s *indexedScanner) run() error {
	s.pos = jsonlex.SkipSpace(s.raw, s.pos)
	for {
		opened, err := s.value()
		if err != nil {
			return err
		}
		if opened {
			continue
		}
		// A value is complete: close containers until one wants another value.
		for {
			s.pos = jsonlex.SkipSpace(s.raw, s.pos)
			if s.kinds.depth == 0 {
				if s.pos != len(s.raw) {
					return s.fail("data after the top-level value")
				}
				return nil
			}
			if s.pos == len(s.raw) {
				return s.fail("unexpected end of input")
			}
			c := s.raw[s.pos]
			inObject := s.kinds.topIsObject()
			if c == ',' {
				s.pos++
				s.pos = jsonlex.SkipSpace(s.raw, s.pos)
				if inObject {
					if err := s.memberKey(); err != nil {
						return err
					}
				}
				break
			}
			if inObject && c == '}' {
				s.closeObject()
				continue
			}
			if !inObject && c == ']' {
				s.pos++
				s.kinds.pop()
				continue
			}
			return s.fail("expected ',' or the end of the container")
		}
	}
}

// value consumes one value at s.pos. For a non-empty container it consumes
// only the opening (and, for an object, the first key) and reports opened,
// so the caller scans the first child next.
func (s *indexedScanner) value() (opened bool, err error) {
	if s.pos == len(s.raw) {
		return false, s.fail("unexpected end of input")
	}
	switch c := s.raw[s.pos]; {
	case c == '{':
		s.open = append(s.open, jcsOpenObject{obj: uint32(len(s.ix.objects)), base: uint32(len(s.pending))})
		s.ix.objects = append(s.ix.objects, jcsObject{start: uint32(s.pos)})
		s.kinds.push(true)
		s.pos++
		s.pos = jsonlex.SkipSpace(s.raw, s.pos)
		if s.pos < len(s.raw) && s.raw[s.pos] == '}' {
			s.closeObject()
			return false, nil
		}
		return true, s.memberKey()
	case c == '[':
		s.kinds.push(false)
		s.pos++
		s.pos = jsonlex.SkipSpace(s.raw, s.pos)
		if s.pos < len(s.raw) && s.raw[s.pos] == ']' {
			s.pos++
			s.kinds.pop()
			return false, nil
		}
		return true, nil
	case c == '"':
		_, err := s.str()
		return false, err
	case c == '-' || ('0' <= c && c <= '9'):
		return false, s.number()
	case c == 't':
		return false, s.literal("true")
	case c == 'f':
		return false, s.literal("false")
	case c == 'n':
		return false, s.literal("null")
	default:
		return false, s.fail("expected a value")
	}
}

// memberKey consumes `"key" :` and records the member whose value follows.
func (s *indexedScanner) memberKey() error {
	if s.pos == len(s.raw) || s.raw[s.pos] != '"' {
		return s.fail("expected a string key")
	}
	start := s.pos + 1
	escaped, err := s.str()
	if err != nil {
		return err
	}
	key := s.raw[start : s.pos-1]
	n := uint32(len(key))
	if !escaped && jcsIsASCII(key) {
		n |= jcsPlainKey
	}
	s.pos = jsonlex.SkipSpace(s.raw, s.pos)
	if s.pos == len(s.raw) || s.raw[s.pos] != ':' {
		return s.fail("expected ':' after an object key")
	}
	s.pos++
	s.pos = jsonlex.SkipSpace(s.raw, s.pos)
	s.pending = append(s.pending, jcsMember{key: uint32(start), keyLen: n, value: uint32(s.pos)})
	return nil
}

func (s *indexedScanner) closeObject() {
	top := s.open[len(s.open)-1]
	s.open = s.open[:len(s.open)-1]
	o := &s.ix.objects[top.obj]
	o.first = uint32(len(s.ix.members))
	o.n = uint32(len(s.pending)) - top.base
	s.ix.members = append(s.ix.members, s.pending[top.base:]...)
	s.pending = s.pending[:top.base]
	s.pos++
	o.end = uint32(s.pos)
	s.kinds.pop()
}

func jcsIsASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// indexedEmitter is the writing pass over the old index.
type indexedEmitter struct {
	jcsEmitter
	ix   *jcsIndex
	objs []jcsFrame
}

func newJCSEmitter(raw []byte, ix *jcsIndex, ws *jcsWorkspace, w *bufio.Writer) *indexedEmitter {
	return &indexedEmitter{
		jcsEmitter: jcsEmitter{raw: raw, w: w, kinds: jcsKinds{bits: ws.kinds[:0]}, num: ws.num[:0]},
		ix:         ix,
		objs:       ws.frames[:0],
	}
}

type jcsFrame struct {
	next, stop uint32 // jcsIndex.members cursor and end
	first      uint32
	end        uint32 // where the parent continues once this object is done
}

func (e *indexedEmitter) run() {
	e.pos = jsonlex.SkipSpace(e.raw, e.pos)
	for {
		if e.value() {
			continue
		}
		for {
			if e.kinds.depth == 0 {
				return
			}
			if e.kinds.topIsObject() {
				f := &e.objs[len(e.objs)-1]
				if f.next < f.stop {
					if f.next != f.first {
						e.w.WriteByte(',')
					}
					m := e.ix.members[f.next]
					f.next++
					e.writeString(int(m.key), int(m.keyEnd()))
					e.w.WriteByte(':')
					e.pos = int(m.value)
					break
				}
				e.w.WriteByte('}')
				e.pos = int(f.end)
				e.objs = e.objs[:len(e.objs)-1]
				e.kinds.pop()
				continue
			}
			e.pos = jsonlex.SkipSpace(e.raw, e.pos)
			if e.raw[e.pos] == ',' {
				e.w.WriteByte(',')
				e.pos++
				e.pos = jsonlex.SkipSpace(e.raw, e.pos)
				break
			}
			e.w.WriteByte(']')
			e.pos++
			e.kinds.pop()
		}
	}
}

// value writes the value at e.pos. For an array it writes only '[' and
// reports opened when the first element should be written next; an object
// gets a frame whose members the run loop writes.
func (e *indexedEmitter) value() (opened bool) {
	switch c := e.raw[e.pos]; {
	case c == '[':
		e.w.WriteByte('[')
		e.pos++
		e.pos = jsonlex.SkipSpace(e.raw, e.pos)
		if e.raw[e.pos] == ']' {
			e.w.WriteByte(']')
			e.pos++
			return false
		}
		e.kinds.push(false)
		return true
	case c == '{':
		e.w.WriteByte('{')
		o := e.lookup(e.pos)
		if o.n&jcsOrdered == 0 {
			ms := jcsMemberOrder(e.raw, e.ix.members[o.first:o.first+o.n])
			o.n = uint32(len(ms)) | jcsOrdered
		}
		n := o.n &^ jcsOrdered
		e.objs = append(e.objs, jcsFrame{next: o.first, stop: o.first + n, first: o.first, end: o.end})
		e.kinds.push(true)
		return false
	case c == '"':
		end := jsonlex.SkipString(e.raw, e.pos)
		e.writeString(e.pos+1, end-1)
		e.pos = end
	case c == 't':
		e.w.WriteString("true")
		e.pos += 4
	case c == 'f':
		e.w.WriteString("false")
		e.pos += 5
	case c == 'n':
		e.w.WriteString("null")
		e.pos += 4
	default:
		e.writeNumber()
	}
	return false
}

func (e *indexedEmitter) lookup(pos int) *jcsObject {
	i, _ := slices.BinarySearchFunc(e.ix.objects, uint32(pos), func(o jcsObject, p uint32) int {
		return int(o.start) - int(p)
	})
	return &e.ix.objects[i]
}

// jcsMemberOrder sorts ms by key in UTF-16 code unit order and drops all
// but the last of each run of equal keys (JSON.parse keeps the last), in
// place, returning the kept prefix.
func jcsMemberOrder(raw []byte, ms []jcsMember) []jcsMember {
	if len(ms) < 2 {
		return ms
	}
	// Source order breaks ties so the last duplicate sorts last; value
	// offsets grow with source order.
	slices.SortFunc(ms, func(a, b jcsMember) int {
		if c := compareJCSKeys(raw, a, b); c != 0 {
			return c
		}
		return int(a.value) - int(b.value)
	})
	out := ms[:0]
	for i := range ms {
		if i+1 < len(ms) && compareJCSKeys(raw, ms[i], ms[i+1]) == 0 {
			continue
		}
		out = append(out, ms[i])
	}
	return out
}

func compareJCSKeys(raw []byte, a, b jcsMember) int {
	ka, kb := a.keyBytes(raw), b.keyBytes(raw)
	if a.keyLen&b.keyLen&jcsPlainKey != 0 {
		return bytes.Compare(ka, kb)
	}
	ua, ub := utf16Units{s: ka}, utf16Units{s: kb}
	for {
		x, okx := ua.next()
		y, oky := ub.next()
		switch {
		case !okx && !oky:
			return 0
		case !okx:
			return -1
		case !oky:
			return 1
		case x != y:
			return int(x) - int(y)
		}
	}
}

// typicalArgs builds tool arguments of about n bytes as an edit tool gets
// them: a few options and a list of small objects with strings to escape.
func typicalArgs(n int) []byte {
	r := rand.New(rand.NewPCG(7, 8))
	var b bytes.Buffer
	b.WriteString(`{"path":"/home/user/project/src/main.go","options":{"overwrite":true,"mode":420,"encoding":"utf-8"},"edits":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"oldText":"line %d\tof the file \"x\"","newText":"replacement %d","line":%d,"meta":{"author":"u%d","ts":%d.5}}`,
			i, r.IntN(1000), i*3, r.IntN(9), r.IntN(1e9))
	}
	b.WriteString(`],"dryRun":false}`)
	return b.Bytes()
}

// BenchmarkFlatVsIndexed measures the flat index against the one it
// replaced in the same run, for ratios: small and typical arguments, and
// the shapes of memShapes at 1 MB.
func BenchmarkFlatVsIndexed(b *testing.B) {
	small := []byte(`{"path":"/home/user/project/src/main.go","content":"package main\n\nfunc main() {}\n",` +
		`"options":{"overwrite":true,"mode":420,"encoding":"utf-8"},"tags":["a","b","c"]}`)
	type input struct {
		name string
		in   []byte
	}
	inputs := []input{{"small", small}, {"typical1k", typicalArgs(1 << 10)}, {"typical8k", typicalArgs(8 << 10)}, {"typical256k", typicalArgs(256 << 10)}}
	shapes := memShapes(1 << 20)
	for _, k := range []string{"nested objects", "objects in arrays in objects", "wide object", "many small objects"} {
		inputs = append(inputs, input{strings.ReplaceAll(k, " ", "_"), shapes[k]})
	}
	for _, in := range inputs {
		for _, impl := range []struct {
			name string
			fp   func([]byte) (string, error)
		}{{"flat", Fingerprint}, {"indexed", fingerprintIndexed}} {
			b.Run(in.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.in)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := impl.fp(in.in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
