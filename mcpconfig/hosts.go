package mcpconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Host is an MCP host whose config files wrap, unwrap and status edit.
type Host string

const (
	HostClaudeCode    Host = "claude-code"
	HostClaudeDesktop Host = "claude-desktop"
	HostCursor        Host = "cursor"
	HostGemini        Host = "gemini"
	HostVSCode        Host = "vscode"
	HostWindsurf      Host = "windsurf"
)

// Hosts are the hosts known, in the order their files are listed.
var Hosts = []Host{HostClaudeCode, HostClaudeDesktop, HostCursor, HostGemini, HostVSCode, HostWindsurf}

// ErrUnsupportedFormat is returned (wrapped) for a host or file whose format
// is not one this package edits.
var ErrUnsupportedFormat = fmt.Errorf("format not supported")

// codexTOML is what a Codex config, or any TOML file, is refused with: it is
// not JSON, and calling it invalid JSON would send the user looking for a
// syntax error.
const codexTOML = "Codex's TOML config is not supported yet (bir-proxy edits the JSON configs of Claude Code, Claude Desktop, Cursor, Gemini CLI, VS Code and Windsurf)"

// ParseHost checks a --host value.
func ParseHost(s string) (Host, error) {
	for _, h := range Hosts {
		if string(h) == s {
			return h, nil
		}
	}
	if strings.EqualFold(s, "codex") {
		return "", fmt.Errorf("%s: %w", codexTOML, ErrUnsupportedFormat)
	}
	names := make([]string, len(Hosts))
	for i, h := range Hosts {
		names[i] = string(h)
	}
	return "", fmt.Errorf("unknown host %q: want one of %s", s, strings.Join(names, ", "))
}

// Name is the host as people call it.
func (h Host) Name() string {
	switch h {
	case HostClaudeDesktop:
		return "Claude Desktop"
	case HostCursor:
		return "Cursor"
	case HostGemini:
		return "Gemini CLI"
	case HostVSCode:
		return "VS Code"
	case HostWindsurf:
		return "Windsurf"
	default:
		return "Claude Code"
	}
}

// Format is how a host writes its config file.
type Format struct {
	// Servers is the top-level member that holds the server entries.
	Servers string
	// Comments: `//` and `/* */` comments are allowed (jsonc.go).
	Comments bool
	// TrailingCommas: a comma may follow the last member or element.
	TrailingCommas bool
}

// Format is h's file format. Gemini CLI reads its settings.json through
// strip-json-comments (comments, no trailing commas); VS Code reads mcp.json as
// JSONC (comments and trailing commas); the others read strict JSON.
func (h Host) Format() Format {
	switch h {
	case HostGemini:
		return Format{Servers: "mcpServers", Comments: true}
	case HostVSCode:
		return Format{Servers: "servers", Comments: true, TrailingCommas: true}
	default:
		return Format{Servers: "mcpServers"}
	}
}

// Env is where hosts' files are looked for: the project directory and the
// user's directories, as the OS and environment give them.
type Env struct {
	Dir  string // the project directory (the working directory)
	Home string
	// ClaudeConfigDir is $CLAUDE_CONFIG_DIR, where Claude Code keeps
	// .claude.json when it is set.
	ClaudeConfigDir string
	AppData         string // %APPDATA% (Windows)
	XDGConfigHome   string // $XDG_CONFIG_HOME (Linux)
	GOOS            string
}

// File is one config file of a host, and which servers in it.
type File struct {
	Host  Host
	Scope Scope
	Loc   Location
	// Found is false for a project file that no directory from Dir up has;
	// Loc then names the one in Dir.
	Found bool
}

// Label says which host's file, and which part of it, for a person: Claude
// Code's scopes as they always were ("project scope"), any other host's by
// name ("Cursor project", "Gemini CLI user").
func (f File) Label() string {
	claude := f.Host == HostClaudeCode || f.Host == ""
	switch {
	case claude && f.Scope == "":
		return "config"
	case claude:
		return string(f.Scope) + " scope"
	case f.Scope == "":
		return f.Host.Name() + " config"
	default:
		return f.Host.Name() + " " + string(f.Scope)
	}
}

// hostProjectFiles are the project-relative files of each host.
var hostProjectFiles = map[Host]string{
	HostCursor: filepath.Join(".cursor", "mcp.json"),
	HostGemini: filepath.Join(".gemini", "settings.json"),
	HostVSCode: filepath.Join(".vscode", "mcp.json"),
}

// UserFile is h's file for the user, "" when it has none (VS Code keeps its
// user servers in a profile; see docs/wrap.md) or no home is known.
func (env Env) UserFile(h Host) string {
	if h == HostClaudeCode {
		return ClaudeJSON(env.ClaudeConfigDir, env.Home)
	}
	if env.Home == "" {
		// Without a home, a user file would be a path relative to the
		// working directory: another host's project file under a wrong name.
		return ""
	}
	switch h {
	case HostClaudeDesktop:
		const name = "claude_desktop_config.json"
		switch env.GOOS {
		case "darwin":
			return filepath.Join(env.Home, "Library", "Application Support", "Claude", name)
		case "windows":
			if env.AppData == "" {
				return filepath.Join(env.Home, "AppData", "Roaming", "Claude", name)
			}
			return filepath.Join(env.AppData, "Claude", name)
		default:
			cfg := env.XDGConfigHome
			if cfg == "" || !filepath.IsAbs(cfg) {
				cfg = filepath.Join(env.Home, ".config")
			}
			return filepath.Join(cfg, "Claude", name)
		}
	case HostCursor:
		return filepath.Join(env.Home, ".cursor", "mcp.json")
	case HostGemini:
		return filepath.Join(env.Home, ".gemini", "settings.json")
	case HostWindsurf:
		return filepath.Join(env.Home, ".codeium", "windsurf", "mcp_config.json")
	}
	return ""
}

// HostFiles are the files of h for env's project and user, in the order
// status lists them: the project's first. scope, when set, keeps only that
// scope's. A file that does not exist is listed all the same (Load says so).
func (env Env) HostFiles(h Host, scope Scope) []File {
	var fs []File
	add := func(s Scope, loc Location, found bool) {
		if scope == "" || scope == s {
			loc.Host = h
			fs = append(fs, File{Host: h, Scope: s, Loc: loc, Found: found})
		}
	}
	if h == HostClaudeCode {
		claudeJSON := env.UserFile(h)
		for _, s := range []Scope{ScopeProject, ScopeLocal, ScopeUser} {
			loc, ok := Locate(s, env.Dir, claudeJSON)
			add(s, loc, ok)
		}
		return fs
	}
	if rel := hostProjectFiles[h]; rel != "" {
		path, ok := findUp(env.Dir, rel, env.Home)
		add(ScopeProject, Location{File: path}, ok)
	}
	if u := env.UserFile(h); u != "" {
		add(ScopeUser, Location{File: u}, true)
	}
	return fs
}

// findUp is rel in dir or in its nearest parent that has it, as an editor
// opened on that parent finds it. The home directory is passed over: its
// .cursor/mcp.json and .gemini/settings.json are the user's files, not a
// project's. Without one, it returns the path in dir and false.
func findUp(dir, rel, home string) (string, bool) {
	home = filepath.Clean(home)
	for d := dir; ; {
		if home == "" || filepath.Clean(d) != home {
			path := filepath.Join(d, rel)
			if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
				return path, true
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			return filepath.Join(dir, rel), false
		}
		d = parent
	}
}

// GuessHost is the host whose file path is by its name and directory
// (.gemini/settings.json is Gemini CLI's, .vscode/mcp.json VS Code's, ...);
// any other name is read as Claude Code's mcpServers JSON, as --config
// always has.
func GuessHost(path string) Host {
	base := strings.ToLower(filepath.Base(path))
	parent := strings.ToLower(filepath.Base(filepath.Dir(path)))
	switch {
	case base == "settings.json" && parent == ".gemini":
		return HostGemini
	case base == "mcp.json" && parent == ".vscode":
		return HostVSCode
	case base == "mcp.json" && parent == ".cursor":
		return HostCursor
	case base == "claude_desktop_config.json":
		return HostClaudeDesktop
	case base == "mcp_config.json" && parent == "windsurf":
		return HostWindsurf
	}
	return HostClaudeCode
}

// unsupported says why the file at path is not one this package reads, ""
// when it may be.
func unsupported(path string) string {
	if strings.EqualFold(filepath.Ext(path), ".toml") {
		return codexTOML
	}
	return ""
}
