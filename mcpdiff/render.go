package mcpdiff

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// MaxDepth is how deep into a peer's JSON the comparison looks (the repository's bound
// for peer JSON); a value nested deeper is compared as its bytes, in one line.
const MaxDepth = 32

// maxLines bounds the lines one value renders to; past it the rest is one line of its
// hash, so two huge values still compare, and a diff stays readable.
const maxLines = 20000

// renderer turns a JSON value into lines, normalized the MCP way: object members in
// key order (the last of a duplicated key winning, as JSON.parse), text that holds JSON
// shown as that JSON, images and blobs as their hash and size, volatile values as
// placeholders. Iterative: a stack of items, nothing recursive on the peer's bytes.
type renderer struct {
	o      *Options
	ignore [][]string
	lines  []string
	stack  []item
	cut    bool
	// trunc: a container had more members than the lines left, and those past them
	// were never walked; the hash line is then due even if the lines did not run out.
	trunc bool
}

type item struct {
	key   string   // shown before the value: `"name": `, or "" in an array or at the root
	path  []string // from the root: member names, "#N" for an index
	raw   []byte   // the value; nil for a closing line
	depth int
	close string // a closing bracket to print at depth
	leaf  string // when set, printed as the value instead of raw
}

func (r *renderer) render(raw []byte, root []string) []string {
	r.lines = r.lines[:0]
	r.cut, r.trunc = false, false // a renderer renders both sides (CompareTool): one's cut is not the other's
	r.stack = append(r.stack[:0], item{raw: raw, path: root})
	cut := func() {
		if !r.cut {
			r.cut = true
			h := sha256.New()
			h.Write(raw)
			r.emit(0, "", "…(too long to show; value sha256:"+hex.EncodeToString(h.Sum(nil))[:16]+")")
		}
	}
	for len(r.stack) > 0 {
		it := r.stack[len(r.stack)-1]
		r.stack = r.stack[:len(r.stack)-1]
		if len(r.lines) >= maxLines {
			cut()
			continue
		}
		if it.leaf != "" {
			r.emit(it.depth, it.key, it.leaf)
			continue
		}
		if it.raw == nil {
			r.emit(it.depth, "", it.close)
			continue
		}
		r.value(it)
	}
	if r.trunc {
		// Members were left unwalked: a change among them is told by the hash.
		cut()
	}
	return r.lines
}

// room is how many more items may be pushed: each renders at least a line, and the
// lines are bounded by maxLines. A container with more members than room has those
// past it left unwalked (trunc): an item per member of a 2^20-member array, each with
// its path, was 0.5-1.6 GB before the cap ever applied.
func (r *renderer) room() int {
	return max(0, maxLines-len(r.lines)-len(r.stack))
}

// maxLine bounds a rendered line, in bytes: past it the line is cut, and ends with its
// length and hash, so two long lines that differ still differ. A line was a string
// whole: an 8 MiB text on one line printed 8 MiB twice in a diff, and a text of long
// lines that differ at their ends was compared a whole line per cell of the diff's
// table (95 MB answers of 1900 such lines: 90 s).
const maxLine = 1024

func (r *renderer) emit(depth int, key, s string) {
	line := strings.Repeat("  ", depth) + key + s
	if len(line) > maxLine {
		h := sha256.Sum256([]byte(line))
		cut := maxLine
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + "…(" + strconv.Itoa(len(line)) + " bytes sha256:" + hex.EncodeToString(h[:])[:16] + ")"
	}
	r.lines = append(r.lines, line)
}

func (r *renderer) value(it item) {
	b := bytes.TrimSpace(it.raw)
	if r.ignored(it.path) {
		r.emit(it.depth, it.key, "<ignored>")
		return
	}
	if len(b) == 0 {
		r.emit(it.depth, it.key, "<nothing>")
		return
	}
	if it.depth >= MaxDepth && (b[0] == '{' || b[0] == '[') {
		r.emit(it.depth, it.key, "<nested past 32 levels> "+compact(b))
		return
	}
	switch b[0] {
	case '{':
		r.emit(it.depth, it.key, "{") // taken back below for an empty or broken object
		open := len(r.lines)
		r.stack = append(r.stack, item{depth: it.depth, close: "}"})
		kvs, typ, more, ok := firstMembers(b, r.room())
		if !ok || len(kvs) == 0 && !more {
			r.lines, r.stack = r.lines[:open-1], r.stack[:len(r.stack)-1]
			if !ok {
				r.emit(it.depth, it.key, "<not JSON> "+compact(b))
			} else {
				r.emit(it.depth, it.key, "{}")
			}
			return
		}
		r.trunc = r.trunc || more
		for i := len(kvs) - 1; i >= 0; i-- {
			p := append(slices.Clip(it.path), kvs[i].k)
			child := item{key: jsonlex.Quote(kvs[i].k) + ": ", path: p, raw: kvs[i].v, depth: it.depth + 1}
			if blob := r.blob(typ, kvs[i].k, kvs[i].v); blob != "" && !r.ignored(p) {
				child.leaf = blob
			}
			if kvs[i].k == "text" && len(kvs[i].v) > 0 && kvs[i].v[0] == '"' {
				if inner, ok := jsonText(kvs[i].v); ok {
					child.key = jsonlex.Quote(kvs[i].k) + " (JSON): "
					child.raw = inner
				}
			}
			r.stack = append(r.stack, child)
		}
	case '[':
		r.emit(it.depth, it.key, "[")
		open := len(r.lines)
		r.stack = append(r.stack, item{depth: it.depth, close: "]"})
		vs, more, ok := firstElements(b, r.room())
		if !ok || len(vs) == 0 && !more {
			r.lines, r.stack = r.lines[:open-1], r.stack[:len(r.stack)-1]
			if !ok {
				r.emit(it.depth, it.key, "<not JSON> "+compact(b))
			} else {
				r.emit(it.depth, it.key, "[]")
			}
			return
		}
		r.trunc = r.trunc || more
		for i := len(vs) - 1; i >= 0; i-- {
			p := append(slices.Clip(it.path), "#"+strconv.Itoa(i))
			r.stack = append(r.stack, item{path: p, raw: b[vs[i].Start:vs[i].End], depth: it.depth + 1})
		}
	case '"':
		s, ok := jsonlex.DecodeString(b)
		if !ok {
			r.emit(it.depth, it.key, "<not JSON> "+compact(b))
			return
		}
		if !r.o.Strict {
			s = volatile(s)
		}
		if strings.Contains(s, "\n") {
			r.block(it, s)
			return
		}
		r.emit(it.depth, it.key, jsonlex.Quote(s))
	default:
		lit := string(b)
		if !r.o.Strict && len(it.path) > 0 && volatileRes().key.MatchString(it.path[len(it.path)-1]) && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')) {
			lit = "<duration>"
		} else if f, err := strconv.ParseFloat(lit, 64); err == nil && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')) {
			// 1.0 is 1 to every JSON reader; a number past a double keeps its text.
			if s := strconv.FormatFloat(f, 'g', -1, 64); !strings.ContainsAny(s, "eE") || strings.ContainsAny(lit, "eE") {
				lit = s
			}
		}
		r.emit(it.depth, it.key, lit)
	}
}

// block renders a string holding newlines a line of it to a line, between `"""`
// lines: a multi-line text was one quoted line ("a\nb\n…"), and a change of one of
// its lines showed as the whole text removed and added. The lines are one level deeper
// than the key and the closing `"""` is at the key's level, so the rendering still
// tells values apart (jsonlex.Quote never yields `"""`; a line of the text is always
// indented deeper than what follows the string). Past the line budget the rest of the
// text is left out and the hash line says the value was cut.
func (r *renderer) block(it item, s string) {
	r.emit(it.depth, it.key, `"""`)
	for {
		if len(r.lines) >= maxLines {
			r.trunc = true
			return
		}
		line, rest, more := strings.Cut(s, "\n")
		r.emit(it.depth+1, "", line)
		if !more {
			break
		}
		s = rest
	}
	r.emit(it.depth, "", `"""`)
}

type kv struct {
	k string
	v []byte
}

// firstMembers returns the first n members of the object b in key order (the last of
// a duplicated key winning, as JSON.parse), the value of its "type" member, and
// whether it has more than n; ok is false when b is not an object. The whole object is
// read (to know it is one), but no more than 2n members are held at a time.
func firstMembers(b []byte, n int) (kvs []kv, typ string, more, ok bool) {
	type seen struct {
		kv
		seq int
	}
	var cand []seen
	full, thr := false, "" // once full, only keys up to thr can be among the first n
	settle := func() {
		// Stable: of equal keys, the later stays after the earlier.
		slices.SortStableFunc(cand, func(a, b seen) int { return strings.Compare(a.k, b.k) })
		out := cand[:0]
		for i := range cand {
			if i+1 < len(cand) && cand[i+1].k == cand[i].k {
				continue // the last of a duplicated key wins
			}
			out = append(out, cand[i])
		}
		cand = out
		if len(cand) > n {
			cand, full, more = cand[:n], true, true
			if n > 0 {
				thr = cand[n-1].k
			}
		}
	}
	seq := 0
	_, ok = jsonlex.EachMember(b, 0, func(m jsonlex.Member) bool {
		key, v := b[m.Key.Start:m.Key.End], b[m.Value.Start:m.Value.End]
		if jsonlex.KeyIs(key, "type") {
			typ = jsonlex.StringOf(v)
		}
		seq++
		if full && (n == 0 || plain(key) && string(key[1:len(key)-1]) > thr) {
			return true // past the first n: not even decoded
		}
		k := jsonlex.StringOf(key)
		if full && (n == 0 || k > thr) {
			return true
		}
		cand = append(cand, seen{kv{k, v}, seq})
		if len(cand) >= max(2*n, 64) {
			settle()
		}
		return true
	})
	if !ok {
		return nil, "", false, false
	}
	settle()
	kvs = make([]kv, len(cand))
	for i, c := range cand {
		kvs[i] = c.kv
	}
	return kvs, typ, more, true
}

// plain reports whether the key literal decodes to its bytes between the quotes
// (ASCII, no escape): compared as they are, nothing decoded.
func plain(key []byte) bool {
	for _, c := range key[1 : len(key)-1] {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// firstElements returns the spans of the first n values of the array b, and whether
// it has more; ok is false when b is not an array. The whole array is read (to know
// it is one), none past the first n kept.
func firstElements(b []byte, n int) (vs []jsonlex.Span, more, ok bool) {
	if len(b) == 0 || b[0] != '[' {
		return nil, false, false
	}
	i := jsonlex.SkipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return nil, false, true
	}
	for {
		v := jsonlex.SkipValue(b, i)
		if v < 0 {
			return nil, false, false
		}
		if len(vs) < n {
			vs = append(vs, jsonlex.Span{Start: i, End: v})
		} else {
			more = true
		}
		i = jsonlex.SkipSpace(b, v)
		if i >= len(b) {
			return nil, false, false
		}
		switch b[i] {
		case ',':
			i = jsonlex.SkipSpace(b, i+1)
		case ']':
			return vs, more, true
		default:
			return nil, false, false
		}
	}
}

// blob says how an image's, audio's or resource's bytes are compared: their size and
// hash; "" for any other member.
func (r *renderer) blob(typ, key string, v []byte) string {
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	if !(key == "blob" || key == "data" && (typ == "image" || typ == "audio")) {
		return ""
	}
	s := jsonlex.StringOf(v)
	h := sha256.Sum256([]byte(s))
	n := base64.StdEncoding.DecodedLen(len(s)) - strings.Count(s[max(0, len(s)-2):], "=")
	if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
		n = len(dec)
		if !r.o.Strict && len(dec) <= maxVolatile && utf8.Valid(dec) && !bytes.ContainsRune(dec, 0) {
			// A text blob: its volatile values are as volatile as a text item's.
			dec = []byte(volatile(string(dec)))
		}
		h = sha256.Sum256(dec)
	}
	return "<" + strconv.Itoa(n) + " bytes sha256:" + hex.EncodeToString(h[:])[:16] + ">"
}

// jsonText returns the JSON a text member holds (an object or array), decoded from the
// string literal lit.
func jsonText(lit []byte) ([]byte, bool) {
	s, ok := jsonlex.DecodeString(lit)
	if !ok {
		return nil, false
	}
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '{' && t[0] != '[') || !jsonlex.Valid([]byte(t)) {
		return nil, false
	}
	return []byte(t), true
}

func compact(b []byte) string {
	const max = 200
	if len(b) > max {
		h := sha256.Sum256(b)
		return string(b[:max]) + "…(" + strconv.Itoa(len(b)) + " bytes sha256:" + hex.EncodeToString(h[:])[:16] + ")"
	}
	return string(b)
}

// volatileRes is compiled on first use, not at package initialisation: every
// bir-proxy process links this package, and compiling these took 0.6 ms of each
// start, the supervisor's included (issue 26), for a diff most never make.
var volatileRes = sync.OnceValue(func() *volatileRegexps {
	return &volatileRegexps{
		timestamp: regexp.MustCompile(`\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})?`),
		// JavaScript's Date.toString() and the HTTP date (RFC 1123), as servers print times.
		jsDate: regexp.MustCompile(`\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun),? (\d{1,2} )?(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{1,2} )?\d{4} \d{2}:\d{2}:\d{2}( GMT([+-]\d{4})?( \([^)]{1,64}\))?)?`),
		// A time of day, as a locale prints it ("12:27:06 AM", "00:27:06.5").
		clock:    regexp.MustCompile(`\b\d{1,2}:\d{2}:\d{2}(\.\d+)?( ?[AaPp][Mm]\b)?`),
		uuid:     regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`),
		duration: regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|us|ms|s)\b|\b\d+(\.\d+)? ?(ms|milliseconds|seconds|sec)\b|\bPT(\d+H)?(\d+M)?(\d+(\.\d+)?S)?\b`),
		// key names a number that is a measured duration or a clock reading. The
		// camelCase suffixes are case-sensitive: "items" and "lat" name neither.
		key: regexp.MustCompile(`(?i:duration|elapsed|latency|took|timestamp|uptime|_ms$|^ms$|_at$|^time$)|Ms$|At$`),
	}
})

type volatileRegexps struct {
	timestamp, jsDate, clock, uuid, duration, key *regexp.Regexp
}

// maxVolatile is the longest string searched for volatile values; a longer one is
// compared as it is (the regexps are linear, but a diff of megabytes of text is
// compared line by line anyway).
const maxVolatile = 1 << 20

// volatile replaces what changes from run to run in s: RFC 3339 timestamps, UUIDs and
// durations.
func volatile(s string) string {
	if len(s) > maxVolatile {
		return s
	}
	re := volatileRes()
	if strings.ContainsAny(s, "-") {
		s = re.timestamp.ReplaceAllLiteralString(s, "<timestamp>")
		s = re.uuid.ReplaceAllLiteralString(s, "<uuid>")
	}
	if strings.Contains(s, ":") {
		s = re.jsDate.ReplaceAllLiteralString(s, "<timestamp>")
		s = re.clock.ReplaceAllLiteralString(s, "<time>")
	}
	return re.duration.ReplaceAllLiteralString(s, "<duration>")
}
