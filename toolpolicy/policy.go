// Package toolpolicy is what the proxy decides about tools on its own, when asked to
// (--ignore-tool, --allow-tool, --call-timeout): which tools the host may see and
// call, how a tools/list answer loses the hidden ones, and the answers the proxy
// gives instead of the server (an unknown tool, a call past its deadline).
//
// Messages are raw bytes read with internal/jsonlex: a tools/list answer loses the
// elements of its tools array that name a hidden tool, with the separators that would
// dangle, and keeps every other byte.
package toolpolicy

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Policy is what the proxy enforces on tools. The zero Policy (or a nil one) changes
// nothing: every message passes as it is.
type Policy struct {
	// Ignore are patterns of tools hidden from the host; Allow, when not empty, the
	// patterns of the only tools it sees. A tool is hidden when it matches an Ignore
	// pattern, or when there are Allow patterns and it matches none.
	Ignore, Allow []string
	// CallTimeout, when positive, is how long a host's tools/call may take: then the
	// host gets an error, the server a notifications/cancelled, and a late answer is
	// dropped.
	CallTimeout time.Duration
	// ResetOnProgress says a progress notification for a call starts its deadline
	// again.
	ResetOnProgress bool

	// The seam for what decides about tools beyond the patterns (the tool pins'
	// block mode and --read-only, docs/pins.md), as documented fields, like
	// httputil.ReverseProxy's hooks:
	//
	// Listed, when set, is told each answer to a host's tools/list before it is cut
	// and forwarded, on the server's pump: its result (a view, valid during the call)
	// and whether the request began a listing (no cursor). It must not wait.
	Listed func(result []byte, first bool)
	// Hide, when set, hides a tool as the patterns do: cut from tools/list answers
	// (asked after Listed saw the answer), its calls refused. It must not wait.
	// HideWhy, when set, is the message of the refusal of a call Hide hid ("": the
	// patterns' Unknown tool).
	Hide    func(name string) bool
	HideWhy func(name string) string
	// Answer, when set, is asked for each answer to a host's tools/call before it is
	// forwarded, on the server's pump: id is its raw id, msg the answer (one object,
	// not a batch; views valid during the call). It returns what the host gets
	// instead, or nil for msg as it is; interception is given msg all the same. It
	// must not wait long (the result budget, budget.Budget.Answer, docs/budget.md).
	Answer func(id, msg []byte) []byte
}

// maxPattern bounds a pattern's length: matching is linear in it per name.
const maxPattern = 1024

// Check says what is wrong with p, if anything.
func (p *Policy) Check() error {
	for _, list := range [][]string{p.Ignore, p.Allow} {
		for _, pat := range list {
			switch {
			case pat == "":
				return errors.New("an empty tool pattern matches no tool")
			case len(pat) > maxPattern:
				return fmt.Errorf("a tool pattern of %d bytes: at most %d", len(pat), maxPattern)
			}
		}
	}
	if p.CallTimeout < 0 {
		return fmt.Errorf("--call-timeout %v: a deadline cannot be negative", p.CallTimeout)
	}
	if p.ResetOnProgress && p.CallTimeout == 0 {
		return errors.New("--call-timeout-reset-on-progress needs --call-timeout")
	}
	return nil
}

// Filters says whether p hides any tool.
func (p *Policy) Filters() bool {
	return p != nil && (len(p.Ignore) > 0 || len(p.Allow) > 0 || p.Hide != nil)
}

// Active says whether p changes anything at all.
func (p *Policy) Active() bool {
	return p != nil && (p.Filters() || p.CallTimeout > 0 || p.Answer != nil)
}

// Hidden reports whether the tool name is hidden from the host.
func (p *Policy) Hidden(name string) bool {
	if p == nil {
		return false
	}
	if p.Hide != nil && p.Hide(name) {
		return true
	}
	for _, pat := range p.Ignore {
		if Match(pat, name) {
			return true
		}
	}
	if len(p.Allow) == 0 {
		return false
	}
	for _, pat := range p.Allow {
		if Match(pat, name) {
			return false
		}
	}
	return true
}

// Refusal is the answer to the request of the raw id, a tools/call of the hidden tool
// whose name literal is nameLit: UnknownTool's, or HideWhy's when it says why.
func (p *Policy) Refusal(id, nameLit []byte) []byte {
	if p.HideWhy != nil && p.Hide != nil {
		if name, ok := jsonlex.DecodeString(nameLit); ok && p.Hide(name) {
			if why := p.HideWhy(name); why != "" {
				return jsonlex.ErrorResponse(id, CodeUnknownTool, why)
			}
		}
	}
	return UnknownTool(id, nameLit)
}

// HiddenLit is Hidden of a JSON string literal (quotes included); a value that is
// not a string names no tool, and is not hidden.
func (p *Policy) HiddenLit(lit []byte) bool {
	if !p.Filters() || len(lit) < 2 || lit[0] != '"' {
		return false
	}
	name, ok := jsonlex.DecodeString(lit)
	return ok && p.Hidden(name)
}

// Match reports whether name matches pattern as mcp-remote's --ignore-tool matches
// it: the whole name, '*' standing for any run of characters (none included), every
// other character itself, letters compared without case (Unicode simple folding, as
// a JavaScript RegExp with the i flag).
//
// It is the classic two-pointer wildcard match: a loop, no recursion, linear in the
// name for each '*' at most, whatever a peer names its tools.
func Match(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0 // the last '*' seen in pattern, and where in name it took over
	for n < len(name) {
		if p < len(pattern) && pattern[p] == '*' {
			star, mark = p, n
			p++
			continue
		}
		if p < len(pattern) {
			pr, pw := utf8.DecodeRuneInString(pattern[p:])
			nr, nw := utf8.DecodeRuneInString(name[n:])
			if sameFold(pr, nr) {
				p, n = p+pw, n+nw
				continue
			}
		}
		if star < 0 {
			return false
		}
		// Let the last '*' take one more character of the name, and try again.
		_, w := utf8.DecodeRuneInString(name[mark:])
		mark += w
		p, n = star+1, mark
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// sameFold reports whether a and b are the same letter under simple case folding.
func sameFold(a, b rune) bool {
	if a == b {
		return true
	}
	if a < utf8.RuneSelf && b < utf8.RuneSelf {
		return 'A' <= a && a <= 'Z' && a+'a'-'A' == b || 'A' <= b && b <= 'Z' && b+'a'-'A' == a
	}
	for f := unicode.SimpleFold(a); f != a; f = unicode.SimpleFold(f) {
		if f == b {
			return true
		}
	}
	return false
}

// String describes p as the flags that set it, for logs and status.
func (p *Policy) String() string {
	if !p.Active() {
		return ""
	}
	var parts []string
	for _, pat := range p.Ignore {
		parts = append(parts, "--ignore-tool "+pat)
	}
	for _, pat := range p.Allow {
		parts = append(parts, "--allow-tool "+pat)
	}
	if p.CallTimeout > 0 {
		parts = append(parts, "--call-timeout "+p.CallTimeout.String())
		if p.ResetOnProgress {
			parts = append(parts, "--call-timeout-reset-on-progress")
		}
	}
	return strings.Join(parts, " ")
}
