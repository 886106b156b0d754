package cassette

import (
	"strconv"
	"strings"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/redact"
)

// clipMark starts what redact puts in place of a value it cut.
const clipMark = "…[clipped "

// maxPaths bounds the paths RedactedPaths lists.
const maxPaths = 32

// RedactedPaths lists where the redacted arguments raw lost something to redaction or
// clipping: the JSON paths ($.token, $.env[0]) of the strings holding [REDACTED] or a
// clip marker, in order, at most 32. Iterative, to any depth.
func RedactedPaths(raw []byte) []string {
	type frame struct {
		path string
		v    []byte
	}
	var out []string
	stack := []frame{{"$", raw}}
	for len(stack) > 0 && len(out) < maxPaths {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		i := jsonlex.SkipSpace(f.v, 0)
		if i >= len(f.v) {
			continue
		}
		switch f.v[i] {
		case '{':
			ms, _, ok := jsonlex.Members(f.v, i)
			if !ok {
				continue
			}
			for j := len(ms) - 1; j >= 0; j-- {
				k := jsonlex.StringOf(f.v[ms[j].Key.Start:ms[j].Key.End])
				p := f.path + "." + k
				if k == "" || strings.ContainsAny(k, ".[]\" ") {
					p = f.path + "[" + jsonlex.Quote(k) + "]"
				}
				stack = append(stack, frame{p, f.v[ms[j].Value.Start:ms[j].Value.End]})
			}
		case '[':
			vs, ok := jsonlex.Elements(f.v, i)
			if !ok {
				continue
			}
			for j := len(vs) - 1; j >= 0; j-- {
				stack = append(stack, frame{f.path + "[" + strconv.Itoa(j) + "]", f.v[vs[j].Start:vs[j].End]})
			}
		case '"':
			s := jsonlex.StringOf(f.v[i:])
			if strings.Contains(s, redact.Redacted) || strings.Contains(s, clipMark) {
				out = append(out, f.path)
			}
		}
	}
	return out
}
