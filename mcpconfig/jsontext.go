package mcpconfig

import (
	"sort"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// member is one key/value pair of a JSON object, located by byte offsets
// in the object's own text so that edits can splice around it.
type member struct {
	key      string // decoded
	keyStart int    // the key's opening quote
	keyEnd   int    // just past the key's closing quote
	valStart int
	valEnd   int
	value    value
}

// value is the JSON text of a member or element and, for a string, its decoded
// text; the fields are named as in gjson.Result, which they replace.
type value struct {
	Raw string
	// Mask is Raw with its comments and trailing commas blanked (jsonc.go):
	// what a JSON parser reads. It is Raw in a plain JSON file.
	Mask string
	Str  string // "" unless Raw is a string
}

func valueOf(raw, mask string) value {
	v := value{Raw: raw, Mask: mask}
	if v.isString() {
		v.Str = jsonlex.StringOf([]byte(raw))
	}
	return v
}

func (v value) isString() bool { return v.Raw != "" && v.Raw[0] == '"' }

func (v value) isArray() bool { return v.Raw != "" && v.Raw[0] == '[' }

// members lists obj's members in text order, duplicates included; ok is false
// when obj is not a JSON object. mask is obj's mask (jsonc.go), which is lexed;
// the values are obj's own text.
func members(obj, mask string) (ms []member, ok bool) {
	b := []byte(mask)
	lexed, _, ok := jsonlex.Members(b, jsonlex.SkipSpace(b, 0))
	if !ok {
		return nil, false
	}
	ms = make([]member, len(lexed))
	for i, m := range lexed {
		ms[i] = member{
			key:      jsonlex.StringOf(b[m.Key.Start:m.Key.End]),
			keyStart: m.Key.Start,
			keyEnd:   m.Key.End,
			valStart: m.Value.Start,
			valEnd:   m.Value.End,
			value:    valueOf(obj[m.Value.Start:m.Value.End], mask[m.Value.Start:m.Value.End]),
		}
	}
	return ms, true
}

// element is one value of a JSON array, located like a member.
type element struct {
	start, end int
	value      value
}

// elements lists the values of the JSON array arr, whose mask is lexed.
func elements(arr, mask string) []element {
	b := []byte(mask)
	spans, _ := jsonlex.Elements(b, jsonlex.SkipSpace(b, 0))
	es := make([]element, len(spans))
	for i, s := range spans {
		es[i] = element{start: s.Start, end: s.End, value: valueOf(arr[s.Start:s.End], mask[s.Start:s.End])}
	}
	return es
}

// edit replaces text[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// splice applies non-overlapping edits to s.
func splice(s string, edits []edit) string {
	sort.Slice(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	for _, e := range edits {
		s = s[:e.start] + e.text + s[e.end:]
	}
	return s
}

// quote is s as a JSON string, as encoding/json writes it but with HTML
// characters as they are: the \u003c spelling encoding/json prefers is valid
// but looks like corruption to someone reading their config.
func quote(s string) string { return jsonlex.Quote(s) }

// pathOf is the gjson/sjson path that addresses the nested keys; each key
// is escaped because server names and project paths contain '.', '*', '?',
// '/' and other characters the path syntax gives meaning to.
func pathOf(keys ...string) string {
	esc := make([]string, len(keys))
	for i, k := range keys {
		esc[i] = gjson.Escape(k)
		if strings.HasPrefix(esc[i], ":") {
			// sjson reads a leading ':' as "this is a key, not an index" and
			// drops it, so a server named ":x" would be written as "x".
			esc[i] = `\` + esc[i]
		}
	}
	return strings.Join(esc, ".")
}
