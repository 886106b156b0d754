package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// doc is one JSON text being rendered: the report's value, or a JSON text found inside
// one of its strings. It remembers what is costly to find in big values (where a value
// ends, the digest of a cut string) so that a second pass with smaller limits only
// redoes the work that depends on the limits.
type doc struct {
	src   []byte
	plain bool // src is not JSON: the whole of it is the text of one string

	ends    map[int]int    // value start → end, for values of memoMin bytes or more
	extents map[int]extent // container start → its extent and digest
	digests map[int]digest // string start → digest of its text
	inner   map[int]*doc   // string start → the JSON text it holds, nil if none

	// red is set when src is a Reducer's stand-in for a longer value: the memos above
	// then come filled in with what the cut parts were, and red says where they were.
	red *reduced
}

// length is how many bytes of the original value the text src[p:e] stands for.
func (d *doc) length(p, e int) int64 {
	n := int64(e - p)
	if d.red != nil {
		n += d.red.shrink(p, e)
	}
	return n
}

// hole says what is at p is not in a stand-in (the rest of a container from the item
// or member at p: holeTail; the container at p: holeWhole): the limits of this pass
// show more than the Reducer kept, so the pass must give way to a smaller one.
func (d *doc) hole(p int, kind uint8) bool { return d.red != nil && d.red.holes[p]&kind != 0 }

const (
	holeTail uint8 = 1 << iota
	holeWhole
)

type extent struct {
	end, count int
	sum        [32]byte
}

type digest struct {
	n   int64
	sum [32]byte
}

func (d *doc) stringEnd(p int) int {
	// Most docs remember nothing (no value of memoMin bytes): no map lookup for them.
	if d.ends != nil {
		if e, ok := d.ends[p]; ok {
			return e
		}
	}
	e := jsonlex.SkipString(d.src, p)
	d.remember(p, e)
	return e
}

// skip returns the end of the value at p without looking inside it more than it must.
func (d *doc) skip(p int) (int, error) {
	if e, ok := d.ends[p]; ok {
		if e < 0 {
			return 0, errSyntax
		}
		return e, nil
	}
	e, _, err := skipValue(d.src, p)
	if err != nil {
		d.remember(p, -1)
		return 0, err
	}
	d.remember(p, e)
	return e, nil
}

func (d *doc) remember(p, e int) {
	if e >= 0 && e-p < memoMin {
		return
	}
	if d.ends == nil {
		d.ends = make(map[int]int)
	}
	d.ends[p] = e
}

// extent returns the end, member count and sha256 of the JSON text of the value at p.
func (d *doc) extent(p int) (int, int, error) {
	x, err := d.extentSum(p)
	return x.end, x.count, err
}

func (d *doc) extentSum(p int) (extent, error) {
	if x, ok := d.extents[p]; ok {
		return x, nil
	}
	end, count, err := skipValue(d.src, p)
	if err != nil {
		return extent{}, err
	}
	x := extent{end: end, count: count, sum: sha256.Sum256(d.src[p:end])}
	if d.extents == nil {
		d.extents = make(map[int]extent)
	}
	d.extents[p] = x
	return x, nil
}

// digest returns the length and sha256 of the text of the string at p, whose body (the
// bytes between its quotes) is given.
func (d *doc) digest(p int, body []byte) (int64, [32]byte) {
	if g, ok := d.digests[p]; ok {
		return g.n, g.sum
	}
	n, sum := digestString(body, d.plain)
	if len(body) >= memoMin {
		if d.digests == nil {
			d.digests = make(map[int]digest)
		}
		d.digests[p] = digest{n, sum}
	}
	return n, sum
}

// innerDoc returns the JSON object or array that the string at p holds as text (tools
// often return JSON that way), or nil. dec is the string's text decoded so far, all of
// it when complete.
//
// raw says dec is body itself, in d's source: the inner doc then reads it in place,
// since d's source outlives it, where dec in the renderer's scratch must be copied.
// A string too small to be remembered across passes gets its doc in s, reused from
// string to string, so that the common tool result (a text item holding JSON) costs
// no allocation; s is nil for one that is remembered.
func (d *doc) innerDoc(p int, body, dec []byte, complete, raw bool, s *nestScratch) *doc {
	if in, ok := d.inner[p]; ok {
		return in
	}
	var full []byte
	switch {
	case complete && raw:
		full = dec
	case complete && s != nil:
		s.buf = append(s.buf[:0], dec...)
		full = s.buf
	case complete:
		full = bytes.Clone(dec)
	default:
		var err error
		if full, _, err = decodePrefix(make([]byte, 0, len(body)), body, len(body), false); err != nil {
			full = nil
		}
	}
	var in *doc
	if last := lastNonWS(full); (last == '}' || last == ']') && jsonlex.Valid(full) {
		if s != nil {
			s.d = doc{src: full}
			in = &s.d
		} else {
			in = &doc{src: full}
		}
	}
	if len(body) >= memoMin {
		if d.inner == nil {
			d.inner = make(map[int]*doc)
		}
		d.inner[p] = in
	}
	return in
}

// nestScratch is where the JSON text held by a small string is decoded and read, one
// per level of JSON held in JSON being rendered.
type nestScratch struct {
	buf []byte
	d   doc
}

// scratch returns the nestScratch of the current level of embedded JSON.
func (r *renderer) scratch() *nestScratch {
	for len(r.nested) <= r.nest {
		r.nested = append(r.nested, new(nestScratch))
	}
	return r.nested[r.nest]
}

func lastNonWS(b []byte) byte {
	for i := len(b) - 1; i >= 0; i-- {
		if !jsonlex.IsSpace(b[i]) {
			return b[i]
		}
	}
	return 0
}

// hint says what a value is known to be from where it sits.
type hint int

const (
	hintNone hint = iota
	hintBlob      // base64 data: an MCP image/audio item's data, a resource's blob
)

// renderer writes one pass: the value redacted and clipped with one set of limits, given
// up as soon as it outgrows the budget.
type renderer struct {
	lim     limits
	max     int // out must not grow past this
	out     []byte
	clipped bool

	// scratch, reused from string to string
	dec   []byte
	red   []byte
	spans []span
	// inner is where embedded JSON is rendered, before it is quoted into out; nested
	// embedded JSON (JSON text in a string of JSON text) grows one of its own.
	inner []byte
	// nested[nest] is where the JSON text held by a small string at the current level
	// of embedding is decoded; a level's is free again once its string is rendered.
	nested []*nestScratch
	nest   int
}

func (r *renderer) render(d *doc, lim limits, budget int) error {
	r.lim, r.max, r.out, r.clipped = lim, budget, r.out[:0], false
	if d.plain {
		_, err := r.text(d, 0, d.src, 0, hintNone)
		return err
	}
	end, _, err := r.value(d, 0, 0, hintNone)
	if err != nil {
		return err
	}
	if jsonlex.SkipSpace(d.src, end) != len(d.src) {
		return errSyntax
	}
	return nil
}

func (r *renderer) check() error {
	if len(r.out) > r.max {
		return errOverflow
	}
	return nil
}

// value renders the value at p (after white space) and returns where it ends. flag says
// the value is a command-line flag naming a secret ("--password"), so the array item
// after it is the secret.
func (r *renderer) value(d *doc, p, depth int, h hint) (end int, flag bool, err error) {
	src := d.src
	p = jsonlex.SkipSpace(src, p)
	if p >= len(src) {
		return 0, false, errSyntax
	}
	switch c := src[p]; c {
	case '{', '[':
		if depth >= r.lim.depth {
			if x, err := d.extentSum(p); err != nil || d.length(p, x.end) > markerRoom {
				return r.cutWhole(d, p)
			}
		}
		if d.hole(p, holeWhole) {
			return 0, false, errOverflow
		}
		if c == '{' {
			end, err = r.object(d, p, depth+1)
		} else {
			end, err = r.array(d, p, depth+1)
		}
		return end, false, err
	case '"':
		e := d.stringEnd(p)
		if e < 0 {
			return 0, false, errSyntax
		}
		flag, err = r.text(d, p, d.src[p+1:e-1], depth, h)
		return e, flag, err
	case 't', 'f', 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(src[p:], []byte(lit)) {
				r.out = append(r.out, lit...)
				return p + len(lit), false, r.check()
			}
		}
		return 0, false, errSyntax
	}
	e, ok := jsonlex.NumberEnd(src, p)
	if !ok {
		return 0, false, errSyntax
	}
	if e-p > numberMax {
		r.appendWholeMarker("number", int64(e-p), sha256.Sum256(src[p:e]))
		return e, false, r.check()
	}
	r.out = append(r.out, src[p:e]...)
	return e, false, r.check()
}

// cutWhole replaces the container at p by a marker (it is nested too deep to show).
func (r *renderer) cutWhole(d *doc, p int) (int, bool, error) {
	x, err := d.extentSum(p)
	if err != nil {
		return 0, false, err
	}
	kind := "array"
	if d.src[p] == '{' {
		kind = "object"
	}
	r.appendWholeMarker(kind, d.length(p, x.end), x.sum)
	return x.end, false, r.check()
}

func (r *renderer) appendWholeMarker(kind string, n int64, sum [32]byte) {
	r.out = append(r.out, `"[clipped `...)
	r.out = append(r.out, kind...)
	r.out = append(r.out, ", "...)
	r.out = appendInt(r.out, n)
	r.out = append(r.out, " bytes sha256:"...)
	r.out = appendHex(r.out, sum)
	r.out = append(r.out, `]"`...)
	r.clipped = true
}

// appendCountMarker appends the text of a marker saying cut of total units were cut.
func appendCountMarker(dst []byte, cut, total int64, unit string, sum [32]byte) []byte {
	dst = append(dst, "[clipped "...)
	dst = appendInt(dst, cut)
	dst = append(dst, " of "...)
	dst = appendInt(dst, total)
	dst = append(dst, ' ')
	dst = append(dst, unit...)
	dst = append(dst, " sha256:"...)
	dst = appendHex(dst, sum)
	return append(dst, ']')
}

func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

func appendHex(dst []byte, sum [32]byte) []byte { return hex.AppendEncode(dst, sum[:]) }

// expect skips white space and the byte c at p, or fails.
func expect(src []byte, p int, c byte) (int, error) {
	p = jsonlex.SkipSpace(src, p)
	if p >= len(src) || src[p] != c {
		return 0, errSyntax
	}
	return p + 1, nil
}

func (r *renderer) object(d *doc, start, depth int) (int, error) {
	src := d.src
	r.out = append(r.out, '{')
	p := jsonlex.SkipSpace(src, start+1)
	if p < len(src) && src[p] == '}' {
		r.out = append(r.out, '}')
		return p + 1, r.check()
	}
	// What the object's members say about each other: "type": "image"/"audio" makes it
	// an MCP content item whose data is base64; "name"/"key" naming a secret makes it a
	// name/value pair (Kubernetes env lists, HAR headers) whose value is the secret.
	var media, namedSecret, lookedAhead bool
	for n := 0; ; n++ {
		if p >= len(src) || src[p] != '"' {
			return 0, errSyntax
		}
		if n == r.lim.obj {
			x, err := d.extentSum(start)
			if err != nil {
				return 0, err
			}
			if d.length(p, x.end) > markerRoom {
				r.out = append(r.out, `"…":"`...)
				r.out = appendCountMarker(r.out, int64(x.count-n), int64(x.count), "members", x.sum)
				r.out = append(r.out, `"}`...)
				r.clipped = true
				return x.end, r.check()
			}
		}
		if d.hole(p, holeTail) {
			return 0, errOverflow
		}
		ke := d.stringEnd(p)
		if ke < 0 {
			return 0, errSyntax
		}
		kind, err := r.key(d, p, ke)
		if err != nil {
			return 0, err
		}
		if p, err = expect(src, ke, ':'); err != nil {
			return 0, err
		}
		r.out = append(r.out, ':')
		p = jsonlex.SkipSpace(src, p)
		switch kind {
		case keyType:
			media = media || isMedia(d, p)
		case keyName:
			namedSecret = namedSecret || namesSecret(d, p)
		case keyData, keyValue:
			// The member that tells may come later: read ahead, once, only for the
			// objects that need it, so big values aren't scanned twice for nothing.
			if !lookedAhead && !media && !namedSecret {
				m, ns := lookahead(d, p)
				media, namedSecret, lookedAhead = m, ns, true
			}
		}
		switch {
		case kind == keySecret || (kind == keyValue && namedSecret):
			if p, err = d.skip(p); err != nil {
				return 0, err
			}
			r.out = append(r.out, `"`+Redacted+`"`...)
		case kind == keyBlob || (kind == keyData && media):
			p, _, err = r.value(d, p, depth, hintBlob)
		default:
			p, _, err = r.value(d, p, depth, hintNone)
		}
		if err != nil {
			return 0, err
		}
		more, err := r.separator(src, &p, '}')
		if err != nil {
			return 0, err
		}
		if !more {
			return p, nil
		}
	}
}

// separator copies what follows a member or item of a container closed by closer: a
// comma (more is true, *p is at the next one) or the closer (more is false, *p is past
// it). It checks the budget first, as after every value.
func (r *renderer) separator(src []byte, p *int, closer byte) (more bool, err error) {
	if err := r.check(); err != nil {
		return false, err
	}
	q := jsonlex.SkipSpace(src, *p)
	switch {
	case q < len(src) && src[q] == ',':
		r.out = append(r.out, ',')
		*p = jsonlex.SkipSpace(src, q+1)
		return true, nil
	case q < len(src) && src[q] == closer:
		r.out = append(r.out, closer)
		*p = q + 1
		return false, r.check()
	}
	return false, errSyntax
}

// shortString returns the raw body of the string value at p if it is one and short:
// type and name values are, and anything longer says nothing here.
func shortString(d *doc, p int) ([]byte, bool) {
	if p >= len(d.src) || d.src[p] != '"' {
		return nil, false
	}
	e := d.stringEnd(p)
	if e < 0 || e-p > 130 {
		return nil, false
	}
	return d.src[p+1 : e-1], true
}

func isMedia(d *doc, p int) bool {
	v, ok := shortString(d, p)
	return ok && (string(v) == "image" || string(v) == "audio")
}

func namesSecret(d *doc, p int) bool {
	v, ok := shortString(d, p)
	return ok && isSecretName(v)
}

// lookahead skips the value at p and reads the members after it, up to lookaheadMembers
// of them, for a "type" or "name" that changes how the object's data or value is
// shown. Errors are left for the rendering to find.
func lookahead(d *doc, p int) (media, namedSecret bool) {
	src := d.src
	for m := 0; m < lookaheadMembers; m++ {
		e, err := d.skip(p)
		if err != nil {
			return
		}
		p = jsonlex.SkipSpace(src, e)
		if p >= len(src) || src[p] != ',' {
			return
		}
		p = jsonlex.SkipSpace(src, p+1)
		if p >= len(src) || src[p] != '"' {
			return
		}
		ke := d.stringEnd(p)
		if ke < 0 {
			return
		}
		k := src[p+1 : ke-1]
		if p, err = expect(src, ke, ':'); err != nil {
			return
		}
		p = jsonlex.SkipSpace(src, p)
		switch {
		case string(k) == "type":
			media = media || isMedia(d, p)
		case bytes.EqualFold(k, []byte("name")) || bytes.EqualFold(k, []byte("key")):
			namedSecret = namedSecret || namesSecret(d, p)
		}
	}
	return
}

type keyKind int

const (
	keyPlain keyKind = iota
	keySecret
	keyData
	keyBlob
	keyValue
	keyType
	keyName
)

// key renders the object key whose string spans [p, e) and says what kind it is.
func (r *renderer) key(d *doc, p, e int) (keyKind, error) {
	body := d.src[p+1 : e-1]
	dec, used, raw, err := decodeText(r.dec[:0], body, r.lim.key+margin, false)
	if !raw {
		r.dec = dec[:0]
	}
	if err != nil {
		return 0, err
	}
	kind := keyKindOf(dec)
	err = r.shown(d, p, body, dec, used == len(body), raw, r.lim.key)
	return kind, err
}

// keyKindOf says what kind of key the decoded key name dec is.
func keyKindOf(dec []byte) keyKind {
	if lowerWord(dec) {
		// Most keys are one lower-case word ("id", "name", "items"): it is the only
		// word isSecretName would split it into, so the switches decide alone.
		if isSecretWord(dec) || isSecretJoin(dec) {
			return keySecret
		}
		switch string(dec) {
		case "data":
			return keyData
		case "blob":
			return keyBlob
		case "value":
			return keyValue
		case "type":
			return keyType
		case "name", "key":
			return keyName
		}
		return keyPlain
	}
	kind := keyPlain
	switch {
	case isSecretName(dec):
		kind = keySecret
	case string(dec) == "data":
		kind = keyData
	case string(dec) == "blob":
		kind = keyBlob
	case bytes.EqualFold(dec, []byte("value")):
		kind = keyValue
	case string(dec) == "type":
		kind = keyType
	case bytes.EqualFold(dec, []byte("name")) || bytes.EqualFold(dec, []byte("key")):
		kind = keyName
	}
	return kind
}

// text renders a string whose body (between the quotes, or the whole text of a plain
// doc) starts the value at p: as embedded JSON if it holds some, else as redacted text
// cut to the string limit (fewer bytes for a blob).
func (r *renderer) text(d *doc, p int, body []byte, depth int, h hint) (flag bool, err error) {
	dec, used, raw, err := decodeText(r.dec[:0], body, r.lim.str+margin, d.plain)
	if !raw {
		r.dec = dec[:0]
	}
	if err != nil {
		return false, err
	}
	complete := used == len(body)
	if !d.plain && len(body) <= innerMax {
		if w := jsonlex.SkipSpace(dec, 0); w < len(dec) && (dec[w] == '{' || dec[w] == '[') {
			var s *nestScratch
			if len(body) < memoMin {
				s = r.scratch()
			}
			if in := d.innerDoc(p, body, dec, complete, raw, s); in != nil {
				if ok, err := r.embedded(in, d, p, depth); ok || err != nil {
					return false, err
				}
				// The attempt used the scratch dec lives in.
				if !raw {
					dec, _, _ = decodePrefix(r.dec[:0], body, r.lim.str+margin, d.plain)
					r.dec = dec[:0]
				}
			}
		}
	}
	keep := r.lim.str
	long := !complete || len(dec) > r.lim.blob+128
	if (h == hintBlob && long) || ((!complete || len(dec) > base64Min) && isBase64(dec[:min(len(dec), base64Min)])) {
		keep = min(keep, r.lim.blob)
	}
	if complete && len(dec) <= 64 && len(dec) > 1 && dec[0] == '-' && bytes.IndexAny(dec, "= ") < 0 {
		flag = isSecretName(dec)
	}
	return flag, r.shown(d, p, body, dec, complete, raw, keep)
}

// embedded renders the JSON text held by the string at p of d as a string again, after
// redacting and clipping it like any other value. ok is false when it turned out not to
// be JSON after all.
func (r *renderer) embedded(in, d *doc, p, depth int) (ok bool, err error) {
	outer, max, kept := r.out, r.max, r.inner
	// The scratch is taken while this string renders: one nested inside it gets a
	// buffer of its own.
	r.out, r.max, r.inner = kept[:0], max-len(outer), nil
	r.nest++
	end, _, err := r.value(in, 0, depth, hintNone)
	r.nest--
	if err == nil && jsonlex.SkipSpace(in.src, end) != len(in.src) {
		err = errSyntax
	}
	inner := r.out
	r.out, r.max, r.inner = outer, max, inner[:0]
	switch {
	case err == errSyntax:
		if d.inner != nil {
			d.inner[p] = nil
		}
		return false, nil
	case err != nil:
		return false, err
	}
	r.out = appendQuoted(r.out, inner)
	return true, r.check()
}

// shown writes the redacted text of a string cut to keep bytes, with a clip marker when
// anything was cut. dec is the start of its decoded text (all of it when complete),
// decoded a margin past keep so that a secret straddling the cut is still recognised.
// raw says dec is made of verbatim bytes only, so quoting it escapes nothing.
func (r *renderer) shown(d *doc, p int, body, dec []byte, complete, raw bool, keep int) error {
	spans := findSecrets(r.spans[:0], dec)
	r.spans = spans[:0]
	if complete && len(dec) <= keep+markerRoom {
		keep = -1 // a marker would take more room than it saves
	}
	if complete && len(spans) == 0 && keep < 0 {
		if raw {
			r.out = append(append(append(r.out, '"'), dec...), '"')
		} else {
			r.out = appendQuoted(r.out, dec)
		}
		return r.check()
	}
	red, used := applySpans(r.red[:0], dec, spans, keep)
	r.red = red[:0]
	if complete && used == len(dec) {
		r.out = appendQuoted(r.out, red)
		return r.check()
	}
	var n int64
	var sum [32]byte
	if complete {
		n, sum = int64(len(dec)), sha256.Sum256(dec)
	} else {
		n, sum = d.digest(p, body)
	}
	r.out = append(r.out, '"')
	r.out = jsonlex.AppendEscaped(r.out, red)
	r.out = append(r.out, "…"...)
	r.out = appendCountMarker(r.out, n-int64(used), n, "bytes", sum)
	r.out = append(r.out, '"')
	r.clipped = true
	return r.check()
}

func (r *renderer) array(d *doc, start, depth int) (int, error) {
	src := d.src
	r.out = append(r.out, '[')
	p := jsonlex.SkipSpace(src, start+1)
	if p < len(src) && src[p] == ']' {
		r.out = append(r.out, ']')
		return p + 1, r.check()
	}
	flag := false
	pair := secretPair(d, p) // ["X-Api-Key","v"]: the second item is the secret
	for n := 0; ; n++ {
		if n == r.lim.arr {
			x, err := d.extentSum(start)
			if err != nil {
				return 0, err
			}
			if d.length(p, x.end) > markerRoom {
				r.out = append(r.out, `"…`...)
				r.out = appendCountMarker(r.out, int64(x.count-n), int64(x.count), "items", x.sum)
				r.out = append(r.out, `"]`...)
				r.clipped = true
				return x.end, r.check()
			}
		}
		if d.hole(p, holeTail) {
			return 0, errOverflow
		}
		var err error
		if flag {
			p, err = d.skip(p)
			r.out = append(r.out, `"`+Redacted+`"`...)
			flag = false
		} else {
			item := p
			p, flag, err = r.value(d, p, depth, hintNone)
			flag = flag || n == 0 && pair || passwordFlagItem(d, item)
		}
		if err != nil {
			return 0, err
		}
		more, err := r.separator(src, &p, ']')
		if err != nil {
			return 0, err
		}
		if !more {
			return p, nil
		}
	}
}

// isBase64 reports whether b is made only of base64 (or base64url) characters, padding
// and line breaks, with some letters: what an encoded blob looks like and prose never
// does.
func isBase64(b []byte) bool {
	var m uint16
	for _, c := range b {
		if !is(c, clsB64Any) {
			return false
		}
		m |= classes[c]
	}
	return len(b) > 0 && m&clsUpper != 0 && m&clsLower != 0
}
