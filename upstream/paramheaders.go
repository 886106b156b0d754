package upstream

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Mcp-Param headers (2026-07-28, "Custom Headers from Tool Parameters"): a tool's
// inputSchema may mark a primitive parameter with "x-mcp-header": NAME, and a client
// then mirrors the argument's value into an "Mcp-Param-NAME" header of each call. The
// annotations are learnt from the tools/list answers as they pass to the host.
//
// What the spec has a client do with a tool whose annotation breaks its rules —
// drop the tool from tools/list — is not done: the proxy never edits what the server
// sends. Such an annotation is ignored instead (no header), and the server, which
// validates headers against the body, decides.

// paramHeader is one annotated parameter: the chain of "properties" keys leading to it
// from the schema root, and its header name.
type paramHeader struct {
	path   []string
	header string
}

// learnTools records the annotations of the tools in a tools/list result.
func (st *streamableHTTP) learnTools(result []byte) {
	tools := jsonlex.Get(result, "tools")
	if tools == nil || !bytes.Contains(tools, []byte("x-mcp-header")) {
		return
	}
	elems, ok := jsonlex.Elements(tools, jsonlex.SkipSpace(tools, 0))
	if !ok {
		return
	}
	learnt := map[string][]paramHeader{}
	for _, el := range elems {
		tool := tools[el.Start:el.End]
		name, ok := jsonlex.DecodeString(jsonlex.Get(tool, "name"))
		if !ok {
			continue
		}
		var hs []paramHeader
		collectAnnotations(jsonlex.Get(tool, "inputSchema"), nil, &hs)
		if len(hs) > 0 && validAnnotations(hs) {
			learnt[name] = hs
		}
	}
	if len(learnt) == 0 {
		return
	}
	st.c.mu.Lock()
	if st.toolHeaders == nil {
		st.toolHeaders = map[string][]paramHeader{}
	}
	for k, v := range learnt {
		st.toolHeaders[k] = v
	}
	st.c.mu.Unlock()
}

// collectAnnotations walks schema's "properties" (only those: an annotation reached
// through items, a composition or a $ref is not allowed) for x-mcp-header values.
func collectAnnotations(schema []byte, path []string, out *[]paramHeader) {
	if len(path) > 16 {
		return
	}
	props := jsonlex.Get(schema, "properties")
	if props == nil {
		return
	}
	jsonlex.EachMember(props, jsonlex.SkipSpace(props, 0), func(m jsonlex.Member) bool {
		key, ok := jsonlex.DecodeString(props[m.Key.Start:m.Key.End])
		if !ok {
			return true
		}
		sub := props[m.Value.Start:m.Value.End]
		p := append(append([]string(nil), path...), key)
		if h := jsonlex.Get(sub, "x-mcp-header"); h != nil {
			typ, _ := jsonlex.DecodeString(jsonlex.Get(sub, "type"))
			name, ok := jsonlex.DecodeString(h)
			if ok && (typ == "string" || typ == "integer" || typ == "boolean") {
				*out = append(*out, paramHeader{path: p, header: name})
			}
		}
		collectAnnotations(sub, p, out)
		return true
	})
}

// validAnnotations checks the header names: HTTP tokens, unique regardless of case.
func validAnnotations(hs []paramHeader) bool {
	seen := map[string]bool{}
	for _, h := range hs {
		if h.header == "" || !isToken(h.header) || seen[strings.ToLower(h.header)] {
			return false
		}
		seen[strings.ToLower(h.header)] = true
	}
	return true
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return len(s) > 0
}

// paramHeaders sets the Mcp-Param headers of a tools/call from its arguments.
func (st *streamableHTTP) paramHeaders(h http.Header, m *outMsg) {
	name, ok := jsonlex.DecodeString(jsonlex.Get(m.params, "name"))
	if !ok {
		return
	}
	st.c.mu.Lock()
	hs := st.toolHeaders[name]
	st.c.mu.Unlock()
	if len(hs) == 0 {
		return
	}
	args := jsonlex.Get(m.params, "arguments")
	for _, ph := range hs {
		v := args
		for _, k := range ph.path {
			if v = jsonlex.Get(v, k); v == nil {
				break
			}
		}
		if s, ok := primitiveText(v); ok {
			h.Set("Mcp-Param-"+ph.header, headerValue(s))
		}
	}
}

// primitiveText is the header text of a string, integer or boolean JSON value; false
// for null, a missing value, or anything else.
func primitiveText(v []byte) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	switch v[0] {
	case '"':
		return jsonlex.DecodeString(v)
	case 't':
		return "true", string(v) == "true"
	case 'f':
		return "false", string(v) == "false"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if bytes.ContainsAny(v, ".eE") {
			return "", false // not an integer
		}
		return string(v), true
	}
	return "", false
}
