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
	r.stack = append(r.stack[:0], item{raw: raw, path: root})
	for len(r.stack) > 0 {
		it := r.stack[len(r.stack)-1]
		r.stack = r.stack[:len(r.stack)-1]
		if len(r.lines) >= maxLines {
			if !r.cut {
				r.cut = true
				h := sha256.New()
				h.Write(raw)
				r.emit(0, "", "…(too long to show; value sha256:"+hex.EncodeToString(h.Sum(nil))[:16]+")")
			}
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
	return r.lines
}

func (r *renderer) emit(depth int, key, s string) {
	r.lines = append(r.lines, strings.Repeat("  ", depth)+key+s)
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
		ms, _, ok := jsonlex.Members(b, 0)
		if !ok {
			r.emit(it.depth, it.key, "<not JSON> "+compact(b))
			return
		}
		type kv struct {
			k string
			v []byte
		}
		byKey := make(map[string]int, len(ms))
		var kvs []kv
		for _, m := range ms {
			k := jsonlex.StringOf(b[m.Key.Start:m.Key.End])
			v := b[m.Value.Start:m.Value.End]
			if i, ok := byKey[k]; ok {
				kvs[i].v = v
				continue
			}
			byKey[k] = len(kvs)
			kvs = append(kvs, kv{k, v})
		}
		typ := ""
		if i, ok := byKey["type"]; ok {
			typ = jsonlex.StringOf(kvs[i].v)
		}
		slices.SortFunc(kvs, func(a, b kv) int { return strings.Compare(a.k, b.k) })
		if len(kvs) == 0 {
			r.emit(it.depth, it.key, "{}")
			return
		}
		r.emit(it.depth, it.key, "{")
		r.stack = append(r.stack, item{depth: it.depth, close: "}"})
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
		vs, ok := jsonlex.Elements(b, 0)
		if !ok {
			r.emit(it.depth, it.key, "<not JSON> "+compact(b))
			return
		}
		if len(vs) == 0 {
			r.emit(it.depth, it.key, "[]")
			return
		}
		r.emit(it.depth, it.key, "[")
		r.stack = append(r.stack, item{depth: it.depth, close: "]"})
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
