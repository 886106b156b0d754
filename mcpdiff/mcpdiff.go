// Package mcpdiff compares a tool call's recorded answer with a new one the MCP way:
// an error that appeared or went away is error drift, not a changed value; content items
// are compared by type, text that holds JSON as JSON, structuredContent structurally,
// images and blobs by their hash and size; volatile values (RFC 3339 timestamps, UUIDs,
// durations) are ignored unless Strict. A changed answer comes with a unified diff of
// the two, normalized. Everything here reads peer JSON iteratively, to MaxDepth.
package mcpdiff

import (
	"bytes"
	"fmt"
	"github.com/bir-dev/bir-proxy/internal/udiff"
	"strings"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Status is what became of one recorded call.
type Status string

const (
	Same          Status = "same"
	Changed       Status = "changed"
	ErrorDrift    Status = "error_drift"    // an isError or a JSON-RPC error appeared or went away
	MissingTool   Status = "missing_tool"   // the server no longer lists the tool
	SchemaDrift   Status = "schema_drift"   // the tool's input or output schema changed
	Skipped       Status = "skipped"        // not run: by the safety rules or the selection
	NotReplayable Status = "not_replayable" // the record cannot be run again (redacted arguments, no answer recorded)
	NotRun        Status = "not_run"        // it would have run, but could not (the server died, a timeout)
	SlowDown      Status = "slower"         // the same answer, past --max-slowdown
)

// Finding reports whether s is something verify fails on.
func (s Status) Finding() bool {
	switch s {
	case Changed, ErrorDrift, MissingTool, SchemaDrift, NotRun, SlowDown:
		return true
	}
	return false
}

// Options tune the comparison.
type Options struct {
	// Strict compares volatile values (timestamps, UUIDs, durations) and the result's
	// _meta too.
	Strict bool
	// Ignore are JSON paths into the result not compared: `content[0].text`,
	// `structuredContent.id`, `content[*].text.items[*].mtime` (a text holding JSON is
	// gone into as that JSON); a leading `$.` is allowed.
	Ignore []string
}

// Answer is a JSON-RPC answer's result or error (one of them), raw.
type Answer struct {
	Result []byte
	Error  []byte
}

// Comparison is the verdict on one answer.
type Comparison struct {
	Status Status
	Reason string // one line, for error drift and changes
	Diff   string // a unified diff, recorded → current, when something changed
}

// Compare compares the recorded answer with the current one.
func Compare(rec, cur Answer, o Options) (Comparison, error) {
	if bytes.Equal(rec.Result, cur.Result) && bytes.Equal(rec.Error, cur.Error) && (rec.Result != nil) == (cur.Result != nil) {
		// The same bytes are the same answer, whatever the options: nothing to render.
		if _, err := parsePaths(o.Ignore); err != nil {
			return Comparison{}, err
		}
		return Comparison{Status: Same}, nil
	}
	pats, err := parsePaths(o.Ignore)
	if err != nil {
		return Comparison{}, err
	}
	if !o.Strict {
		pats = append(pats, []string{"_meta"})
	}
	switch {
	case rec.Error == nil && cur.Error != nil:
		return Comparison{Status: ErrorDrift, Reason: "a JSON-RPC error appeared: " + errorLine(cur.Error),
			Diff: diffValues(rec, cur, o, pats)}, nil
	case rec.Error != nil && cur.Error == nil:
		return Comparison{Status: ErrorDrift, Reason: "the JSON-RPC error went away (was " + errorLine(rec.Error) + ")",
			Diff: diffValues(rec, cur, o, pats)}, nil
	}
	if rec.Error == nil {
		was, is := isError(rec.Result), isError(cur.Result)
		if was != is {
			reason := "the tool now fails (isError): " + firstText(cur.Result)
			if was {
				reason = "the tool no longer fails (isError went away)"
			}
			return Comparison{Status: ErrorDrift, Reason: reason, Diff: diffValues(rec, cur, o, pats)}, nil
		}
	}
	d := diffValues(rec, cur, o, pats)
	if d == "" {
		return Comparison{Status: Same}, nil
	}
	return Comparison{Status: Changed, Reason: "the result changed", Diff: d}, nil
}

// CompareTool compares a tool's recorded listing with its current one: its input and
// output schemas, strictly (a schema has nothing volatile). drift is false when both
// are the same.
func CompareTool(rec, cur []byte) (drift bool, reason, diff string) {
	what, diff := diffMembers(rec, cur, []string{"inputSchema", "outputSchema"})
	if len(what) == 0 {
		return false, "", ""
	}
	return true, strings.Join(what, " and ") + " changed", diff
}

// DiffMembers is the unified diff of the members keys of a tool's recorded listing
// and its current one, member by member, compared strictly (nothing is volatile in
// a definition); "" when none of them differs.
func DiffMembers(rec, cur []byte, keys []string) string {
	_, diff := diffMembers(rec, cur, keys)
	return diff
}

func diffMembers(rec, cur []byte, keys []string) (what []string, diff string) {
	var b strings.Builder
	for _, k := range keys {
		r := &renderer{o: &Options{Strict: true}}
		a := append([]string(nil), r.render(jsonlex.Get(rec, k), nil)...)
		c := r.render(jsonlex.Get(cur, k), nil)
		if d := unified(a, c, "recorded "+k, "current "+k); d != "" {
			what = append(what, k)
			b.WriteString(d)
		}
	}
	return what, b.String()
}

func diffValues(rec, cur Answer, o Options, pats [][]string) string {
	render := func(a Answer) []string {
		r := &renderer{o: &o, ignore: pats}
		if a.Error != nil {
			return append([]string{"error:"}, r.render(a.Error, []string{"error"})...)
		}
		return r.render(a.Result, nil)
	}
	return unified(render(rec), render(cur), "recorded", "current")
}

func isError(result []byte) bool { return string(jsonlex.Get(result, "isError")) == "true" }

func errorLine(e []byte) string {
	code := string(jsonlex.Get(e, "code"))
	msg := jsonlex.StringOf(jsonlex.Get(e, "message"))
	return clip(strings.TrimSpace(code+" "+msg), 200)
}

func firstText(result []byte) string {
	var s string
	jsonlex.EachElement(jsonlex.Get(result, "content"), func(v []byte) {
		if s == "" {
			s = jsonlex.StringOf(jsonlex.Get(v, "text"))
		}
	})
	return clip(s, 200)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (r *renderer) ignored(path []string) bool {
	for _, p := range r.ignore {
		if len(p) != len(path) {
			continue
		}
		ok := true
		for i := range p {
			if p[i] != path[i] && !(p[i] == "*" && !strings.HasPrefix(path[i], "#")) && !(p[i] == "#*" && strings.HasPrefix(path[i], "#")) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// parsePaths reads Ignore paths: names separated by dots, [N] or [*] for an index,
// ["name"] for a name with dots or brackets, * for any name.
func parsePaths(ps []string) ([][]string, error) {
	var out [][]string
	for _, p := range ps {
		segs, err := parsePath(p)
		if err != nil {
			return nil, fmt.Errorf("--ignore %q: %w", p, err)
		}
		out = append(out, segs)
	}
	return out, nil
}

func parsePath(p string) ([]string, error) {
	s := strings.TrimPrefix(strings.TrimPrefix(p, "$"), ".")
	var segs []string
	for len(s) > 0 {
		switch {
		case s[0] == '.':
			s = s[1:]
			if s == "" || s[0] == '.' || s[0] == '[' {
				return nil, fmt.Errorf("an empty name")
			}
		case strings.HasPrefix(s, `["`):
			end := strings.Index(s[2:], `"]`)
			if end < 0 {
				return nil, fmt.Errorf(`a [" without its "]`)
			}
			segs = append(segs, s[2:2+end])
			s = s[2+end+2:]
		case s[0] == '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, fmt.Errorf("a [ without its ]")
			}
			idx := s[1:end]
			if idx != "*" {
				for _, c := range idx {
					if c < '0' || c > '9' {
						return nil, fmt.Errorf("[%s]: want a number or *", idx)
					}
				}
				if idx == "" {
					return nil, fmt.Errorf("[]: want a number or *")
				}
			}
			segs = append(segs, "#"+idx)
			s = s[end+1:]
		default:
			end := strings.IndexAny(s, ".[")
			if end < 0 {
				end = len(s)
			}
			segs = append(segs, s[:end])
			s = s[end:]
		}
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("an empty path")
	}
	return segs, nil
}

// maxDiff bounds a diff, in bytes: past it the diff is cut at a line, with a note.
// Its lines are bounded (maxLines, maxLine), but not their sum: 20,000 lines of a
// KiB on each side were 40 MiB printed for one call.
const maxDiff = 256 << 10

// unified is the unified diff of a and b ("" when they are the same lines), clipped
// to maxDiff.
func unified(a, b []string, nameA, nameB string) string {
	d := udiff.Lines(a, b, nameA, nameB)
	if len(d) <= maxDiff {
		return d
	}
	cut := strings.LastIndexByte(d[:maxDiff], '\n') + 1
	rest := strings.Split(strings.TrimSuffix(d[cut:], "\n"), "\n")
	out := d[:cut] + fmt.Sprintf("…(the diff is clipped: %d more lines, %d bytes)\n", len(rest), len(d)-cut)
	// The hash lines of a value cut at maxLines (the last of its rendering) are kept:
	// they tell a change past the cut.
	for _, l := range rest[max(0, len(rest)-8):] {
		if strings.Contains(l, "…(too long to show; value sha256:") {
			out += l + "\n"
		}
	}
	return out
}
