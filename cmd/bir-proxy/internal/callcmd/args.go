package callcmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/regular"
	"github.com/bir-dev/bir-proxy/internal/termtext"
)

// Arguments builds a call's arguments: base (--args, a JSON object, or nil) with each
// key=value pair set on top of it, in order. A pair splits at its first "="; its value
// is a JSON number, boolean or object when it parses as one (whole), else the string
// as written ("007" is a string: JSON has no such number; "null" and "[1]" too).
func Arguments(base []byte, pairs []string) ([]byte, error) {
	if base == nil && len(pairs) == 0 {
		return nil, nil
	}
	if base == nil {
		base = []byte("{}")
	}
	base = bytes.TrimSpace(base)
	if len(base) == 0 || base[0] != '{' || !jsonlex.Valid(base) {
		return nil, errors.New("--args: want a JSON object, like '{\"a\":2}'")
	}
	if len(pairs) == 0 {
		return base, nil
	}
	type kv struct {
		key string
		val []byte
	}
	var set []kv
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: want key=value", p)
		}
		set = append(set, kv{k, pairValue(v)})
	}
	// The base's members, in its order and bytes, but those a pair replaces; then the
	// pairs (the last of a key wins).
	last := map[string]int{}
	for i, s := range set {
		last[s.key] = i
	}
	ms, _, ok := jsonlex.Members(base, 0)
	if !ok {
		return nil, errors.New("--args: want a JSON object")
	}
	out := []byte{'{'}
	n := 0
	for _, m := range ms {
		if _, replaced := last[jsonlex.StringOf(base[m.Key.Start:m.Key.End])]; replaced {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, base[m.Key.Start:m.Value.End]...)
		n++
	}
	for i, s := range set {
		if last[s.key] != i {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = jsonlex.AppendString(out, s.key)
		out = append(out, ':')
		out = append(out, s.val...)
		n++
	}
	return append(out, '}'), nil
}

// pairValue is a pair's value as JSON: the value itself when it is a JSON number,
// boolean or object, else a JSON string of it.
func pairValue(v string) []byte {
	t := strings.TrimSpace(v)
	if t == v && t != "" {
		switch {
		case t == "true" || t == "false":
			return []byte(t)
		case t[0] == '{' && jsonlex.Valid([]byte(t)):
			return []byte(t)
		case (t[0] == '-' || t[0] >= '0' && t[0] <= '9') && isNumber(t):
			return []byte(t)
		}
	}
	return jsonlex.AppendString(nil, v)
}

// isNumber reports whether s is one JSON number (so "1e3" is, "0x1", "01", "1." are not).
func isNumber(s string) bool {
	var n json.Number
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return false
	}
	return string(n) == s
}

// Step is one step of a --script: a call, or a listing of the tools.
type Step struct {
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	ListTools bool            `json:"list_tools,omitempty"`
}

// maxScript bounds a --script file read (a YAML one: maxYAML, yaml.go).
const maxScript = 16 << 20

// ReadScript reads a --script file: a list of steps, in JSON or YAML (ScriptIsYAML).
// Its error is one line, control characters escaped: it may quote the file.
func ReadScript(path string) ([]Step, error) {
	steps, err := readScript(path)
	if err != nil {
		return nil, errors.New(termtext.Line(err.Error()))
	}
	return steps, nil
}

func readScript(path string) ([]Step, error) {
	// A FIFO blocked open(2) for ever, waiting for a writer (SIGTERM did not end it),
	// and a pipe (/dev/stdin, <(…)) was read as empty: a script is a regular file.
	f, st, err := regular.Open(path)
	if errors.Is(err, regular.ErrNotRegular) {
		return nil, fmt.Errorf("%s: %w (a FIFO, a pipe or a device is not read)", path, err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > maxScript {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, maxScript>>20)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return nil, err
	}
	if !utf8.Valid(data) {
		// A JSON script's arguments reached the server with such bytes as written
		// (not JSON), its tool's name with U+FFFD in their place.
		return nil, fmt.Errorf("%s: not UTF-8 text (line %d)", path, notUTF8Line(data))
	}
	if ScriptIsYAML(path, data) {
		// The YAML parser's tree is about 100 times the file (yaml.go): a smaller bound.
		if len(data) > maxYAML {
			return nil, fmt.Errorf("%s: a YAML script larger than %d MiB (a JSON one may be %d MiB)", path, maxYAML>>20, maxScript>>20)
		}
		if data, err = YAMLToJSON(data, maxYAMLJSON); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	steps, err := ParseScript(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return steps, nil
}

// notUTF8Line is the line (from 1) of data's first byte that is not UTF-8.
func notUTF8Line(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			return bytes.Count(data[:i], []byte("\n")) + 1
		}
		i += n
	}
	return 0
}

// ScriptIsYAML reports whether a script is read as YAML: a file named *.yaml or *.yml
// is, one named *.json is not, and any other is JSON when its first character past
// whitespace is "[" or "{" (what JSON starts with), else YAML.
func ScriptIsYAML(path string, data []byte) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return true
	case ".json":
		return false
	}
	d := bytes.TrimLeft(data, " \t\r\n")
	return len(d) > 0 && d[0] != '[' && d[0] != '{'
}

// ParseScript parses a script: a JSON array of {"tool": NAME, "arguments": {...}} and
// {"list_tools": true} steps; any other member is refused (a misspelt one would be a
// step that does something else than asked).
func ParseScript(data []byte) ([]Step, error) {
	if d := bytes.TrimLeft(data, " \t\r\n"); len(d) > 0 && d[0] != '[' {
		return nil, errors.New("not a list of steps")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var raws []json.RawMessage
	if err := dec.Decode(&raws); err != nil {
		return nil, fmt.Errorf("not a JSON list of steps: %w", err)
	}
	if dec.More() {
		return nil, errors.New("more after the list of steps")
	}
	if raws == nil {
		return nil, errors.New("not a JSON list of steps")
	}
	steps := make([]Step, len(raws))
	for i, r := range raws {
		// Each step alone: an error names its step.
		d := json.NewDecoder(bytes.NewReader(r))
		d.DisallowUnknownFields()
		if err := d.Decode(&steps[i]); err != nil {
			return nil, fmt.Errorf("step %d: %w", i+1, err)
		}
		s := steps[i]
		switch {
		case s.ListTools && s.Tool != "":
			return nil, fmt.Errorf("step %d: a step lists tools or calls one, not both", i+1)
		case !s.ListTools && s.Tool == "":
			return nil, fmt.Errorf("step %d: no \"tool\" (or \"list_tools\": true)", i+1)
		case s.ListTools && s.Arguments != nil:
			return nil, fmt.Errorf("step %d: list_tools takes no arguments", i+1)
		}
		if a := bytes.TrimSpace(s.Arguments); s.Arguments != nil && (len(a) == 0 || a[0] != '{') {
			if string(a) == "null" {
				steps[i].Arguments = nil
				continue
			}
			return nil, fmt.Errorf("step %d: \"arguments\" must be a JSON object", i+1)
		}
	}
	return steps, nil
}
