// Package completioncmd is `bir-proxy completion bash|zsh|fish`: it prints a script
// that completes the commands and their flags (fixed for this binary, written into
// the script from a Description main makes of its command table) and, for wrap,
// unwrap and log --server, the server names, which the script asks for at completion
// time with `bir-proxy completion servers wrap|unwrap|log`: the entries of the MCP
// config files wrap would use from the current directory (unwrapped ones for wrap,
// wrapped ones for unwrap), and for log the servers that have a journal too.
package completioncmd

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/mcpconfig"
	"github.com/bir-dev/bir-proxy/recorder"
)

// Flag is one flag as a completion offers it.
type Flag struct {
	Name       string // without dashes
	Usage      string // a short description (fish shows it)
	TakesValue bool   // the next word is its value, not a name or a flag
}

// Command is one of bir-proxy's commands other than running a server.
type Command struct {
	Name, Summary string
	Flags         []Flag
}

// Description is what the scripts complete: the commands, in the order they are
// offered, and the proxy's own flags.
type Description struct {
	Commands []Command
	Proxy    []Flag
}

func (d Description) names() []string {
	var names []string
	for _, sc := range d.Commands {
		names = append(names, sc.Name)
	}
	return names
}

// Options are what Run runs with.
type Options struct {
	Stdout, Stderr io.Writer
	Description    Description
	// Args are the words after `completion`: a shell, or servers VERB.
	Args []string
	// ProxyArgsProblem is the usage error the proxy would print for a wrapped
	// entry's arguments: an entry it would not start is not offered as wrapped.
	ProxyArgsProblem mcpconfig.ProxyArgsCheck
}

// Run runs the command; it returns the exit status: 0, or 2 for a usage error.
func Run(opts Options) int {
	usage := func(err error) int {
		fmt.Fprintf(opts.Stderr, "bir-proxy completion: %s (see bir-proxy help completion)\n", strings.TrimSpace(err.Error()))
		return 2
	}
	args := opts.Args
	if len(args) == 2 && args[0] == "servers" {
		for _, n := range servers(args[1], opts.ProxyArgsProblem) {
			fmt.Fprintln(opts.Stdout, n)
		}
		return 0
	}
	if len(args) != 1 {
		return usage(fmt.Errorf("give one shell: bash, zsh or fish"))
	}
	switch args[0] {
	case "bash":
		WriteBash(opts.Stdout, opts.Description, false)
	case "zsh":
		WriteBash(opts.Stdout, opts.Description, true)
	case "fish":
		WriteFish(opts.Stdout, opts.Description)
	default:
		return usage(fmt.Errorf("no completion for %q: bash, zsh or fish", args[0]))
	}
	return 0
}

// servers lists the server names to offer after verb (wrap, unwrap, or
// log's --server), sorted, each once. What cannot be read is left out silently: a
// completion has nowhere to say it.
func servers(verb string, proxyArgsProblem mcpconfig.ProxyArgsCheck) []string {
	seen := map[string]bool{}
	sel := mcpconfig.Selection{}
	if ts, err := sel.Targets(); err == nil {
		ls, _, _ := sel.Load(ts, proxyArgsProblem)
		for _, l := range ls {
			for _, s := range l.Doc.Servers() {
				wrapped := s.Kind == mcpconfig.KindWrapped || s.Kind == mcpconfig.KindWrappedRemote
				switch {
				case verb == "wrap" && (wrapped || s.Kind == mcpconfig.KindUnknown || s.Name == "bir"):
				case verb == "unwrap" && !wrapped:
				default:
					seen[s.Name] = true
					if verb == "log" && s.ProxyName != "" {
						seen[s.ProxyName] = true
					}
				}
			}
		}
	}
	if verb == "log" {
		if state, err := recorder.DefaultStateDir(); err == nil {
			for _, n := range journalServers(journal.Dir(state)) {
				seen[n] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		// One word a shell can offer as it is.
		if n != "" && !strings.ContainsAny(n, " \t\n'\"\\$`") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// journalServers are the servers with a journal in dir: SERVER.jsonl, for the names
// the journal's file name keeps as they are (an escaped or hashed one is left out).
func journalServers(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || e.IsDir() || name == "" {
			continue
		}
		if journal.Path("", name) == filepath.Join("journal", e.Name()) {
			out = append(out, name)
		}
	}
	return out
}

func words(fs []Flag) string {
	var b []string
	for _, f := range fs {
		b = append(b, "--"+f.Name)
	}
	return strings.Join(b, " ")
}

func valueFlags(fs []Flag) string {
	var b []string
	for _, f := range fs {
		if f.TakesValue {
			b = append(b, "--"+f.Name, "-"+f.Name)
		}
	}
	return strings.Join(b, "|")
}

// WriteBash writes the bash script for the commands and flags of d; for zsh, the
// same behind bashcompinit.
func WriteBash(w io.Writer, d Description, zsh bool) {
	names := d.names()
	if zsh {
		fmt.Fprint(w, "#compdef bir-proxy\n# zsh completion for bir-proxy: eval \"$(bir-proxy completion zsh)\" in ~/.zshrc\nautoload -U +X bashcompinit && bashcompinit\n")
	} else {
		fmt.Fprint(w, "# bash completion for bir-proxy: eval \"$(bir-proxy completion bash)\" in ~/.bashrc\n")
	}
	proxy := d.Proxy
	fmt.Fprintf(w, `_bir_proxy() {
  local cur prev cmd
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev=""
  [ "$COMP_CWORD" -gt 0 ] && prev="${COMP_WORDS[COMP_CWORD-1]}"
  cmd=""
  [ "$COMP_CWORD" -gt 1 ] && cmd="${COMP_WORDS[1]}"
  COMPREPLY=()
  case "$prev" in
    --scope|-scope) COMPREPLY=($(compgen -W "project local user" -- "$cur")); return ;;
    --host|-host) COMPREPLY=($(compgen -W "claude-code claude-desktop cursor gemini vscode windsurf" -- "$cur")); return ;;
    --transport|-transport) COMPREPLY=($(compgen -W "auto http sse" -- "$cur")); return ;;
    --log-level|-log-level) COMPREPLY=($(compgen -W "debug info warn error" -- "$cur")); return ;;
    --config|-config|--journal|-journal|--header-file|-header-file|--proxy-path|-proxy-path)
      COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  case "$cmd" in
`)
	for _, sc := range d.Commands {
		fs := sc.Flags
		fmt.Fprintf(w, "    %s)\n", sc.Name)
		if vf := valueFlags(fs); vf != "" {
			server := ":"
			if sc.Name == "log" {
				server = `[ "$prev" = --server ] || [ "$prev" = -server ] && { COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" completion servers log 2>/dev/null)" -- "$cur")); return; }`
			}
			fmt.Fprintf(w, "      %s\n      case \"$prev\" in %s) return ;; esac\n", server, vf)
		}
		rest := ""
		switch sc.Name {
		case "wrap", "unwrap":
			rest = fmt.Sprintf(`$("${COMP_WORDS[0]}" completion servers %s 2>/dev/null)`, sc.Name)
		case "help":
			rest = strings.Join(names, " ")
		case "auth":
			rest = "status"
		case "completion":
			rest = "bash zsh fish"
		}
		fmt.Fprintf(w, "      if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); else COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); fi ;;\n", words(fs), rest)
	}
	fmt.Fprintf(w, `    *)
      # bir-proxy [flags] COMMAND...: its flags, the commands, then the server's command.
      case "$prev" in %s) return ;; esac
      if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W %q -- "$cur"));
      elif [ "$COMP_CWORD" -eq 1 ]; then COMPREPLY=($(compgen -W %q -- "$cur") $(compgen -c -- "$cur"));
      else COMPREPLY=($(compgen -c -- "$cur") $(compgen -f -- "$cur")); fi ;;
  esac
}
complete -F _bir_proxy bir-proxy
`, valueFlags(proxy), words(proxy)+" --help", strings.Join(names, " "))
}

// WriteFish writes the fish script for the commands and flags of d.
func WriteFish(w io.Writer, d Description) {
	fmt.Fprint(w, "# fish completion for bir-proxy: bir-proxy completion fish > ~/.config/fish/completions/bir-proxy.fish\n")
	names := d.names()
	fmt.Fprintf(w, "complete -c bir-proxy -f\n")
	for _, sc := range d.Commands {
		fmt.Fprintf(w, "complete -c bir-proxy -n __fish_use_subcommand -a %s -d %s\n", sc.Name, fishQuote(sc.Summary))
	}
	for _, f := range d.Proxy {
		fmt.Fprintf(w, "complete -c bir-proxy -n __fish_use_subcommand -l %s%s -d %s\n", f.Name, fishRequires(f), fishQuote(f.Usage))
	}
	for _, sc := range d.Commands {
		when := "'__fish_seen_subcommand_from " + sc.Name + "'"
		for _, f := range sc.Flags {
			extra := fishRequires(f)
			if sc.Name == "log" && f.Name == "server" {
				extra += " -a '(bir-proxy completion servers log 2>/dev/null)'"
			}
			if f.Name == "scope" {
				extra += " -a 'project local user'"
			}
			if f.Name == "host" {
				extra += " -a 'claude-code claude-desktop cursor gemini vscode windsurf'"
			}
			fmt.Fprintf(w, "complete -c bir-proxy -n %s -l %s%s -d %s\n", when, f.Name, extra, fishQuote(f.Usage))
		}
		switch sc.Name {
		case "wrap", "unwrap":
			fmt.Fprintf(w, "complete -c bir-proxy -n %s -a '(bir-proxy completion servers %s 2>/dev/null)'\n", when, sc.Name)
		case "help":
			fmt.Fprintf(w, "complete -c bir-proxy -n %s -a %s\n", when, fishQuote(strings.Join(names, " ")))
		case "auth":
			fmt.Fprintf(w, "complete -c bir-proxy -n %s -a status\n", when)
		case "completion":
			fmt.Fprintf(w, "complete -c bir-proxy -n %s -a 'bash zsh fish'\n", when)
		}
	}
}

func fishRequires(f Flag) string {
	if f.TakesValue {
		return " -r"
	}
	return ""
}

func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
