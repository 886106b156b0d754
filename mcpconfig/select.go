package mcpconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Selection is which files and scopes wrap, unwrap and status act on, as each host
// would find them from a session started in this directory.
type Selection struct {
	Config string // a file named with --config, instead of the hosts' own
	Host   string // only this host's files (--host)
	Scope  string // only this scope (--scope)
	// Known are the files the backup store holds versions of: with neither Host nor
	// Scope, the ones in this directory or below it are in play too (a file wrapped
	// with --config is found again by a plain unwrap or status).
	Known []string
	// Lenient skips another host's file that does not parse, rather than failing:
	// a stale ~/.cursor/mcp.json must not block a wrap of every project. status is
	// not lenient: reporting it is its job.
	Lenient bool
}

// Target is one servers object a command acts on; Dir is the project directory, for
// a project file that was not found.
type Target struct {
	File
	Dir string
}

// Loaded is a target whose file was read and has servers there.
type Loaded struct {
	Target
	Data []byte
	Doc  *Document
}

// Explicit reports whether the selection names one file or scope, which must then
// exist; otherwise every file that has servers is used, as status lists them.
func (s Selection) Explicit() bool { return s.Config != "" || s.Scope != "" }

// Targets are the files and scopes selected: with Host, that host's; with Scope
// alone, Claude Code's; else every host's, and the Known files in this directory.
func (s Selection) Targets() ([]Target, error) {
	dir, err := ProjectDir()
	if err != nil {
		return nil, err
	}
	scope := Scope(s.Scope)
	var host Host
	if s.Host != "" {
		if host, err = ParseHost(s.Host); err != nil {
			return nil, err
		}
	}
	if s.Config != "" {
		if host == "" {
			host = GuessHost(s.Config)
		}
		t := Target{File: File{Host: host, Loc: Location{File: s.Config, Host: host}, Found: true}}
		if scope == ScopeLocal {
			t.Scope, t.Loc.Project = scope, dir
		} else if scope != "" {
			t.Scope = scope
		}
		return []Target{t}, nil
	}
	env, err := OSEnv(dir)
	if err != nil {
		return nil, err
	}
	hosts := Hosts
	switch {
	case host != "":
		hosts = []Host{host}
	case scope != "":
		hosts = []Host{HostClaudeCode}
	}
	var ts []Target
	for _, h := range hosts {
		for _, f := range env.HostFiles(h, scope) {
			ts = append(ts, Target{File: File{Host: h, Scope: f.Scope, Loc: f.Loc, Found: f.Found}, Dir: dir})
		}
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("%s has no %s scope", host.Name(), scope)
	}
	if host == "" && scope == "" {
		ts = append(ts, knownTargets(dir, s.Known, ts)...)
	}
	return ts, nil
}

// knownTargets are the files of known in dir or below it that no target names
// already.
func knownTargets(dir string, known []string, ts []Target) []Target {
	var out []Target
	for _, f := range known {
		rel, err := filepath.Rel(dir, f)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		if slices.ContainsFunc(ts, func(t Target) bool { return SameFile(t.Loc.File, f) }) {
			continue
		}
		h := GuessHost(f)
		out = append(out, Target{File: File{Host: h, Loc: Location{File: f, Host: h}, Found: true}})
	}
	return out
}

// Load reads the targets, their wrapped entries' arguments checked with check (see
// CheckProxyArgs; none when nil). A scope not in use (no file, no servers there) is skipped unless
// the selection named it; so is, when Lenient, another host's file that does not
// parse (returned in skipped, to be named); any other failure is an error.
func (s Selection) Load(ts []Target, check ProxyArgsCheck) (out []Loaded, skipped []error, err error) {
	var errs []error
	for _, t := range ts {
		if !t.Found {
			if s.Explicit() {
				rel, err := filepath.Rel(t.Dir, t.Loc.File)
				if err != nil {
					rel = t.Loc.File
				}
				errs = append(errs, fmt.Errorf("no %s in %s or any directory above it", rel, t.Dir))
			}
			continue
		}
		data, err := os.ReadFile(t.Loc.File)
		if err == nil {
			var doc *Document
			if doc, err = ParseChecked(t.Loc, data, check); err == nil {
				t.Loc = doc.Location()
				out = append(out, Loaded{t, data, doc})
				continue
			}
		} else {
			err = fmt.Errorf("reading MCP config: %w", err)
		}
		if !s.Explicit() && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNoServers)) {
			continue
		}
		if s.Lenient && !s.Explicit() && s.Host == "" && t.Host != HostClaudeCode {
			skipped = append(skipped, err)
			continue
		}
		errs = append(errs, err)
	}
	return out, skipped, errors.Join(errs...)
}

// ParseChecked parses data as the file at loc, its wrapped entries' arguments
// checked with check (none when nil).
func ParseChecked(loc Location, data []byte, check ProxyArgsCheck) (*Document, error) {
	doc, err := Parse(loc, data)
	if err == nil && check != nil {
		doc.CheckProxyArgs(check)
	}
	return doc, err
}

// ProjectDir is the working directory as Claude Code names it in ~/.claude.json:
// Node's process.cwd(), which has symlinks resolved.
func ProjectDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the project directory: %w", err)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return dir, nil
}

// OSEnv is where the hosts' files are, from this process's environment, for a
// session started in dir.
func OSEnv(dir string) (Env, error) {
	home, err := os.UserHomeDir()
	if err != nil && os.Getenv("CLAUDE_CONFIG_DIR") == "" {
		return Env{}, fmt.Errorf("finding ~/.claude.json: %w", err)
	}
	return Env{
		Dir: dir, Home: home, ClaudeConfigDir: os.Getenv("CLAUDE_CONFIG_DIR"),
		AppData: os.Getenv("APPDATA"), XDGConfigHome: os.Getenv("XDG_CONFIG_HOME"), GOOS: runtime.GOOS,
	}, nil
}

// SameFile reports whether a and b name the same existing file.
func SameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
