package redact

import (
	"crypto/sha256"
	"encoding/json"
	"errors"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// DefaultBudget is the size a report's args, result or error is clipped to by default
// (SPEC §3.3: 64 KiB).
const DefaultBudget = 64 << 10

// Report returns the JSON value raw redacted (SPEC §3.3) and then clipped so that the
// returned JSON text is at most budget bytes; clipped says whether anything was cut.
// raw that is not valid JSON comes back as a JSON string of its (redacted, clipped) text
// (so empty raw is ""). budget <= 0 means DefaultBudget. The result is always valid
// JSON; below about 120 bytes of budget a summary may not fit and a shorter stand-in
// ("[clipped]", then null) is returned.
//
// Input validity is checked strictly wherever a value is shown; inside a part that is cut
// away, only that strings end and brackets balance (checking every byte of 100 MB would
// cost more than the rest of the work together).
func Report(raw []byte, budget int) (out json.RawMessage, clipped bool) {
	if budget <= 0 {
		budget = DefaultBudget
	}
	z := &Redactor{r: renderer{
		// Sized for the common case, a small value shown whole: growing the buffers
		// costs more than the rendering.
		out:   make([]byte, 0, min(budget, len(raw)+len(raw)/8+16)),
		dec:   make([]byte, 0, 512),
		red:   make([]byte, 0, 512),
		spans: make([]span, 0, 8),
	}}
	return z.report(raw, budget)
}

// A Redactor is Report with its buffers kept from one value to the next, for a
// goroutine that redacts one value after another (the proxy's bookkeeping: Report
// allocated four buffers per value, the most objects of any step of a report). Its
// zero value is ready; it is not safe for concurrent use.
type Redactor struct {
	r renderer
	d doc
}

// maxKept bounds a buffer a Redactor keeps for the next value: one huge value must not
// pin its buffers for the rest of the session.
const maxKept = 256 << 10

// maxNested bounds the levels of embedded JSON whose scratch a Redactor keeps.
const maxNested = 8

// Report is the package's Report. The returned JSON is in the Redactor's buffer: it is
// valid until the next call, and whoever keeps it copies it.
func (z *Redactor) Report(raw []byte, budget int) (out json.RawMessage, clipped bool) {
	out, clipped = z.report(raw, budget)
	z.trim()
	return out, clipped
}

// trim drops the buffers too big to keep for the next value, and what reads the last
// value's bytes.
func (z *Redactor) trim() {
	r := &z.r
	for _, b := range []*[]byte{&r.dec, &r.red, &r.inner} {
		if cap(*b) > maxKept {
			*b = nil
		}
	}
	for _, s := range r.nested {
		if cap(s.buf) > maxKept {
			s.buf = nil
		}
		s.d = doc{} // it may read the caller's bytes in place
	}
	if len(r.nested) > maxNested {
		clear(r.nested[maxNested:]) // so that the backing array doesn't keep them
		r.nested = r.nested[:maxNested]
	}
	if cap(r.spans) > maxKept/16 {
		r.spans = nil
	}
	if cap(r.out) > maxKept {
		r.out = nil // out is the caller's until the next call; only the next one drops it
	}
	z.d = doc{} // the value's bytes and memos must not outlive the call
}

func (z *Redactor) report(raw []byte, budget int) (out json.RawMessage, clipped bool) {
	z.d = doc{src: raw}
	return z.reportDoc(&z.d, nil, budget)
}

// reportDoc renders d, or plain (made from d's source when nil) once d turns out not
// to be JSON.
func (z *Redactor) reportDoc(d, plain *doc, budget int) (out json.RawMessage, clipped bool) {
	if budget <= 0 {
		budget = DefaultBudget
	}
	r := &z.r
	raw := d.src
	for level := 0; level < len(levels); level++ {
		err := r.render(d, levels[level], budget)
		if err == nil {
			return r.out, r.clipped
		}
		if errors.Is(err, errSyntax) && !d.plain {
			if d = plain; d == nil {
				d = &doc{src: raw, plain: true}
			}
			level = -1
		}
	}
	return summary(d, budget), true
}

// limits bound what one rendering pass keeps.
type limits struct {
	str   int // bytes of a string's text
	key   int // bytes of an object key
	blob  int // characters of a base64 blob
	arr   int // items of an array
	obj   int // members of an object
	depth int // nested objects and arrays
}

// levels are the limits of successive passes, each tried when the one before did not
// fit the budget. The table is only ever read.
// Depth shrinks last: nesting alone costs a few bytes a level, and what a reader most
// wants to see is the shape of the value.
var levels = [...]limits{
	{str: 2048, key: 256, blob: 32, arr: 100, obj: 1000, depth: 32},
	{str: 1024, key: 192, blob: 32, arr: 50, obj: 400, depth: 32},
	{str: 512, key: 128, blob: 24, arr: 25, obj: 150, depth: 32},
	{str: 256, key: 96, blob: 16, arr: 12, obj: 60, depth: 24},
	{str: 128, key: 64, blob: 16, arr: 6, obj: 24, depth: 16},
	{str: 64, key: 48, blob: 12, arr: 3, obj: 10, depth: 8},
	{str: 24, key: 32, blob: 8, arr: 1, obj: 4, depth: 4},
	{str: 8, key: 16, blob: 4, arr: 1, obj: 2, depth: 2},
}

const (
	// margin is how far past the kept part of a string its text is redacted, so that a
	// secret starting in the kept part is seen whole whatever its shape (the longest
	// bounded one is a few hundred bytes; PEM blocks are handled by treating an
	// unterminated block as running to the end).
	margin = 1024
	// innerMax is the largest string that is tried as embedded JSON (decoding it whole);
	// a longer one is shown as text.
	innerMax = 4 << 20
	// memoMin is the size from which a value's extent, digest or decoding is remembered
	// across passes, so that shrinking the limits never rescans 100 MB.
	memoMin = 32 << 10
	// base64Min is the length from which a string made only of base64 characters is
	// taken for a blob.
	base64Min = 1024
	// markerRoom is about the size of a clip marker: cutting what is no bigger would
	// make the output longer, not shorter.
	markerRoom = 120
	// numberMax is the longest number kept: longer ones are no real measurement.
	numberMax = 128
	// lookaheadMembers is how many members of an object are read past its "data" or "value"
	// for a "type" or "name" (MCP content items and name/value pairs are small).
	lookaheadMembers = 16
)

// summary returns a stand-in for the whole value that fits budget: a marker naming it,
// or shorter ones when even that does not fit.
func summary(d *doc, budget int) json.RawMessage {
	kind, n, sum := d.describe()
	return summaryOf(kind, n, sum, budget)
}

func summaryOf(kind string, n int64, sum [32]byte, budget int) json.RawMessage {
	var out []byte
	out = append(out, `"[clipped `...)
	out = append(out, kind...)
	out = append(out, ", "...)
	out = appendInt(out, n)
	out = append(out, " bytes sha256:"...)
	out = appendHex(out, sum)
	out = append(out, `]"`...)
	for _, s := range [][]byte{out, []byte(`"[clipped]"`), []byte("null"), []byte(`""`), []byte("0")} {
		if len(s) <= budget {
			return s
		}
	}
	return json.RawMessage("0")
}

// describe names the whole value, with its size and sha256 as the markers count them.
func (d *doc) describe() (kind string, n int64, sum [32]byte) {
	if d.plain {
		if d.red != nil {
			return "text", d.red.plainN, d.red.plainSum
		}
		return "text", int64(len(d.src)), sha256.Sum256(d.src)
	}
	p := jsonlex.SkipSpace(d.src, 0)
	if p < len(d.src) && d.src[p] == '"' {
		if e := d.stringEnd(p); e > 0 {
			n, sum := d.digest(p, d.src[p+1:e-1])
			return "string", n, sum
		}
	}
	kind = "value"
	if p < len(d.src) {
		switch d.src[p] {
		case '{':
			kind = "object"
		case '[':
			kind = "array"
		}
	}
	x, err := d.extentSum(p)
	if err != nil {
		// Only a stand-in's plain doc knows the whole; a broken value is never
		// summarised from a stand-in (it is rendered as text).
		return kind, int64(len(d.src) - p), sha256.Sum256(d.src[p:])
	}
	return kind, d.length(p, x.end), x.sum
}
