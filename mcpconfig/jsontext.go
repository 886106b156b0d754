package mcpconfig

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/tidwall/gjson"
)

// member is one key/value pair of a JSON object, located by byte offsets
// in the object's own text so that edits can splice around it.
type member struct {
	key      string // decoded
	keyStart int    // the key's opening quote
	keyEnd   int    // just past the key's closing quote
	valStart int
	valEnd   int
	value    gjson.Result
}

// members lists obj's members in text order. obj must be valid JSON.
func members(obj string) []member {
	var ms []member
	gjson.Parse(obj).ForEach(func(k, v gjson.Result) bool {
		ms = append(ms, member{
			key:      k.Str,
			keyStart: k.Index,
			keyEnd:   k.Index + len(k.Raw),
			valStart: v.Index,
			valEnd:   v.Index + len(v.Raw),
			value:    v,
		})
		return true
	})
	return ms
}

// element is one value of a JSON array, located like a member.
type element struct {
	start, end int
	value      gjson.Result
}

func elements(arr string) []element {
	var es []element
	gjson.Parse(arr).ForEach(func(_, v gjson.Result) bool {
		es = append(es, element{start: v.Index, end: v.Index + len(v.Raw), value: v})
		return true
	})
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

// quote is s as a JSON string. HTML characters stay as they are: the
// \u003c spelling encoding/json prefers is valid but looks like corruption
// to someone reading their config.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// pathOf is the gjson/sjson path that addresses the nested keys; each key
// is escaped because server names and project paths contain '.', '*', '?',
// '/' and other characters the path syntax gives meaning to.
func pathOf(keys ...string) string {
	esc := make([]string, len(keys))
	for i, k := range keys {
		esc[i] = gjson.Escape(k)
	}
	return strings.Join(esc, ".")
}
