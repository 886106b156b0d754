package callcmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Bounds of a YAML script. The parser holds its whole node tree: about 100 bytes of
// memory for each byte read when the file is many small values (8 MiB of "[0,0,…]"
// measured 846 MB peak, 20 s; 1 MiB, 177 MiB), so a YAML script is read up to
// maxYAML, less than a JSON one. Aliases are expanded into the JSON, which is bounded by maxYAMLJSON: a
// "billion laughs" (an alias of an alias of …, each ten times) stops there.
const (
	maxYAML     = 1 << 20
	maxYAMLJSON = 8 << 20
	// maxYAMLDepth is the nesting the JSON may reach (the YAML parser's own bound, and
	// encoding/json's): an alias may nest a node deeper than the file does.
	maxYAMLDepth = 10000
	// maxNumber bounds a number's text that is rewritten (0x…, 1_000, +.5): a long
	// one is converted in time that grows faster than its length.
	maxNumber = 1000
)

// yamlError is an error at a node: its step (the element of the top list, from 1;
// 0 when outside any) and line.
type yamlError struct {
	step, line int
	msg        string
}

func (e *yamlError) Error() string {
	switch {
	case e.step > 0:
		return fmt.Sprintf("step %d (line %d): %s", e.step, e.line, e.msg)
	case e.line > 0:
		return fmt.Sprintf("line %d: %s", e.line, e.msg)
	}
	return e.msg
}

// YAMLToJSON reads data, one YAML document, and returns the JSON value it means:
// mappings are objects (their keys strings: quoted, plain or a date; any other key
// is an error, as is a key given twice), sequences arrays, and scalars as the YAML
// 1.2 core schema resolves them (go.yaml.in/yaml/v3: true, null, 12, 0x1f, 1_000,
// .5): a number keeps its digits (a 30-digit integer stays 30 digits, not a float);
// 0x, 0o, 0b and _ numbers are written in decimal. A timestamp (2026-01-02) is the
// string as written: JSON has no dates. Refused: !!binary (JSON has no bytes: give
// the base64 as a string), .inf and .nan (JSON has no such numbers), an integer
// with a leading zero (0777: octal in YAML 1.1, decimal in 1.2; quote it or write
// 0o777), merge keys (<<), and any other tag. Aliases are expanded, up to maxJSON
// bytes of JSON and maxYAMLDepth of nesting; an alias inside its own anchor is an
// error.
func YAMLToJSON(data []byte, maxJSON int) (out []byte, err error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := decodeNode(dec, &doc); err != nil {
		if err == io.EOF {
			return nil, errors.New("empty: no YAML document")
		}
		return nil, err
	}
	var more yaml.Node
	if err := decodeNode(dec, &more); err != io.EOF {
		return nil, errors.New("more than one YAML document")
	}
	return nodeJSON(&doc, maxJSON)
}

// decodeNode is dec.Decode(n), a panic of the parser an error.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

// nodeJSON writes the value of a document node as JSON, walking it with a stack
// (not recursion: the file, and its aliases, decide the depth).
func nodeJSON(doc *yaml.Node, maxJSON int) ([]byte, error) {
	type frame struct {
		n    *yaml.Node
		i    int                 // the next element (a sequence) or pair (a mapping)
		keys map[string]struct{} // a mapping's keys so far
	}
	var (
		out    []byte
		stack  []frame
		open   = map[*yaml.Node]bool{} // the collections being written: an alias to one is a cycle
		step   int
		topSeq bool
	)
	fail := func(n *yaml.Node, format string, a ...any) error {
		return &yamlError{step: step, line: n.Line, msg: fmt.Sprintf(format, a...)}
	}
	// value writes n, a scalar whole, a collection's opening (pushed on the stack).
	value := func(n *yaml.Node) error {
		n, err := resolveAlias(n)
		if err != nil {
			return fail(n, "%v", err)
		}
		switch n.Kind {
		case yaml.ScalarNode:
			out, err = appendScalar(out, n)
			if err != nil {
				return fail(n, "%v", err)
			}
		case yaml.MappingNode, yaml.SequenceNode:
			if t := n.ShortTag(); t != "!!map" && t != "!!seq" {
				return fail(n, "the tag %s is not read: JSON has no such type", quoteText(t))
			}
			// Only an anchored node can be met again (through an alias).
			if n.Anchor != "" {
				if open[n] {
					return fail(n, "an alias inside its own anchor (%s): it would never end", quoteText(n.Anchor))
				}
				open[n] = true
			}
			if len(stack) >= maxYAMLDepth {
				return fail(n, "nested deeper than %d", maxYAMLDepth)
			}
			stack = append(stack, frame{n: n})
			if n.Kind == yaml.MappingNode {
				out = append(out, '{')
			} else {
				out = append(out, '[')
			}
		default:
			return fail(n, "not a YAML value")
		}
		if len(out) > maxJSON {
			return fail(n, "larger than %d MiB as JSON (aliases expanded)", maxJSON>>20)
		}
		return nil
	}

	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) != 1 {
			return nil, errors.New("empty: no YAML value")
		}
		root = root.Content[0]
	}
	if r, err := resolveAlias(root); err == nil && r.Kind == yaml.SequenceNode {
		topSeq = true
	}
	if err := value(root); err != nil {
		return nil, err
	}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		n := f.n
		if topSeq && len(stack) == 1 {
			step = f.i + 1 // errors below name the step (the top list's element)
		}
		if n.Kind == yaml.SequenceNode {
			if f.i == len(n.Content) {
				out = append(out, ']')
				delete(open, n)
				stack = stack[:len(stack)-1]
				continue
			}
			if f.i > 0 {
				out = append(out, ',')
			}
			f.i++
			if err := value(n.Content[f.i-1]); err != nil {
				return nil, err
			}
			continue
		}
		if 2*f.i >= len(n.Content) {
			out = append(out, '}')
			delete(open, n)
			stack = stack[:len(stack)-1]
			continue
		}
		k, v := n.Content[2*f.i], n.Content[2*f.i+1]
		key, err := keyString(k)
		if err != nil {
			return nil, fail(k, "%v", err)
		}
		if f.keys == nil {
			f.keys = map[string]struct{}{}
		}
		if _, dup := f.keys[key]; dup {
			return nil, fail(k, "the key %s is given twice", quoteText(key))
		}
		f.keys[key] = struct{}{}
		if f.i > 0 {
			out = append(out, ',')
		}
		f.i++
		out = jsonlex.AppendString(out, key)
		out = append(out, ':')
		if err := value(v); err != nil { // (may grow stack: f is not used after)
			return nil, err
		}
	}
	return out, nil
}

// resolveAlias is the node an alias names (n itself when not an alias).
func resolveAlias(n *yaml.Node) (*yaml.Node, error) {
	for range 100 {
		if n.Kind != yaml.AliasNode {
			return n, nil
		}
		if n.Alias == nil {
			return n, fmt.Errorf("the alias %s names no anchor", quoteText(n.Value))
		}
		n = n.Alias
	}
	return n, errors.New("an alias of an alias of …")
}

// keyString is a mapping key's string: a key must be a string (or a date, its text).
func keyString(k *yaml.Node) (string, error) {
	k, err := resolveAlias(k)
	if err != nil {
		return "", err
	}
	if k.Kind == yaml.ScalarNode {
		switch k.ShortTag() {
		case "!!str", "!!timestamp":
			return k.Value, nil
		case "!!merge":
			return "", errors.New("merge keys (<<) are not read: write the members out")
		}
		return "", fmt.Errorf("the key %s is not a string (JSON keys are strings: quote it)", quoteText(k.Value))
	}
	return "", errors.New("a key that is a list or a mapping (JSON keys are strings)")
}

// appendScalar appends scalar n's JSON value.
func appendScalar(out []byte, n *yaml.Node) ([]byte, error) {
	v := n.Value
	switch t := n.ShortTag(); t {
	case "!!str", "!!timestamp", "!!merge": // a date, and "<<" as a value, as written
		return jsonlex.AppendString(out, v), nil
	case "!!null":
		if !oneOf(v, "", "~", "null", "Null", "NULL") {
			return nil, fmt.Errorf("!!null %s is not null", quoteText(v))
		}
		return append(out, "null"...), nil
	case "!!bool":
		switch {
		case oneOf(v, "true", "True", "TRUE"):
			return append(out, "true"...), nil
		case oneOf(v, "false", "False", "FALSE"):
			return append(out, "false"...), nil
		}
		return nil, fmt.Errorf("!!bool %s is neither true nor false", quoteText(v))
	case "!!int":
		s, err := yamlInt(v)
		if err != nil {
			return nil, err
		}
		return append(out, s...), nil
	case "!!float":
		s, err := yamlFloat(v)
		if err != nil {
			return nil, err
		}
		return append(out, s...), nil
	case "!!binary":
		return nil, errors.New("!!binary is not read: JSON has no bytes (give the base64 as a string)")
	default:
		return nil, fmt.Errorf("the tag %s is not read: JSON has no such type", quoteText(t))
	}
}

// yamlInt is a YAML integer as a JSON number, every digit kept.
func yamlInt(v string) (string, error) {
	p := strings.ReplaceAll(v, "_", "")
	if isNumber(p) && !strings.ContainsAny(p, ".eE") {
		return p, nil // the common case: written as JSON writes it
	}
	if len(p) > maxNumber {
		return "", fmt.Errorf("the integer %s is longer than %d characters", clip(v), maxNumber)
	}
	d := strings.TrimLeft(p, "+-")
	if len(d) > 1 && d[0] == '0' && d[1] >= '0' && d[1] <= '9' {
		return "", fmt.Errorf("the integer %s has a leading zero: octal in YAML 1.1, decimal in 1.2 (quote it, or write 0o…)", quoteText(v))
	}
	var z big.Int
	if _, ok := z.SetString(p, 0); !ok {
		return "", fmt.Errorf("%s is not an integer", quoteText(v))
	}
	return z.String(), nil
}

// yamlFloat is a YAML float as a JSON number, its digits kept (+.5 is 0.5, 1. is 1).
func yamlFloat(v string) (string, error) {
	p := strings.ReplaceAll(v, "_", "")
	if isNumber(p) {
		return p, nil
	}
	if len(p) > maxNumber {
		return "", fmt.Errorf("the number %s is longer than %d characters", clip(v), maxNumber)
	}
	if s := jsonFloat(p); isNumber(s) {
		return s, nil
	}
	f, err := strconv.ParseFloat(p, 64)
	switch {
	case oneOf(strings.TrimLeft(v, "+-"), ".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN") || err == nil && (math.IsInf(f, 0) || math.IsNaN(f)):
		return "", fmt.Errorf("%s: JSON has no such number", quoteText(v))
	case err != nil:
		return "", fmt.Errorf("%s is not a number", quoteText(v))
	}
	return strconv.FormatFloat(f, 'g', -1, 64), nil
}

// jsonFloat rewrites a YAML float's text ([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)
// as JSON writes it: no "+", no leading zeros, a digit on each side of the point.
func jsonFloat(p string) string {
	var b strings.Builder
	if p != "" && (p[0] == '+' || p[0] == '-') {
		if p[0] == '-' {
			b.WriteByte('-')
		}
		p = p[1:]
	}
	mant, exp := p, ""
	if i := strings.IndexAny(p, "eE"); i >= 0 {
		mant, exp = p[:i], p[i:]
	}
	whole, frac, point := strings.Cut(mant, ".")
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	b.WriteString(whole)
	if point && frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	b.WriteString(exp)
	return b.String()
}

func oneOf(s string, set ...string) bool {
	for _, t := range set {
		if s == t {
			return true
		}
	}
	return false
}

// quoteText is s for a message: quoted, its control characters escaped, clipped.
func quoteText(s string) string { return strconv.QuoteToASCII(clip(s)) }

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
