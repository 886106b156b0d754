package main

import (
	"context"
	"flag"
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

// The completion command: `bir-proxy completion bash|zsh|fish` prints a script that
// completes the commands and their flags (fixed for this binary, written into the
// script) and, for wrap, unwrap and log --server, the server names, which the script
// asks for at completion time with `bir-proxy completion servers wrap|unwrap|log`:
// the entries of the MCP config files wrap would use from the current directory
// (unwrapped ones for wrap, wrapped ones for unwrap), and for log the servers that
// have a journal too.

func runCompletion(ctx context.Context, c *cli, args []string) int {
	self, _ := findSubcommand("completion")
	_, args, code, ok := c.parseCommand(self, args, false)
	if !ok {
		return code
	}
	if len(args) == 2 && args[0] == "servers" {
		for _, n := range completionServers(args[1]) {
			fmt.Fprintln(c.stdout, n)
		}
		return 0
	}
	if len(args) != 1 {
		return c.usageError("completion", fmt.Errorf("give one shell: bash, zsh or fish"))
	}
	switch args[0] {
	case "bash":
		writeBashCompletion(c.stdout, false)
	case "zsh":
		writeBashCompletion(c.stdout, true)
	case "fish":
		writeFishCompletion(c.stdout)
	default:
		return c.usageError("completion", fmt.Errorf("no completion for %q: bash, zsh or fish", args[0]))
	}
	return 0
}

// completionFlag is one flag as a completion offers it.
type completionFlag struct {
	name, usage string
	takesValue  bool
}

func flagsOf(define func(fs *flag.FlagSet)) []completionFlag {
	fs := newFlagSet("bir-proxy")
	define(fs)
	var out []completionFlag
	fs.VisitAll(func(f *flag.Flag) {
		bf, isBool := f.Value.(interface{ IsBoolFlag() bool })
		usage, _ := strings.CutSuffix(f.Usage, "\n")
		if i := strings.IndexAny(usage, ";("); i > 0 {
			usage = usage[:i] // the first clause is enough beside a flag
		}
		out = append(out, completionFlag{name: f.Name, usage: strings.TrimSpace(usage), takesValue: !isBool || !bf.IsBoolFlag()})
	})
	return out
}

func proxyCompletionFlags() []completionFlag {
	return flagsOf(func(fs *flag.FlagSet) { defineProxyFlags(fs) })
}

func commandCompletionFlags(sc subcommand) []completionFlag {
	return flagsOf(func(fs *flag.FlagSet) { sc.flags(fs) })
}

// completionServers lists the server names to offer after verb (wrap, unwrap, or
// log's --server), sorted, each once. What cannot be read is left out silently: a
// completion has nowhere to say it.
func completionServers(verb string) []string {
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

func words(fs []completionFlag) string {
	var b []string
	for _, f := range fs {
		b = append(b, "--"+f.name)
	}
	return strings.Join(b, " ")
}

func valueFlags(fs []completionFlag) string {
	var b []string
	for _, f := range fs {
		if f.takesValue {
			b = append(b, "--"+f.name, "-"+f.name)
		}
	}
	return strings.Join(b, "|")
}

// writeBashCompletion writes the bash script; for zsh, the same behind bashcompinit.
func writeBashCompletion(w io.Writer, zsh bool) {
	var names []string
	for _, sc := range subcommands() {
		names = append(names, sc.name)
	}
	if zsh {
		fmt.Fprint(w, "#compdef bir-proxy\n# zsh completion for bir-proxy: eval \"$(bir-proxy completion zsh)\" in ~/.zshrc\nautoload -U +X bashcompinit && bashcompinit\n")
	} else {
		fmt.Fprint(w, "# bash completion for bir-proxy: eval \"$(bir-proxy completion bash)\" in ~/.bashrc\n")
	}
	proxy := proxyCompletionFlags()
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
	for _, sc := range subcommands() {
		fs := commandCompletionFlags(sc)
		fmt.Fprintf(w, "    %s)\n", sc.name)
		if vf := valueFlags(fs); vf != "" {
			server := ":"
			if sc.name == "log" {
				server = `[ "$prev" = --server ] || [ "$prev" = -server ] && { COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" completion servers log 2>/dev/null)" -- "$cur")); return; }`
			}
			fmt.Fprintf(w, "      %s\n      case \"$prev\" in %s) return ;; esac\n", server, vf)
		}
		rest := ""
		switch sc.name {
		case "wrap", "unwrap":
			rest = fmt.Sprintf(`$("${COMP_WORDS[0]}" completion servers %s 2>/dev/null)`, sc.name)
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

func writeFishCompletion(w io.Writer) {
	fmt.Fprint(w, "# fish completion for bir-proxy: bir-proxy completion fish > ~/.config/fish/completions/bir-proxy.fish\n")
	var names []string
	for _, sc := range subcommands() {
		names = append(names, sc.name)
	}
	fmt.Fprintf(w, "complete -c bir-proxy -f\n")
	for _, sc := range subcommands() {
		fmt.Fprintf(w, "complete -c bir-proxy -n __fish_use_subcommand -a %s -d %s\n", sc.name, fishQuote(sc.summary))
	}
	for _, f := range proxyCompletionFlags() {
		fmt.Fprintf(w, "complete -c bir-proxy -n __fish_use_subcommand -l %s%s -d %s\n", f.name, fishRequires(f), fishQuote(f.usage))
	}
	for _, sc := range subcommands() {
		when := "'__fish_seen_subcommand_from " + sc.name + "'"
		for _, f := range commandCompletionFlags(sc) {
			extra := fishRequires(f)
			if sc.name == "log" && f.name == "server" {
				extra += " -a '(bir-proxy completion servers log 2>/dev/null)'"
			}
			if f.name == "scope" {
				extra += " -a 'project local user'"
			}
			if f.name == "host" {
				extra += " -a 'claude-code claude-desktop cursor gemini vscode windsurf'"
			}
			fmt.Fprintf(w, "complete -c bir-proxy -n %s -l %s%s -d %s\n", when, f.name, extra, fishQuote(f.usage))
		}
		switch sc.name {
		case "wrap", "unwrap":
			fmt.Fprintf(w, "complete -c bir-proxy -n %s -a '(bir-proxy completion servers %s 2>/dev/null)'\n", when, sc.name)
		case "help":
			fmt.Fprintf(w, "complete -c bir-proxy -n %s -a %s\n", when, fishQuote(strings.Join(names, " ")))
		case "auth":
			fmt.Fprintf(w, "complete -c bir-proxy -n %s -a status\n", when)
		case "completion":
			fmt.Fprintf(w, "complete -c bir-proxy -n %s -a 'bash zsh fish'\n", when)
		}
	}
}

func fishRequires(f completionFlag) string {
	if f.takesValue {
		return " -r"
	}
	return ""
}

func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
