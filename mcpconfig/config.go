// Package mcpconfig reads MCP host config files (Claude Code's .mcp.json
// and ~/.claude.json, Claude Desktop's, Cursor's, Gemini CLI's and
// Windsurf's mcpServers; VS Code's servers, hosts.go) and wraps or unwraps
// their server entries so that the host starts the server through bir-proxy.
// Gemini CLI's and VS Code's files are JSONC, read through a mask
// (jsonc.go) so that their comments stay as they are.
//
// Edits are splices: only the text of the entries that change is
// rewritten, and unwrap restores a wrapped entry byte for byte, so every
// other key, the key order, the indentation and the trailing newline stay
// as the user (or the host, which rewrites ~/.claude.json itself) left them.
package mcpconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Scope is where Claude Code keeps a server entry.
type Scope string

const (
	// ScopeProject is .mcp.json in the project directory.
	ScopeProject Scope = "project"
	// ScopeLocal is the project's entry in ~/.claude.json:
	// projects["/abs/dir"].mcpServers.
	ScopeLocal Scope = "local"
	// ScopeUser is the top-level mcpServers of ~/.claude.json.
	ScopeUser Scope = "user"
)

// ParseScope checks a --scope value.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); sc {
	case ScopeProject, ScopeLocal, ScopeUser:
		return sc, nil
	}
	return "", fmt.Errorf("unknown scope %q: want project, local or user", s)
}

// Location is a config file and which mcpServers object inside it.
type Location struct {
	File string
	// Project, when set, means the servers are those of this project
	// directory in a Claude Code user file (projects[Project].mcpServers)
	// rather than the file's top-level mcpServers.
	Project string
	// Host is whose file it is, which says its format (Host.Format); ""
	// is Claude Code's.
	Host Host
}

func (l Location) String() string {
	if l.Project != "" {
		return fmt.Sprintf("%s (project %s)", l.File, l.Project)
	}
	return l.File
}

// ClaudeJSON is the path of Claude Code's user file: .claude.json in
// $CLAUDE_CONFIG_DIR when that is set (configDir), else in home.
func ClaudeJSON(configDir, home string) string {
	if configDir != "" {
		return filepath.Join(configDir, ".claude.json")
	}
	return filepath.Join(home, ".claude.json")
}

// ProjectFile is the name of a project's shared config, Claude Code's
// project scope.
const ProjectFile = ".mcp.json"

// Locate is where scope keeps the servers of the project in dir, found as
// Claude Code finds them from a session started in dir: for ScopeProject,
// the .mcp.json of dir or of its nearest parent that has one (ok is false
// when none has); for ScopeLocal, the project in claudeJSON (see ClaudeJSON)
// whose path is dir or encloses it most closely, which Parse picks among
// the file's projects keys.
func Locate(scope Scope, dir, claudeJSON string) (loc Location, ok bool) {
	switch scope {
	case ScopeLocal:
		return Location{File: claudeJSON, Project: dir}, true
	case ScopeUser:
		return Location{File: claudeJSON}, true
	default:
		path, ok := FindProjectFile(dir)
		return Location{File: path}, ok
	}
}

// FindProjectFile is the .mcp.json in dir or in its nearest parent that has
// one. Without one, it returns the path in dir and false.
func FindProjectFile(dir string) (string, bool) {
	for d := dir; ; {
		path := filepath.Join(d, ProjectFile)
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
			return path, true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return filepath.Join(dir, ProjectFile), false
		}
		d = parent
	}
}

// ErrNoServers is returned (wrapped) when the file has no mcpServers object
// where the Location points.
var ErrNoServers = errors.New("no mcpServers")

// SyntaxError is invalid JSON, located for a person with an editor.
type SyntaxError struct {
	File         string
	Line, Column int // 1-based; Column counts characters, not bytes
	Msg          string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: invalid JSON: %s", e.File, e.Line, e.Column, e.Msg)
}

// Document is a config file as read.
type Document struct {
	loc  Location
	data []byte
	// bom is the UTF-8 byte-order mark some Windows editors put first; it is
	// kept on write but hidden from the JSON parsers, which reject it.
	bom  []byte
	body []byte
	// mask is body with the comments and trailing commas its format allows
	// blanked (jsonc.go): what the JSON parsers read. It is body for a plain
	// JSON file.
	mask    []byte
	format  Format
	servers []string // keys leading to the mcpServers object
	// checkArgs is the ProxyArgsCheck given with CheckProxyArgs, or nil.
	checkArgs ProxyArgsCheck
}

// ProxyArgsCheck says why bir-proxy would refuse args, a wrapped entry's
// arguments, as its command line (the usage error it would print), or nil
// when it would take them. The proxy's flag set lives in cmd/bir-proxy, which
// passes its check in: this package must not know the proxy's flags beyond
// TakesValue.
type ProxyArgsCheck func(args []string) error

// CheckProxyArgs makes the document check each wrapped entry's arguments with
// check: an entry they fail is broken (Server.Broken), and Wrap and Unwrap
// leave it alone with a warning. Without it, a hand-written entry with a
// mistyped flag ("--sever", "x", "npx") reads as wrapped with the command "x",
// and unwrap would write "command": "x".
func (d *Document) CheckProxyArgs(check ProxyArgsCheck) { d.checkArgs = check }

// Load reads and parses the file at loc.
func Load(loc Location) (*Document, error) {
	data, err := os.ReadFile(loc.File)
	if err != nil {
		return nil, fmt.Errorf("reading MCP config: %w", err)
	}
	return Parse(loc, data)
}

// Parse parses data as the file at loc.
func Parse(loc Location, data []byte) (*Document, error) {
	if why := unsupported(loc.File); why != "" {
		return nil, fmt.Errorf("%s: %s: %w", loc.File, why, ErrUnsupportedFormat)
	}
	d := &Document{loc: loc, data: data, body: data, format: loc.Host.Format()}
	if bom := []byte("\xef\xbb\xbf"); bytes.HasPrefix(data, bom) {
		d.bom, d.body = bom, data[len(bom):]
	}
	d.mask = maskJSONC(d.body, d.format.Comments, d.format.TrailingCommas)
	var raw json.RawMessage
	if err := json.Unmarshal(d.mask, &raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			at := se.Offset - 1 // the byte read last is the one that was wrong
			if strings.HasPrefix(se.Error(), "unexpected end") {
				at = int64(len(d.body))
			}
			line, col := position(d.body, at)
			return nil, &SyntaxError{File: loc.File, Line: line, Column: col, Msg: se.Error()}
		}
		return nil, fmt.Errorf("%s: invalid JSON: %w", loc.File, err)
	}
	root := gjson.ParseBytes(d.mask)
	if !root.IsObject() {
		return nil, fmt.Errorf("%s: the top level is not a JSON object", loc.File)
	}

	key := d.format.Servers
	d.servers = []string{key}
	where := "at the top level"
	if loc.Project != "" {
		key, ok := projectKey(root.Get("projects"), loc.Project)
		if !ok {
			return nil, fmt.Errorf("%s has no project for %s or a directory above it (Claude Code adds one the first time it runs there): %w",
				loc.File, loc.Project, ErrNoServers)
		}
		d.servers = []string{"projects", key, d.format.Servers}
		where = fmt.Sprintf("for the project %s", key)
		// From here on the Location names the project found, which is what
		// every message about this document should say.
		d.loc.Project = key
	}
	switch s := root.Get(pathOf(d.servers...)); {
	case !s.Exists():
		hint := ""
		if loc.Project == "" && key == "mcpServers" && root.Get("servers").IsObject() {
			hint = ` (it has "servers", which is VS Code's format: --host vscode reads it)`
		}
		return nil, fmt.Errorf("%s has no %s object %s%s: %w", loc.File, key, where, hint, ErrNoServers)
	case !s.IsObject():
		return nil, fmt.Errorf("%s: %s %s is not a JSON object", loc.File, key, where)
	}
	return d, nil
}

// Location is where the document's servers are; for a project in a Claude
// Code user file, the project found (which may enclose the directory that
// was asked for).
func (d *Document) Location() Location { return d.loc }

// position is the line and column of data[offset].
func position(data []byte, offset int64) (line, col int) {
	before := data[:min(max(int(offset), 0), len(data))]
	line = bytes.Count(before, []byte("\n")) + 1
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}

// projectKey finds the project of dir among the keys of Claude Code's
// projects object: dir itself or, from a subdirectory, the key that
// encloses it most closely, as Claude Code resolves a session started
// there. An exact match wins; otherwise the paths are compared cleaned
// (Claude Code writes Windows paths with forward slashes), and without case
// on Windows.
func projectKey(projects gjson.Result, dir string) (string, bool) {
	if !projects.IsObject() {
		return "", false
	}
	norm := func(p string) string {
		p = filepath.Clean(filepath.FromSlash(p))
		if runtime.GOOS == "windows" {
			p = strings.ToLower(p)
		}
		return p
	}
	want := norm(dir)
	var found string
	depth := -1
	exact := false
	projects.ForEach(func(k, _ gjson.Result) bool {
		if k.Str == dir {
			found, exact = k.Str, true
			return false
		}
		if k.Str == "" {
			return true
		}
		key := norm(k.Str)
		if key != want && !strings.HasPrefix(want, strings.TrimSuffix(key, string(filepath.Separator))+string(filepath.Separator)) {
			return true
		}
		// The longest enclosing path is the nearest: dir itself, spelled
		// another way, is longer than any parent. Of equals the first wins.
		if len(key) > depth {
			found, depth = k.Str, len(key)
		}
		return true
	})
	return found, exact || found != ""
}

// entries lists the server entries in file order. A name that appears
// more than once comes back as KindUnknown each time: the host uses the
// last, sjson would edit the first. Each entry's text is the file's own,
// comments included; the servers object is found and lexed on the mask.
func (d *Document) entries() []entry {
	srv := gjson.GetBytes(d.mask, pathOf(d.servers...))
	if !srv.IsObject() || srv.Index <= 0 {
		return nil
	}
	ms, _ := members(string(d.body[srv.Index:srv.Index+len(srv.Raw)]), srv.Raw)
	count := map[string]int{}
	for _, m := range ms {
		count[m.key]++
	}
	var es []entry
	for _, m := range ms {
		e := parseEntry(m.key, m.value.Raw)
		switch {
		case count[m.key] > 1:
			e = e.unknown("the name appears more than once in " + d.format.Servers)
		case m.key == "":
			e = e.unknown("the name is empty")
		case d.checkArgs != nil && (e.kind == KindWrapped || e.kind == KindWrappedRemote):
			if err := d.checkArgs(e.proxyArgs()); err != nil {
				e.broken = err.Error()
			}
		}
		es = append(es, e)
	}
	return es
}

// Server describes one entry for a person.
type Server struct {
	Name string
	Kind Kind
	// Command is what the server runs: for a wrapped entry, what follows
	// "--". Empty for remote and unknown entries.
	Command []string
	URL     string // remote entries
	// Transport is a remote entry's: auto, http or sse (--transport, or what its
	// "type" means).
	Transport string
	// ProxyName is the --server name of a wrapped entry; it differs from
	// Name when an entry was renamed after it was wrapped.
	ProxyName string
	// ProxyCommand is the bir-proxy a wrapped entry runs, as written.
	ProxyCommand string
	Problem      string // why a KindUnknown entry is not understood
	// Policy are the tool-policy flags a wrapped entry gives the proxy, each as
	// "--flag value" (policy.go).
	Policy []string
	// Broken is why bir-proxy would refuse a wrapped entry's arguments (see
	// CheckProxyArgs); "" when it would take them, or they were not checked.
	Broken string
	// Args are a wrapped entry's arguments to ProxyCommand, as written.
	Args []string
	// Env is the entry's "env", "K=V" each, as written (${VAR} unexpanded).
	Env []string
}

// Servers lists the entries in file order.
func (d *Document) Servers() []Server {
	var out []Server
	for _, e := range d.entries() {
		s := Server{
			Name: e.name, Kind: e.kind, Command: e.upstream(), URL: e.url,
			ProxyName: e.proxyName, Problem: e.problem, Policy: e.policyArgs(),
			Broken: e.broken, Env: e.env(),
		}
		switch e.kind {
		case KindRemote:
			s.Transport = e.remoteTransport()
		case KindWrappedRemote:
			s.Transport = e.transport
		}
		if e.kind == KindWrapped || e.kind == KindWrappedRemote {
			s.ProxyCommand = e.members[e.command].value.Str
			s.Args = e.proxyArgs()
		}
		out = append(out, s)
	}
	return out
}

// Outcome is what Wrap or Unwrap did with one entry.
type Outcome struct {
	Name    string
	Changed bool
	// Note says why an entry was left alone.
	Note string
	// Warn marks an entry left alone because it is not understood, as
	// opposed to one that needed nothing.
	Warn bool
}

// Change is the result of Wrap or Unwrap, not yet written.
type Change struct {
	Location Location
	Old, New []byte
	Outcomes []Outcome
	// Op names the write, for the backup of the version it replaces
	// (Backup.Op): "wrap", "unwrap github", "unwrap --restore ID".
	Op string
}

// Changed reports whether the file would change.
func (c *Change) Changed() bool { return !bytes.Equal(c.Old, c.New) }

// Diff is the change as a unified diff.
func (c *Change) Diff() string {
	return unifiedDiff(c.Location.File, c.Old, c.New)
}

// Save writes the change atomically, keeping the previous version in bs
// first. It refuses when the file was changed by someone else since it was
// read.
func (c *Change) Save(bs Backups) (Saved, error) {
	return replacer{rename: os.Rename}.replace(c.Location.File, c.Old, c.New, bs, c.Op)
}

// Wrap rewrites the named entries, or all when names is empty, to start
// through the bir-proxy at proxyPath. Entries that are wrapped already,
// not understood, or named RecorderName are left alone, each with
// an Outcome saying so. A name not in the file is an error.
func (d *Document) Wrap(names []string, proxyPath string) (*Change, error) {
	return d.WrapWith(names, proxyPath, nil)
}

// WrapWith is Wrap with more proxy flags for each entry: flags(name) returns them
// (unquoted: `--cassette`, `DIR/name.jsonl`), put right after --server. Each must be a
// flag the proxy has and that TakesValue knows, or the entry would not unwrap.
func (d *Document) WrapWith(names []string, proxyPath string, flags func(name string) []string) (*Change, error) {
	if !IsProxyCommand(proxyPath) {
		return nil, fmt.Errorf("proxy path %q: its file name must be bir-proxy (bir-proxy.exe on Windows), which is how wrapped entries are recognised", proxyPath)
	}
	return d.apply(names, func(e entry) (string, Outcome, error) {
		o := Outcome{Name: e.name}
		switch {
		case e.kind == KindUnknown:
			o.Note, o.Warn = "not understood ("+e.problem+"); left alone", true
		case e.broken != "":
			o.Note, o.Warn = brokenNote(e.broken), true
		case e.kind == KindWrapped || e.kind == KindWrappedRemote:
			o.Note = "already wrapped"
		case e.name == RecorderName:
			o.Note = "the recorder's own server is never wrapped"
		case e.kind == KindRemote && e.problem != "":
			o.Note, o.Warn = "remote entry left alone: "+e.problem, true
		default:
			if flags != nil {
				for _, f := range flags(e.name) {
					e.extra = append(e.extra, quote(f))
				}
			}
			text, err := e.wrap(proxyPath)
			if err != nil {
				return "", o, err
			}
			// Refuse to write what could not be undone exactly.
			if back, err := parseEntry(e.name, text).unwrap(); err != nil || back != e.raw {
				return "", o, fmt.Errorf("server %q: wrapping would not round-trip; left the file alone (please report this)", e.name)
			}
			o.Changed = true
			return text, o, nil
		}
		return e.raw, o, nil
	})
}

// Unwrap restores the named entries, or all when names is empty, to start
// the server directly: the exact inverse of Wrap.
func (d *Document) Unwrap(names []string) (*Change, error) {
	return d.apply(names, func(e entry) (string, Outcome, error) {
		o := Outcome{Name: e.name}
		switch e.kind {
		case KindUnknown:
			o.Note, o.Warn = "not understood ("+e.problem+"); left alone", true
		case KindStdio, KindRemote:
			o.Note = "not wrapped"
		default:
			if e.broken != "" {
				// Which argument is the server's command is not known when the
				// proxy's flags do not parse: "--sever x npx" would unwrap to
				// "command": "x".
				o.Note, o.Warn = brokenNote(e.broken), true
				break
			}
			text, err := e.unwrap()
			if err != nil {
				return "", o, err
			}
			want := KindStdio
			if e.kind == KindWrappedRemote {
				want = KindRemote
			}
			if k := parseEntry(e.name, text).kind; k != want {
				return "", o, fmt.Errorf("server %q: unwrapping gives a %s entry; left the file alone (please report this)", e.name, k)
			}
			o.Changed = true
			return text, o, nil
		}
		return e.raw, o, nil
	})
}

// brokenNote is the Outcome note of an entry whose bir-proxy arguments do not parse.
func brokenNote(why string) string {
	return "BROKEN: bir-proxy would refuse its arguments (" + why + "); left alone: fix the entry by hand"
}

// apply runs fn over the selected entries and splices each changed entry
// into the document at its path.
func (d *Document) apply(names []string, fn func(entry) (string, Outcome, error)) (*Change, error) {
	es := d.entries()
	selected := map[string]bool{}
	for _, n := range names {
		selected[n] = true
	}
	for _, n := range names {
		found := false
		for _, e := range es {
			found = found || e.name == n
		}
		if !found {
			return nil, fmt.Errorf("%s has no server named %q", d.loc, n)
		}
	}

	body, mask := d.body, d.mask
	c := &Change{Location: d.loc, Old: d.data}
	done := map[string]bool{}
	for _, e := range es {
		if (len(names) > 0 && !selected[e.name]) || done[e.name] {
			continue
		}
		done[e.name] = true
		text, o, err := fn(e)
		if err != nil {
			return nil, err
		}
		c.Outcomes = append(c.Outcomes, o)
		if text == e.raw {
			continue
		}
		// The entry is found and replaced on the mask; the same span of the
		// file's text takes the entry's new text, comments and all.
		path := pathOf(slices.Concat(d.servers, []string{e.name})...)
		old := gjson.GetBytes(mask, path)
		textMask := maskText(text)
		next, err := sjson.SetRawBytes(mask, path, []byte(textMask))
		if err != nil {
			return nil, fmt.Errorf("editing server %q: %w", e.name, err)
		}
		// The edit must be a splice of this entry and nothing else.
		want := string(mask[:old.Index]) + textMask + string(mask[old.Index+len(old.Raw):])
		if old.Index == 0 || string(next) != want || string(body[old.Index:old.Index+len(old.Raw)]) != e.raw {
			return nil, fmt.Errorf("editing server %q: the edit did not stay inside the entry; left the file alone (please report this)", e.name)
		}
		body = slices.Concat(body[:old.Index:old.Index], []byte(text), body[old.Index+len(old.Raw):])
		mask = next
	}
	// The text written must read as the mask that was checked: a comment the
	// edit opened or closed would change what the host sees around the entry.
	if !json.Valid(mask) || !bytes.Equal(maskJSONC(body, d.format.Comments, d.format.TrailingCommas), mask) {
		return nil, errors.New("the edited file is not valid JSON; left the file alone (please report this)")
	}
	c.New = append(append([]byte(nil), d.bom...), body...)
	if !c.Changed() {
		c.New = c.Old
	}
	return c, nil
}
