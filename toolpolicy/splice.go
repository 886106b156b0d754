package toolpolicy

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// ToolCuts appends to dst where, in b, the elements of the tools array of the
// response object at obj (its last "result" member's last "tools" member, as the
// host's JSON.parse reads them) lie that name a hidden tool, each cut with the
// separator its removal would leave dangling: Cut(b, cuts) is the answer without
// them, every other byte kept. It appends nothing when there is nothing to hide, or
// when the answer is not one it can follow (it then goes as it is).
func (p *Policy) ToolCuts(b []byte, obj jsonlex.Span, dst []jsonlex.Span) []jsonlex.Span {
	if !p.Filters() {
		return dst
	}
	result, ok := lastMember(b, obj.Start, "result")
	if !ok || b[result.Start] != '{' {
		return dst
	}
	tools, ok := lastMember(b, result.Start, "tools")
	if !ok || b[tools.Start] != '[' {
		return dst
	}
	elems, ok := jsonlex.Elements(b, tools.Start)
	if !ok {
		return dst
	}
	var hide []bool
	for i, e := range elems {
		if b[e.Start] != '{' || !p.HiddenLit(jsonlex.Get(b[e.Start:e.End], "name")) {
			continue
		}
		if hide == nil {
			hide = make([]bool, len(elems))
		}
		hide[i] = true
	}
	if hide == nil {
		return dst
	}
	return ElementCuts(elems, hide, dst)
}

// lastMember is the value of the last member called name of the object at b[i].
func lastMember(b []byte, i int, name string) (v jsonlex.Span, found bool) {
	_, ok := jsonlex.EachMember(b, i, func(m jsonlex.Member) bool {
		if jsonlex.KeyIs(b[m.Key.Start:m.Key.End], name) {
			v, found = m.Value, true
		}
		return true
	})
	return v, ok && found
}

// ElementCuts appends to dst the cuts that remove the elements elems[i] with
// remove[i] set from the array they are the elements of (in order, as
// jsonlex.Elements lists them), separators included: a run of removed elements goes
// with the space and comma up to the next kept element, or, at the end of the array,
// from the end of the kept element before it; when none is kept, everything from the
// first element's start to the last one's end goes, so the array is empty. The cuts
// are sorted and disjoint.
func ElementCuts(elems []jsonlex.Span, remove []bool, dst []jsonlex.Span) []jsonlex.Span {
	n := len(elems)
	for i := 0; i < n; {
		if !remove[i] {
			i++
			continue
		}
		j := i
		for j+1 < n && remove[j+1] {
			j++
		}
		switch {
		case j+1 < n:
			dst = append(dst, jsonlex.Span{Start: elems[i].Start, End: elems[j+1].Start})
		case i > 0:
			dst = append(dst, jsonlex.Span{Start: elems[i-1].End, End: elems[j].End})
		default:
			dst = append(dst, jsonlex.Span{Start: elems[0].Start, End: elems[n-1].End})
		}
		i = j + 1
	}
	return dst
}

// Cut returns b without the bytes of cuts (sorted, disjoint), in a new slice; b
// itself when there are none.
func Cut(b []byte, cuts []jsonlex.Span) []byte {
	if len(cuts) == 0 {
		return b
	}
	n := len(b)
	for _, c := range cuts {
		n -= c.End - c.Start
	}
	out := make([]byte, 0, n)
	at := 0
	for _, c := range cuts {
		out = append(out, b[at:c.Start]...)
		at = c.End
	}
	return append(out, b[at:]...)
}

// JSON-RPC error codes of the proxy's own answers.
const (
	// CodeUnknownTool is what the MCP specification's example, and the official
	// TypeScript SDK's McpServer, answer a tools/call of a tool the server does not
	// have with: invalid params.
	CodeUnknownTool = -32602
	// CodeTimeout is the official SDKs' RequestTimeout, the code their clients give
	// a request whose deadline passed.
	CodeTimeout = -32001
)

// maxNameInMessage bounds the tool name an error message repeats.
const maxNameInMessage = 200

// UnknownTool is the answer to the request with the raw id, a tools/call of the tool
// whose name literal is nameLit, as a server that has no such tool gives it (the MCP
// specification's example: -32602 "Unknown tool: NAME").
func UnknownTool(id, nameLit []byte) []byte {
	name := jsonlex.StringOf(nameLit)
	if len(name) > maxNameInMessage {
		cut := maxNameInMessage
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut] + "..."
	}
	return jsonlex.ErrorResponse(id, CodeUnknownTool, "Unknown tool: "+name)
}

// TimeoutMessage is the error message of a call that passed its deadline d.
func TimeoutMessage(d time.Duration) string {
	return "bir-proxy: the tool call did not finish within --call-timeout " + d.String() + "; it was cancelled"
}

// MaxTotalFactor bounds how long progress can keep a call open
// (ResetOnProgress): MaxTotalFactor × CallTimeout after it went, it ends whatever
// progress says, as the TypeScript SDK's maxTotalTimeout ends a request.
const MaxTotalFactor = 10

// TotalTimeoutMessage is the error message of a call that progress kept open until
// MaxTotalFactor × its deadline d.
func TotalTimeoutMessage(d time.Duration) string {
	return "bir-proxy: the tool call did not finish within " + strconv.Itoa(MaxTotalFactor) + " × --call-timeout " + d.String() +
		" (" + (MaxTotalFactor * d).String() + "), its cap however long it reports progress; it was cancelled"
}

// TotalTimeout is the host's answer to the tools/call with the raw id that progress
// kept open until MaxTotalFactor × its deadline d.
func TotalTimeout(id []byte, d time.Duration) []byte {
	return jsonlex.ErrorResponse(id, CodeTimeout, TotalTimeoutMessage(d))
}

// Timeout is the host's answer to the tools/call with the raw id whose deadline d
// passed.
func Timeout(id []byte, d time.Duration) []byte {
	return jsonlex.ErrorResponse(id, CodeTimeout, TimeoutMessage(d))
}

// Cancel is the notifications/cancelled the server gets for the request with the
// raw id whose deadline d passed.
func Cancel(id []byte, d time.Duration) []byte {
	b := make([]byte, 0, 128+len(id))
	b = append(b, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`...)
	b = append(b, id...)
	b = append(b, `,"reason":`...)
	b = jsonlex.AppendString(b, "bir-proxy: --call-timeout "+d.String()+" passed")
	return append(b, `}}`...)
}
