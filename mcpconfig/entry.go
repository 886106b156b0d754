package mcpconfig

import (
	"errors"
	"fmt"
	"strings"
)

// Kind is the shape of a server entry, as far as wrapping is concerned.
type Kind int

const (
	// KindUnknown is an entry this package does not understand; it is
	// never edited.
	KindUnknown Kind = iota
	// KindStdio is a plain command + args entry: it can be wrapped.
	KindStdio
	// KindWrapped is a stdio entry that already runs the server through
	// bir-proxy (`bir-proxy [flags] -- COMMAND [ARGS...]`).
	KindWrapped
	// KindRemote is an http or sse entry.
	KindRemote
	// KindWrappedRemote runs bir-proxy with --url instead of a command.
	KindWrappedRemote
)

func (k Kind) String() string {
	switch k {
	case KindStdio:
		return "stdio"
	case KindWrapped:
		return "wrapped"
	case KindRemote:
		return "remote"
	case KindWrappedRemote:
		return "wrapped remote"
	default:
		return "unknown"
	}
}

// RecorderName is the entry name of the recorder's own MCP server. Wrapping
// it would report the recorder's tool calls back to itself.
const RecorderName = "bir"

// serverFlagEq spells --server with an attached value. wrap uses this
// spelling, instead of `--server NAME`, exactly when it had to create the
// args key; it is how unwrap knows to delete the key again rather than
// leave `"args": []` behind, with nothing stored outside the entry.
const serverFlagEq = "--server="

// takesValue reports whether a proxy flag takes its value as the next
// argument, so that a value spelled "--" is not mistaken for the end of the
// proxy's flags. Any other flag is taken to stand alone.
func takesValue(flag string) bool {
	switch flag {
	case "server", "url", "transport", "header", "recorder", "correlation-key", "journal":
		return true
	}
	return false
}

// entry is one server entry: its text and what was learnt from it.
type entry struct {
	name    string
	raw     string
	kind    Kind
	problem string // why the entry is KindUnknown

	members []member
	command int // index in members, -1 if absent
	args    int // index in members, -1 if absent
	argv    []element
	typ     string
	url     string

	// For KindWrapped: the index in argv of the "--" that ends the
	// proxy's flags, and the --server value.
	dashdash  int
	proxyName string
	eqForm    bool // --server was spelled --server=NAME
}

func parseEntry(name, raw string) entry {
	e := entry{name: name, raw: raw, command: -1, args: -1}
	ms, ok := members(raw)
	if !ok {
		return e.unknown("not a JSON object")
	}
	e.members = ms
	seen := map[string]int{}
	for i, m := range e.members {
		seen[m.key]++
		switch m.key {
		case "command":
			e.command = i
		case "args":
			e.args = i
		}
	}
	for _, k := range []string{"command", "args", "type", "url"} {
		if seen[k] > 1 {
			// Hosts keep the last of duplicate keys: editing one of
			// them and not the other could change what the host runs.
			return e.unknown(fmt.Sprintf("key %q appears more than once", k))
		}
	}
	for _, m := range e.members {
		switch m.key {
		case "type":
			if !m.value.isString() {
				return e.unknown(`"type" is not a string`)
			}
			e.typ = m.value.Str
		case "url":
			if m.value.isString() {
				e.url = m.value.Str
			}
		}
	}

	if e.typ == "http" || e.typ == "sse" || (e.typ == "" && e.command < 0 && e.url != "") {
		e.kind = KindRemote
		return e
	}
	if e.typ != "" && e.typ != "stdio" {
		return e.unknown(fmt.Sprintf("type %q is not one bir-proxy knows", e.typ))
	}
	if e.command < 0 {
		return e.unknown(`no "command"`)
	}
	if c := e.members[e.command].value; !c.isString() || c.Str == "" {
		return e.unknown(`"command" is not a non-empty string`)
	}
	if e.args >= 0 {
		a := e.members[e.args]
		if !a.value.isArray() {
			return e.unknown(`"args" is not an array`)
		}
		e.argv = elements(a.value.Raw)
		for _, el := range e.argv {
			if !el.value.isString() {
				return e.unknown(`"args" holds something other than strings`)
			}
		}
	}
	if !IsProxyCommand(e.members[e.command].value.Str) {
		e.kind = KindStdio
		return e
	}
	return e.parseProxyArgs()
}

// parseProxyArgs reads the arguments of an entry whose command is bir-proxy.
func (e entry) parseProxyArgs() entry {
	e.dashdash = -1
	url := false
scan:
	for i := 0; i < len(e.argv); i++ {
		a := e.argv[i].value.Str
		switch {
		case a == "--":
			e.dashdash = i
			break scan
		case strings.HasPrefix(a, serverFlagEq) || strings.HasPrefix(a, "-"+serverFlagEq):
			_, e.proxyName, _ = strings.Cut(a, "=")
			e.eqForm = true
		case strings.HasPrefix(a, "-") && !strings.Contains(a, "="):
			flag := strings.TrimLeft(a, "-")
			if takesValue(flag) && i+1 < len(e.argv) {
				i++
				switch flag {
				case "server":
					e.proxyName = e.argv[i].value.Str
				case "url":
					url = true
				}
			}
		case strings.HasPrefix(a, "--url=") || strings.HasPrefix(a, "-url="):
			url = true
		}
	}
	switch {
	case e.dashdash >= 0 && e.dashdash+1 < len(e.argv):
		e.kind = KindWrapped
	case e.dashdash < 0 && url:
		e.kind = KindWrappedRemote
	case e.dashdash >= 0:
		return e.unknown(`runs bir-proxy with nothing after "--"`)
	default:
		return e.unknown(`runs bir-proxy without "--" or --url`)
	}
	return e
}

func (e entry) unknown(why string) entry {
	e.kind = KindUnknown
	e.problem = why
	return e
}

// IsProxyCommand reports whether command runs bir-proxy. Both separators
// count whatever the OS, since a Windows config can be read anywhere.
func IsProxyCommand(command string) bool {
	base := command[strings.LastIndexAny(command, `/\`)+1:]
	return base == "bir-proxy" || strings.EqualFold(base, "bir-proxy.exe")
}

// errRemote and errRemoteUnwrap are why remote entries are left alone for
// now.
var (
	errRemote       = errors.New("remote entries are not wrapped yet: bir-proxy cannot reach remote upstreams, so the entry is left as it is")
	errRemoteUnwrap = errors.New("unwrapping a remote entry comes with remote upstreams; left as it is")
)

// wrap returns the entry's text rewritten to start the server through the
// proxy at proxyPath.
func (e entry) wrap(proxyPath string) (string, error) {
	switch e.kind {
	case KindStdio:
		return e.wrapStdio(proxyPath), nil
	case KindRemote:
		// Becomes wrapRemote (--url, --transport, --header with ${VAR}
		// kept unexpanded) once the proxy has remote upstreams.
		return "", errRemote
	default:
		return "", fmt.Errorf("cannot wrap a %s entry", e.kind)
	}
}

// unwrap is the exact inverse of wrap.
func (e entry) unwrap() (string, error) {
	switch e.kind {
	case KindWrapped:
		return e.unwrapStdio(), nil
	case KindWrappedRemote:
		return "", errRemoteUnwrap
	default:
		return "", fmt.Errorf("cannot unwrap a %s entry", e.kind)
	}
}

// wrapStdio moves command and args behind `--`. The original command's
// and arguments' bytes are kept verbatim, and new text follows the style
// the entry already has, so that unwrapStdio can restore every byte.
func (e entry) wrapStdio(proxyPath string) string {
	cmd := e.members[e.command]
	cmdRaw := e.raw[cmd.valStart:cmd.valEnd]
	edits := []edit{{cmd.valStart, cmd.valEnd, quote(proxyPath)}}
	inline := ","
	if strings.Contains(e.raw[cmd.keyEnd:cmd.valStart], " ") {
		inline = ", "
	}

	if e.args < 0 {
		arr := "[" + strings.Join([]string{quote(serverFlagEq + e.name), `"--"`, cmdRaw}, inline) + "]"
		var sep string
		switch {
		case len(e.members) > 1:
			sep = e.raw[e.members[0].valEnd:e.members[1].keyStart]
		case strings.Contains(e.raw[1:cmd.keyStart], "\n"):
			sep = "," + e.raw[1:cmd.keyStart]
		default:
			sep = inline
		}
		text := sep + `"args"` + e.raw[cmd.keyEnd:cmd.valStart] + arr
		edits = append(edits, edit{cmd.valEnd, cmd.valEnd, text})
		return splice(e.raw, edits)
	}

	args := e.members[e.args]
	a := e.raw[args.valStart:args.valEnd]
	prefix := []string{`"--server"`, quote(e.name), `"--"`, cmdRaw}
	var arr string
	if len(e.argv) == 0 {
		// Everything after '[' (whitespace and ']') stays, so unwrap can
		// take it back from after the last element.
		arr = "[" + strings.Join(prefix, inline) + a[1:]
	} else {
		lead := a[1:e.argv[0].start]
		var sep string
		switch {
		case len(e.argv) > 1:
			sep = a[e.argv[0].end:e.argv[1].start]
		case strings.Contains(lead, "\n"):
			sep = "," + lead
		default:
			sep = inline
		}
		arr = "[" + lead + strings.Join(prefix, sep) + sep + a[e.argv[0].start:]
	}
	edits = append(edits, edit{args.valStart, args.valEnd, arr})
	return splice(e.raw, edits)
}

func (e entry) unwrapStdio() string {
	cmd := e.members[e.command]
	args := e.members[e.args]
	a := e.raw[args.valStart:args.valEnd]
	orig := e.argv[e.dashdash+1]
	rest := e.argv[e.dashdash+2:]
	edits := []edit{{cmd.valStart, cmd.valEnd, a[orig.start:orig.end]}}

	switch {
	case len(rest) == 0 && e.eqForm:
		// wrap created the args key: remove it with the separator before
		// it (or, as the first member, the one after it).
		if e.args > 0 {
			edits = append(edits, edit{e.members[e.args-1].valEnd, args.valEnd, ""})
		} else {
			edits = append(edits, edit{args.keyStart, e.members[1].keyStart, ""})
		}
	case len(rest) == 0:
		last := e.argv[len(e.argv)-1]
		edits = append(edits, edit{args.valStart, args.valEnd, "[" + a[last.end:]})
	default:
		edits = append(edits, edit{args.valStart, args.valEnd, "[" + a[1:e.argv[0].start] + a[rest[0].start:]})
	}
	return splice(e.raw, edits)
}

// upstream is the server's own command line: for a wrapped entry, what
// follows "--".
func (e entry) upstream() []string {
	var argv []string
	switch e.kind {
	case KindStdio:
		argv = append(argv, e.members[e.command].value.Str)
		for _, el := range e.argv {
			argv = append(argv, el.value.Str)
		}
	case KindWrapped:
		for _, el := range e.argv[e.dashdash+1:] {
			argv = append(argv, el.value.Str)
		}
	}
	return argv
}
