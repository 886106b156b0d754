package upstream

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Headers for a remote upstream: `--header "Name: value"` flags and `--header-file`
// lines, with ${VAR} (and ${VAR:-default}) expanded from the environment when the
// proxy starts. An unset variable is an error naming it, never an empty header: a
// request without its credentials would only fail later, less clearly. The values are
// secrets, so no error here ever quotes one.

// UnsetError says a ${VAR} reference names a variable that is not set.
type UnsetError struct {
	Var   string
	Where string // "--header Authorization", "--url", "file:3"
}

func (e *UnsetError) Error() string {
	return fmt.Sprintf("%s: environment variable %s is not set", e.Where, e.Var)
}

// Expand replaces each ${VAR} in s with lookup(VAR), and ${VAR:-default} with the
// default when VAR is unset or empty (as Claude Code expands .mcp.json). A "$" not
// followed by "{" stays as it is. where names s in errors.
func Expand(s, where string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%s: a ${ with no closing }", where)
		}
		ref := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validVarName(name) {
			return "", fmt.Errorf("%s: ${%s} is not a variable reference", where, name)
		}
		v, ok := lookup(name)
		switch {
		case hasDef && (!ok || v == ""):
			v = def
		case !ok:
			return "", &UnsetError{Var: name, Where: where}
		}
		b.WriteString(v)
		s = s[i+end+1:]
	}
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// AddHeader parses line ("Name: value"), expands the value, and adds it to h.
func AddHeader(h http.Header, line, where string, lookup func(string) (string, bool)) error {
	if where == "" {
		where = "--header"
	}
	name, value, ok := strings.Cut(line, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || !isToken(name) {
		// The line itself is not quoted: it may be a value given without a name.
		return fmt.Errorf("%s: want \"Name: value\" with a header name before the colon", where)
	}
	if where == "--header" {
		where = "--header " + name
	}
	value, err := Expand(strings.Trim(value, " \t"), where, lookup)
	if err != nil {
		return err
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		// A line break in a header value would start another header (or request).
		return fmt.Errorf("%s: the value holds a line break or NUL", where)
	}
	h.Add(name, value)
	return nil
}

// ReadHeaderFile adds the headers in the file at path to h: one "Name: value" a line;
// blank lines and lines starting with # are skipped.
func ReadHeaderFile(h http.Header, path string, lookup func(string) (string, bool)) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the header file: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, ":")
		if err := AddHeader(h, line, fmt.Sprintf("%s:%d (%s)", path, n, strings.TrimSpace(name)), lookup); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the header file %s: %w", path, err)
	}
	return nil
}
