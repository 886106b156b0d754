package mock

import (
	"sort"
	"strconv"

	"github.com/bir-dev/bir-proxy/internal/editdist"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/redact"
)

// maxNearest is how many recorded calls an unmatched call's error names.
const maxNearest = 3

// maxQuoted bounds the arguments shown in an error's data, each: a recording's
// arguments may be megabytes. They are shown redacted (redact.Report, as reports
// show them): a cassette holds the arguments raw, secrets included, and an error
// goes to the host, and from there to a model or a log.
const maxQuoted = 2048

// unmatched is the error answering a call no recording matches: it names the nearest
// recorded calls, those of the same tool (the closest arguments first) or, for a tool
// never recorded, the tools of the nearest names.
func (m *Mock) unmatched(id []byte, tool string, args []byte) []byte {
	near := m.nearest(tool, args)
	msg := "bir-proxy mock: no recorded call of " + strconv.Quote(tool) + " has these arguments"
	if len(m.byTool[tool]) == 0 {
		msg = "bir-proxy mock: no recorded call of " + strconv.Quote(tool)
	}
	if len(near) > 0 {
		msg += "; nearest recorded: "
		for i, e := range near {
			if i > 0 {
				msg += ", "
			}
			msg += e.tool + " " + quoteArgs(e.args, 200)
		}
	} else {
		msg += "; the recording holds no call"
	}
	b := []byte(`{"jsonrpc":"2.0","id":`)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, CodeUnmatched, 10)
	b = append(b, `,"message":`...)
	b = jsonlex.AppendString(b, msg)
	b = append(b, `,"data":{"tool":`...)
	b = jsonlex.AppendString(b, tool)
	if fp, err := m.fingerprint(args); err == nil {
		b = append(b, `,"fingerprint":`...)
		b = jsonlex.AppendString(b, fp)
	}
	b = append(b, `,"nearest":[`...)
	for i, e := range near {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"tool":`...)
		b = jsonlex.AppendString(b, e.tool)
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, e.seq, 10)
		if e.args != nil {
			shown, _ := redact.Report(e.args, maxQuoted)
			b = append(b, `,"arguments":`...)
			b = append(b, shown...)
		}
		b = append(b, '}')
	}
	return append(b, `]}}}`...)
}

// quoteArgs is args for a message: redacted and clipped to about n bytes (the
// message is a JSON string: control characters are escaped there).
func quoteArgs(args []byte, n int) string {
	if args == nil {
		return "(no arguments)"
	}
	shown, _ := redact.Report(args, n)
	return string(shown)
}

// nearest returns the recorded calls nearest to a call of tool with args: of the same
// tool, distinct arguments, the most top-level members alike first; else one call of
// each of the tools whose names are nearest.
func (m *Mock) nearest(tool string, args []byte) []*entry {
	if same := m.byTool[tool]; len(same) > 0 {
		type scored struct {
			e     *entry
			score int
		}
		var cands []scored
		seen := map[string]bool{}
		want := m.members(args)
		for _, e := range same {
			k := m.key(e.tool, e.args)
			if seen[k] {
				continue
			}
			seen[k] = true
			cands = append(cands, scored{e, likeness(want, m.members(e.args))})
		}
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].score > cands[j].score })
		var out []*entry
		for i := 0; i < len(cands) && i < maxNearest; i++ {
			out = append(out, cands[i].e)
		}
		return out
	}
	type named struct {
		name string
		d    int
	}
	var names []named
	for _, n := range m.toolName {
		if len(m.byTool[n]) > 0 {
			names = append(names, named{n, distance(tool, n)})
		}
	}
	sort.SliceStable(names, func(i, j int) bool { return names[i].d < names[j].d })
	var out []*entry
	for i := 0; i < len(names) && i < maxNearest; i++ {
		out = append(out, m.byTool[names[i].name][0])
	}
	return out
}

// members are an object's top-level members: key → its value's fingerprint (its
// bytes when it has none), the last of a duplicated key winning.
func (m *Mock) members(obj []byte) map[string]string {
	out := map[string]string{}
	ms, _, ok := jsonlex.Members(obj, jsonlex.SkipSpace(obj, 0))
	if !ok {
		return out
	}
	for _, mb := range ms {
		v := obj[mb.Value.Start:mb.Value.End]
		fp, err := m.fingerprint(v)
		if err != nil {
			fp = string(v)
		}
		out[jsonlex.StringOf(obj[mb.Key.Start:mb.Key.End])] = fp
	}
	return out
}

// likeness scores b against a: 2 a member alike, 1 a key shared with another value,
// -1 a key of one only.
func likeness(a, b map[string]string) int {
	s := 0
	for k, v := range a {
		w, ok := b[k]
		switch {
		case !ok:
			s--
		case v == w:
			s += 2
		default:
			s++
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			s--
		}
	}
	return s
}

// distance is the edit distance of two names (bytes), bounded to 64 bytes of each.
func distance(a, b string) int {
	return editdist.Of([]byte(a[:min(len(a), 64)]), []byte(b[:min(len(b), 64)]))
}
