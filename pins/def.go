// Package pins guards against a server changing a tool behind the user's back (a
// "rug pull": the model reads a new description as an instruction). The first
// tools/list a server sends pins its tools; every later listing is compared with the
// pins, the JSON way, and a tool that drifted is said (warn) or hidden and refused
// (block). docs/pins.md says what is compared, the statuses and the bounds.
package pins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/bir-dev/bir-proxy/internal/jcs"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Def is what is kept of one tool's definition, as a server listed it.
type Def struct {
	Name string `json:"name"`
	// Body is the hash of everything compared but the name: a renamed tool keeps it.
	Body string `json:"body"`
	// Members are the hashes of the tool's members as compared (no _meta; annotations
	// with the MCP defaults filled in), by name; past maxMembers the rest share one.
	Members map[string]string `json:"members"`
	// Bytes is the definition's size as sent: what it costs the model's context.
	Bytes int `json:"bytes"`
	// ReadOnly says its annotations say readOnlyHint: true (--read-only).
	ReadOnly bool `json:"readOnly,omitempty"`
	// Raw is the definition as sent, when at most maxRaw bytes: for `pins diff`.
	Raw string `json:"raw,omitempty"`
}

// The bounds of what is read and kept (docs/pins.md).
const (
	// maxMembers: a tool's members compared one by one; the rest are compared as one.
	maxMembers = 16
	// otherMembers names the hash of the members past maxMembers.
	otherMembers = "(other members)"
	// maxRaw: a definition kept whole for `pins diff`.
	maxRaw = 64 << 10
	// MaxTools: the tools of one listing that are pinned and compared; past it the
	// rest of the listing is not looked at (and it is not complete).
	MaxTools = 4096
	// maxRawTotal: the definitions kept whole for one server, together.
	maxRawTotal = 8 << 20
)

// defaultHints are the annotations MCP gives a tool that does not say
// (server/tools.mdx, ToolAnnotations): an absent hint equals its default.
var defaultHints = [...]struct{ key, value string }{
	{"readOnlyHint", "false"},
	{"destructiveHint", "true"},
	{"idempotentHint", "false"},
	{"openWorldHint", "true"},
}

// reader reads definitions; its canonicalizer and buffers are reused.
type reader struct {
	canon jcs.Canonicalizer
	buf   bytes.Buffer
	// rawLeft is what may still be kept whole (maxRawTotal).
	rawLeft int
}

func newReader() *reader { return &reader{rawLeft: maxRawTotal} }

// hash is the sha256 of the canonical form of the JSON value v; a value with none
// (not JSON, a lone surrogate) hashes as its bytes, so it still compares with itself.
func (r *reader) hash(v []byte) string {
	r.buf.Reset()
	if err := r.canon.Canonicalize(&r.buf, v); err != nil {
		r.buf.Reset()
		r.buf.WriteString("\x00invalid:")
		r.buf.Write(v)
	}
	sum := sha256.Sum256(r.buf.Bytes())
	return hex.EncodeToString(sum[:12])
}

// read reads one tool object of a listing; false: not a tool (no string name).
func (r *reader) read(tool []byte) (Def, bool) {
	if len(tool) == 0 || tool[0] != '{' {
		return Def{}, false
	}
	type member struct {
		key   string
		value []byte
	}
	var ms []member
	var name []byte
	var annotations []byte
	sawAnnotations := false
	if _, ok := jsonlex.EachMember(tool, 0, func(m jsonlex.Member) bool {
		k := jsonlex.StringOf(tool[m.Key.Start:m.Key.End])
		v := tool[m.Value.Start:m.Value.End]
		switch k {
		case "_meta":
			return true
		case "name":
			name = v
		case "annotations":
			annotations, sawAnnotations = v, true
		}
		// The last of a name wins, as in the host's JSON.parse.
		if i := slices.IndexFunc(ms, func(x member) bool { return x.key == k }); i >= 0 {
			ms = slices.Delete(ms, i, i+1)
		}
		ms = append(ms, member{k, v})
		return true
	}); !ok || len(name) < 2 || name[0] != '"' {
		return Def{}, false
	}
	if !sawAnnotations {
		ms = append(ms, member{"annotations", nil})
	}
	d := Def{Name: jsonlex.StringOf(name), Bytes: len(tool), Members: make(map[string]string, min(len(ms), maxMembers+1))}
	if len(annotations) > 0 && annotations[0] == '{' {
		d.ReadOnly = string(jsonlex.Get(annotations, "readOnlyHint")) == "true"
	}
	slices.SortFunc(ms, func(a, b member) int { return bytes.Compare([]byte(a.key), []byte(b.key)) })
	body := sha256.New()
	var other []byte
	n := 0
	for _, m := range ms {
		if m.key == "name" {
			continue
		}
		var h string
		if m.key == "annotations" {
			h = r.hash(withDefaults(annotations))
		} else {
			h = r.hash(m.value)
		}
		body.Write([]byte(m.key))
		body.Write([]byte{0})
		body.Write([]byte(h))
		body.Write([]byte{0})
		if n < maxMembers {
			d.Members[m.key] = h
			n++
			continue
		}
		other = append(append(append(other, m.key...), 0), h...)
	}
	if other != nil {
		sum := sha256.Sum256(other)
		d.Members[otherMembers] = hex.EncodeToString(sum[:12])
	}
	d.Body = hex.EncodeToString(body.Sum(nil)[:12])
	if len(tool) <= maxRaw && len(tool) <= r.rawLeft {
		d.Raw = string(tool)
		r.rawLeft -= len(tool)
	}
	return d, true
}

// withDefaults is an annotations object (absent, null or an object) with every hint
// MCP defines and it leaves out set to its default, so that an absent hint compares
// equal to its explicit default. Anything else is compared as it is.
func withDefaults(a []byte) []byte {
	if len(a) == 0 || string(a) == "null" {
		a = []byte("{}")
	}
	if a[0] != '{' {
		return a
	}
	var have [len(defaultHints)]bool
	empty := true
	jsonlex.EachMember(a, 0, func(m jsonlex.Member) bool {
		empty = false
		k := a[m.Key.Start:m.Key.End]
		for i, h := range defaultHints {
			if jsonlex.KeyIs(k, h.key) {
				have[i] = true
			}
		}
		return true
	})
	out := make([]byte, 0, len(a)+100)
	out = append(out, a[:len(a)-1]...) // without its closing brace
	out = bytes.TrimRight(out, " \t\r\n")
	for i, h := range defaultHints {
		if have[i] {
			continue
		}
		if !empty {
			out = append(out, ',')
		}
		empty = false
		out = append(out, '"')
		out = append(out, h.key...)
		out = append(out, `":`...)
		out = append(out, h.value...)
	}
	return append(out, '}')
}

// Page reads the tools of one tools/list result: each tool, and whether the result
// says more pages follow (a nextCursor).
func Page(result []byte, each func(tool []byte)) (more bool) {
	if len(result) == 0 || result[0] != '{' {
		return false
	}
	var tools, next []byte
	jsonlex.EachMember(result, 0, func(m jsonlex.Member) bool {
		switch k := result[m.Key.Start:m.Key.End]; {
		case jsonlex.KeyIs(k, "tools"):
			tools = result[m.Value.Start:m.Value.End]
		case jsonlex.KeyIs(k, "nextCursor"):
			next = result[m.Value.Start:m.Value.End]
		}
		return true
	})
	jsonlex.EachElement(tools, each)
	return len(next) > 0 && string(next) != "null"
}
