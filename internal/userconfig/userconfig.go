// Package userconfig reads bir-proxy's one configuration file,
// $XDG_CONFIG_HOME/bir-proxy/config.json: the defaults every proxy takes at start
// (docs/config.md). It only reads and checks; cmd/bir-proxy applies the values under
// its flags and environment variables.
//
// Nothing in the file may stop a proxy from starting (a host is waiting on it): a
// file that is missing is no file, and one that cannot be read, is not JSON, or holds
// an unknown key or a value of the wrong type is said in a warning and the rest used.
package userconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// MaxSize bounds the file read: a few keys take a few hundred bytes, and a file
// that is larger is not this one.
const MaxSize = 64 << 10

// Kind is the JSON type a key takes.
type Kind int

const (
	String Kind = iota // a JSON string
	Bool               // true or false
	Number             // a number, or a string holding one (e.g. "20000")
	Path               // a string: an absolute path, or one starting with ~/
)

// Key is one key the file may hold.
type Key struct {
	Name string
	Kind Kind
	Flag string   // the proxy flag it is the default of
	Env  []string // environment variables that win over it (any one set)
	Doc  string
}

// Keys are the file's keys, in the order status shows them.
var Keys = []Key{
	{Name: "cassette-dir", Kind: Path, Flag: "cassette", Doc: "each server records a cassette, DIR/SERVER.jsonl, as wrap --cassette DIR gives"},
	{Name: "otlp-endpoint", Kind: String, Flag: "otlp-endpoint",
		Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"}},
	{Name: "otlp-capture", Kind: Bool, Flag: "otlp-capture"},
	{Name: "pin-tools", Kind: String, Flag: "pin-tools", Env: []string{"BIR_PIN_TOOLS"}},
	{Name: "read-only", Kind: Bool, Flag: "read-only"},
	{Name: "max-result-tokens", Kind: Number, Flag: "max-result-tokens", Env: []string{"BIR_MAX_RESULT_TOKENS"}},
	{Name: "log-file", Kind: Path, Flag: "log-file"},
	{Name: "log-level", Kind: String, Flag: "log-level", Env: []string{"BIR_LOG_LEVEL"}},
	{Name: "correlation-key", Kind: String, Flag: "correlation-key", Env: []string{"BIR_CORRELATION_KEY"}},
}

// Lookup returns the key named name.
func Lookup(name string) (Key, bool) {
	for _, k := range Keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// Value is one key's value, as the string a flag's Set takes.
type Value struct {
	Key   Key
	Value string
}

// Config is what the file holds.
type Config struct {
	Path     string
	Found    bool     // the file exists (and was read)
	Values   []Value  // in Keys order
	Warnings []string // each said once on stderr; the proxy starts anyway
}

// Get returns the value of the key named name.
func (c *Config) Get(name string) (string, bool) {
	for _, v := range c.Values {
		if v.Key.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// DefaultPath is the file's path: $XDG_CONFIG_HOME/bir-proxy/config.json when that is
// set (on every system, as oauth.DefaultDir does), else the user's configuration
// folder's (~/.config, ~/Library/Application Support, %AppData%).
func DefaultPath() (string, error) {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "bir-proxy", "config.json"), nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the configuration folder: %w", err)
	}
	return filepath.Join(d, "bir-proxy", "config.json"), nil
}

// Suggest names the known word nearest an unknown key, or "" (cmd/bir-proxy's
// nearestWord, for "did you mean").
type Suggest func(word string, known []string) string

// Load reads the file at DefaultPath. A missing file is an empty Config.
func Load(suggest Suggest) *Config {
	path, err := DefaultPath()
	if err != nil {
		return &Config{Warnings: []string{fmt.Sprintf("the configuration file is not read: %v", err)}}
	}
	return Read(path, suggest)
}

// Read reads the file at path.
func Read(path string, suggest Suggest) *Config {
	c := &Config{Path: path}
	said := clean(path)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c
	}
	if err != nil {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s is not read: %v", said, err))
		return c
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s is not read: not a regular file", said))
		return c
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s is not read: %v", said, err))
		return c
	}
	if len(data) > MaxSize {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s is ignored: larger than %d bytes", said, MaxSize))
		return c
	}
	c.Found = true
	c.Values, c.Warnings = Parse(path, data, suggest)
	return c
}

// Parse checks data, the file's bytes (named by path in warnings), against Keys.
func Parse(path string, data []byte, suggest Suggest) (vals []Value, warnings []string) {
	path = clean(path)
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := dec.Decode(&m)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil && m == nil {
		err = errors.New("not an object")
	}
	if err != nil {
		return nil, []string{fmt.Sprintf("%s is ignored: it is not a JSON object of settings (%s)", path, clean(err.Error()))}
	}
	known := make([]string, len(Keys))
	for i, k := range Keys {
		known[i] = k.Name
	}
	var unknown []string
	for name := range m {
		if _, ok := Lookup(name); !ok {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		w := fmt.Sprintf("%s: unknown key %q, ignored", path, clean(name))
		if suggest != nil {
			if near := suggest(name, known); near != "" {
				w += fmt.Sprintf("; did you mean %q?", near)
			}
		}
		warnings = append(warnings, w)
	}
	for _, k := range Keys {
		raw, ok := m[k.Name]
		if !ok {
			continue
		}
		v, err := value(k, raw)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: %q %v, ignored", path, k.Name, err))
			continue
		}
		vals = append(vals, Value{Key: k, Value: v})
	}
	return vals, warnings
}

// value reads raw as k's kind, into the string a flag takes.
func value(k Key, raw json.RawMessage) (string, error) {
	var x any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return "", err
	}
	switch k.Kind {
	case Bool:
		if b, ok := x.(bool); ok {
			return strconv.FormatBool(b), nil
		}
		return "", errors.New("wants true or false")
	case Number:
		switch n := x.(type) {
		case json.Number:
			return n.String(), nil
		case string:
			if _, err := strconv.ParseFloat(strings.TrimSpace(n), 64); err == nil {
				return strings.TrimSpace(n), nil
			}
		}
		return "", errors.New("wants a number")
	case Path:
		s, ok := x.(string)
		if !ok || s == "" {
			return "", errors.New("wants a path (a string)")
		}
		p, err := expandPath(s)
		if err != nil {
			return "", err
		}
		return p, nil
	default:
		s, ok := x.(string)
		if !ok {
			return "", errors.New("wants a string")
		}
		return s, nil
	}
}

// expandPath makes s absolute: ~/ is the home folder; a relative path is refused, as
// every proxy starts in a folder of its host's choosing.
func expandPath(s string) (string, error) {
	if s == "~" || strings.HasPrefix(s, "~/") || strings.HasPrefix(s, `~\`) {
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			return "", fmt.Errorf("%q: no home folder for ~", clean(s))
		}
		return filepath.Join(home, s[1:]), nil
	}
	if !filepath.IsAbs(s) {
		return "", fmt.Errorf("%q wants an absolute path or one starting with ~/ (a host starts its servers in any folder)", clean(s))
	}
	return filepath.Clean(s), nil
}

// clean escapes control characters in s, and cuts it, for a warning quoting the file.
func clean(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
