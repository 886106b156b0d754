package mcpconfig

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
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
	// bir-proxy (`bir-proxy [flags] [--] COMMAND [ARGS...]`).
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

// TakesValue reports whether a bir-proxy flag takes its value as the next
// argument (`--server NAME`), as opposed to standing alone (a bool flag).
// Reading a wrapped entry depends on it: the server's command is the first
// argument that is neither a flag nor a flag's value, so a value flag
// missing here would turn its value into the command, and unwrap would
// write that value as the command. cmd/bir-proxy checks this list against
// the proxy's own flag set.
func TakesValue(flag string) bool {
	switch flag {
	case "server", "correlation-key", "recorder", "journal", "journal-max-mb", "journal-keep", "max-message", "stop-grace", "log-level",
		"spool-max", "url", "transport", "header", "header-file", "connect-timeout", "otlp-endpoint",
		"client-id", "client-secret", "client-metadata-url", "oauth-port", "oauth-scope", "oauth-wait",
		"ignore-tool", "allow-tool", "call-timeout", "cassette", "pin-tools", "max-result-tokens", "log-file", "mock":
		return true
	}
	return false
}

// entry is one server entry: its text and what was learnt from it.
type entry struct {
	name    string
	extra   []string // more proxy flags wrap puts after --server, quoted (WrapWith)
	raw     string
	kind    Kind
	problem string // why the entry is KindUnknown
	// broken is why bir-proxy would refuse a wrapped entry's arguments (a
	// mistyped flag: "--sever x npx" reads as the command "x"), as the
	// Document's ProxyArgsCheck said; "" when they parse or were not checked.
	broken string

	members []member
	command int // index in members, -1 if absent
	args    int // index in members, -1 if absent
	argv    []element
	typ     string
	url     string

	// For KindRemote and KindWrappedRemote: the members involved, -1 if absent.
	typIdx, urlIdx, headersIdx int
	transport                  string // KindWrappedRemote: the --transport value

	// For KindWrapped: the index in argv of the server's own command (the
	// first argument after the proxy's flags, with or without a "--"
	// before it), and the --server value.
	cmdAt     int
	proxyName string
	eqForm    bool // --server was spelled --server=NAME
}

func parseEntry(name, raw string) entry {
	e := entry{name: name, raw: raw, command: -1, args: -1, typIdx: -1, urlIdx: -1, headersIdx: -1}
	// A JSONC entry (jsonc.go) is lexed through its mask; its text, comments
	// and all, is what wrap and unwrap splice, and the round-trip check in Wrap
	// refuses any that would not come back.
	ms, ok := members(raw, maskText(raw))
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
	for _, k := range []string{"headers"} {
		if seen[k] > 1 {
			return e.unknown(fmt.Sprintf("key %q appears more than once", k))
		}
	}
	for i, m := range e.members {
		switch m.key {
		case "type":
			if !m.value.isString() {
				return e.unknown(`"type" is not a string`)
			}
			e.typ = m.value.Str
			e.typIdx = i
		case "url":
			if m.value.isString() {
				e.url = m.value.Str
			}
			e.urlIdx = i
		case "headers":
			e.headersIdx = i
		}
	}

	if e.typ == "http" || e.typ == "sse" || (e.typ == "" && e.command < 0 && e.url != "") {
		e.kind = KindRemote
		e.problem = e.remoteProblem()
		return e
	}
	if e.typ != "" && e.typ != "stdio" {
		return e.unknown(fmt.Sprintf("type %q is not one bir-proxy knows", e.typ))
	}
	if e.command < 0 {
		for _, m := range e.members {
			switch m.key {
			case "httpUrl":
				// Gemini CLI's streamable HTTP entry: unwrap could not tell it
				// from a "url" one, so it is not wrapped (docs/wrap.md).
				return e.unknown(`an "httpUrl" entry (Gemini CLI's streamable HTTP) is not wrapped yet`)
			case "serverUrl":
				return e.unknown(`a "serverUrl" entry (Windsurf's remote) is not wrapped yet`)
			}
		}
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
		e.argv = elements(a.value.Raw, a.value.Mask)
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
// The server's command starts after "--" or, as Go's flag package parses
// the proxy's own command line, at the first argument that is not a flag
// or a flag's value (SPEC §1). Both forms are read: wrap writes the second
// (a bare "--" is split or dropped by some hosts and tools), hand-written
// entries and older wraps use the first, and `gemini mcp add` turns the
// first into the second by dropping the "--".
func (e entry) parseProxyArgs() entry {
	e.cmdAt = -1
	dashdash, url := false, false
scan:
	for i := 0; i < len(e.argv); i++ {
		a := e.argv[i].value.Str
		switch {
		case a == "--":
			dashdash = true
			if i+1 < len(e.argv) {
				e.cmdAt = i + 1
			}
			break scan
		case a == "-" || !strings.HasPrefix(a, "-"):
			e.cmdAt = i
			break scan
		case strings.HasPrefix(a, serverFlagEq) || strings.HasPrefix(a, serverFlagEq[1:]):
			_, e.proxyName, _ = strings.Cut(a, "=")
			e.eqForm = true
		case strings.HasPrefix(a, "--url=") || strings.HasPrefix(a, "-url="):
			url = true
		case !strings.Contains(a, "="):
			flag := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
			if TakesValue(flag) && i+1 < len(e.argv) {
				i++
				switch flag {
				case "server":
					e.proxyName = e.argv[i].value.Str
				case "url":
					url = true
				}
			}
		}
	}
	switch {
	case e.cmdAt >= 0:
		e.kind = KindWrapped
	case url:
		e.kind = KindWrappedRemote
		e.url, e.transport = e.remoteArgs()
	case dashdash:
		return e.unknown(`runs bir-proxy with nothing after "--"`)
	default:
		return e.unknown(`runs bir-proxy with neither a server command nor --url`)
	}
	return e
}

// proxyArgs are a wrapped entry's args as strings, for a ProxyArgsCheck.
func (e entry) proxyArgs() []string {
	args := make([]string, len(e.argv))
	for i, el := range e.argv {
		args[i] = el.value.Str
	}
	return args
}

// env is the entry's "env" object as "K=V" strings in file order; nil when it
// has none, or one that is not an object of strings (the host would refuse it).
func (e entry) env() []string {
	var out []string
	for _, m := range e.members {
		if m.key != "env" {
			continue
		}
		v := gjson.Parse(m.value.Mask)
		if !v.IsObject() {
			return nil
		}
		v.ForEach(func(k, v gjson.Result) bool {
			if v.Type == gjson.String {
				out = append(out, k.Str+"="+v.Str)
			}
			return true
		})
	}
	return out
}

// plain is e.raw[i:j], text between tokens (a separator, a colon) that wrap
// copies into the text it adds, without its comments: a comment stays where
// its author put it, once, and is not repeated beside every member wrap adds.
func (e entry) plain(i, j int) string { return stripComments(e.raw[i:j]) }

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

// wrap returns the entry's text rewritten to start the server through the
// proxy at proxyPath.
func (e entry) wrap(proxyPath string) (string, error) {
	switch e.kind {
	case KindStdio:
		return e.wrapStdio(proxyPath), nil
	case KindRemote:
		if e.problem != "" {
			return "", errors.New(e.problem)
		}
		return e.wrapRemote(proxyPath), nil
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
		return e.unwrapRemote()
	default:
		return "", fmt.Errorf("cannot unwrap a %s entry", e.kind)
	}
}

// wrapStdio moves command and args behind the proxy's --server flag. The
// original command's and arguments' bytes are kept verbatim, and new text
// follows the style the entry already has, so that unwrapStdio can restore
// every byte.
//
// The form is SPEC §1's: the command follows the flags directly, and "--"
// comes before it only when the command itself starts with "-" (the proxy
// would take it for a flag). A bare "--" in args is not safe with every
// host: the MCP Inspector's --config mode splits the command line there,
// and `gemini mcp add` drops it.
func (e entry) wrapStdio(proxyPath string) string {
	cmd := e.members[e.command]
	cmdRaw := e.raw[cmd.valStart:cmd.valEnd]
	var dashdash []string
	if strings.HasPrefix(cmd.value.Str, "-") {
		dashdash = []string{`"--"`}
	}
	edits := []edit{{cmd.valStart, cmd.valEnd, quote(proxyPath)}}
	inline := ","
	if strings.Contains(e.plain(cmd.keyEnd, cmd.valStart), " ") {
		inline = ", "
	}

	if e.args < 0 {
		arr := "[" + strings.Join(slices.Concat([]string{quote(serverFlagEq + e.name)}, e.extra, dashdash, []string{cmdRaw}), inline) + "]"
		var sep string
		switch {
		case len(e.members) > 1:
			sep = e.plain(e.members[0].valEnd, e.members[1].keyStart)
		case strings.Contains(e.plain(1, cmd.keyStart), "\n"):
			sep = "," + e.plain(1, cmd.keyStart)
		default:
			sep = inline
		}
		text := sep + `"args"` + e.plain(cmd.keyEnd, cmd.valStart) + arr
		edits = append(edits, edit{cmd.valEnd, cmd.valEnd, text})
		return splice(e.raw, edits)
	}

	args := e.members[e.args]
	a := e.raw[args.valStart:args.valEnd]
	prefix := slices.Concat([]string{`"--server"`, quote(e.name)}, e.extra, dashdash, []string{cmdRaw})
	var arr string
	if len(e.argv) == 0 {
		// Everything after '[' (whitespace and ']') stays, so unwrap can
		// take it back from after the last element.
		arr = "[" + strings.Join(prefix, inline) + a[1:]
	} else {
		// lead, the text before the first element, stays where it is, comments
		// and all; the separators between the new elements are copies without
		// them.
		lead := a[1:e.argv[0].start]
		var sep string
		switch {
		case len(e.argv) > 1:
			sep = stripComments(a[e.argv[0].end:e.argv[1].start])
		case strings.Contains(lead, "\n"):
			sep = "," + stripComments(lead)
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
	orig := e.argv[e.cmdAt]
	rest := e.argv[e.cmdAt+1:]
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
// follows the proxy's flags.
func (e entry) upstream() []string {
	var argv []string
	switch e.kind {
	case KindStdio:
		argv = append(argv, e.members[e.command].value.Str)
		for _, el := range e.argv {
			argv = append(argv, el.value.Str)
		}
	case KindWrapped:
		for _, el := range e.argv[e.cmdAt:] {
			argv = append(argv, el.value.Str)
		}
	}
	return argv
}

// A remote entry ("type": "http" or "sse", or a "url" with no "command") is wrapped
// into a stdio entry that runs `bir-proxy --server NAME --url URL --transport T
// --header "Name: value"...`. The edits are splices, each exactly undone by unwrap:
//   - the "url" member becomes "command" (the proxy) and "args", the URL's JSON
//     string going into args as its exact bytes, with the url member's own colon
//     spacing;
//   - a "type" member's value becomes "stdio" (hosts that read "type" must start the
//     command; --transport keeps what it was);
//   - the "headers" members are given to the proxy as --header arguments, ${VAR}
//     references as written (the host or the proxy expands them when the proxy
//     starts, never into the file), and the "headers" member is removed when unwrap
//     can write it back byte for byte from those arguments (it follows the url, in
//     the entry's own layout: one line, or one header a line indented as the
//     entry's members are); otherwise it stays, unused. A stdio entry has no
//     "headers" in any host's schema: Claude Code's (a non-strict zod object) drops
//     the member when it reads the file, so it is dead text beside the arguments
//     that do the work, a second copy of any literal secret, and a stricter host
//     could refuse the entry for it.
//
// Unwrap reads the URL and transport back from args; an entry with no "headers"
// member (wrapped so, or by hand) gets one built from its --header flags, and one
// wrapped by hand with no "type" gets the type hosts need.

// remoteProblem is why a remote entry cannot be wrapped exactly ("" when it can).
func (e entry) remoteProblem() string {
	switch {
	case e.command >= 0 || e.args >= 0:
		return `a remote entry with "command" or "args" is ambiguous; left alone`
	case e.urlIdx < 0 || !e.members[e.urlIdx].value.isString() || e.url == "":
		return `no "url" string`
	case e.raw[e.members[e.urlIdx].keyStart:e.members[e.urlIdx].keyEnd] != `"url"`:
		return `the "url" key is spelled with escapes`
	}
	if e.typIdx >= 0 {
		if raw := e.members[e.typIdx].value.Raw; raw != `"http"` && raw != `"sse"` {
			return `the "type" value is spelled with escapes`
		}
	}
	if e.headersIdx >= 0 {
		h := gjson.Parse(e.members[e.headersIdx].value.Mask)
		if !h.IsObject() {
			return `"headers" is not an object`
		}
		bad := ""
		h.ForEach(func(k, v gjson.Result) bool {
			switch {
			case v.Type != gjson.String:
				bad = fmt.Sprintf("header %q is not a string", k.Str)
			case k.Str == "" || strings.ContainsAny(k.Str, ": \t\r\n"):
				bad = fmt.Sprintf("header name %q is not one", k.Str)
			case strings.ContainsAny(v.Str, "\r\n"):
				bad = fmt.Sprintf("header %q holds a line break", k.Str)
			}
			return bad == ""
		})
		if bad != "" {
			return bad
		}
	}
	return ""
}

// remoteTransport is the --transport a remote entry's "type" means.
func (e entry) remoteTransport() string {
	switch e.typ {
	case "http", "sse":
		return e.typ
	}
	return "auto"
}

// memberSep is the text the entry puts between two members (a comma and its
// spacing), for a member wrap adds.
func (e entry) memberSep(inline string) string {
	if len(e.members) > 1 {
		return e.plain(e.members[0].valEnd, e.members[1].keyStart)
	}
	return inline
}

func (e entry) wrapRemote(proxyPath string) string {
	kept := e.wrapRemoteText(proxyPath, false)
	if e.headersIdx < 0 {
		return kept
	}
	if dropped := e.wrapRemoteText(proxyPath, true); parseEntry(e.name, dropped).unwrapsTo(e.raw) {
		return dropped
	}
	return kept
}

// unwrapsTo reports whether e unwraps to exactly raw.
func (e entry) unwrapsTo(raw string) bool {
	back, err := e.unwrap()
	return err == nil && back == raw
}

// wrapRemoteText is the wrapped entry, with or without its "headers" member.
func (e entry) wrapRemoteText(proxyPath string, dropHeaders bool) string {
	u := e.members[e.urlIdx]
	colon := e.plain(u.keyEnd, u.valStart)
	inline := ","
	if strings.Contains(colon, " ") {
		inline = ", "
	}
	args := slices.Concat([]string{`"--server"`, quote(e.name)}, e.extra, []string{`"--url"`, e.raw[u.valStart:u.valEnd], `"--transport"`, quote(e.remoteTransport())})
	if e.headersIdx >= 0 {
		gjson.Parse(e.members[e.headersIdx].value.Mask).ForEach(func(k, v gjson.Result) bool {
			args = append(args, `"--header"`, quote(k.Str+": "+v.Str))
			return true
		})
	}
	text := `"command"` + colon + quote(proxyPath) + e.memberSep(inline) + `"args"` + colon + "[" + strings.Join(args, inline) + "]"
	edits := []edit{{u.keyStart, u.valEnd, text}}
	if e.typIdx >= 0 {
		t := e.members[e.typIdx]
		edits = append(edits, edit{t.valStart, t.valEnd, `"stdio"`})
	}
	if h := e.headersIdx; dropHeaders && h >= 0 {
		// The member goes with the separator before it (as the first member, the
		// one after it).
		if h > 0 {
			edits = append(edits, edit{e.members[h-1].valEnd, e.members[h].valEnd, ""})
		} else {
			edits = append(edits, edit{e.members[0].keyStart, e.members[1].keyStart, ""})
		}
	}
	return splice(e.raw, edits)
}

// headersMember is the text of a "headers" member holding headers ("Name: value"
// each), in the entry's layout: one header a line when the entry has one member a
// line and its closing brace on a line of its own (indented one step further than
// the members, the step being how much further they are indented than that brace),
// else on one line.
func (e entry) headersMember(headers []string, colon, inline string) string {
	hs := make([]string, 0, len(headers))
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		hs = append(hs, quote(strings.TrimSpace(name))+colon+quote(strings.TrimLeft(value, " \t")))
	}
	obj := "{" + strings.Join(hs, inline) + "}"
	sep := e.memberSep(inline)
	last := e.members[len(e.members)-1]
	tail := e.plain(last.valEnd, len(e.raw)-1) // up to the entry's closing brace
	i, j := strings.LastIndexByte(sep, '\n'), strings.LastIndexByte(tail, '\n')
	if i >= 0 && j >= 0 {
		indent, closing := sep[i+1:], tail[j+1:]
		if strings.Trim(indent, " \t") == "" && len(indent) > len(closing) && strings.HasPrefix(indent, closing) {
			inner := indent + indent[len(closing):]
			obj = "{\n" + inner + strings.Join(hs, ",\n"+inner) + "\n" + indent + "}"
		}
	}
	return `"headers"` + colon + obj
}

// remoteArgs reads the URL and transport of a wrapped remote entry's args.
func (e entry) remoteArgs() (url, transport string) {
	transport = "auto"
	for i := 0; i < len(e.argv); i++ {
		a := e.argv[i].value.Str
		if name, val, ok := strings.Cut(strings.TrimLeft(a, "-"), "="); ok && strings.HasPrefix(a, "-") {
			switch name {
			case "url":
				url = val
			case "transport":
				transport = val
			}
			continue
		}
		if strings.HasPrefix(a, "-") && TakesValue(strings.TrimLeft(a, "-")) && i+1 < len(e.argv) {
			i++
			switch strings.TrimLeft(a, "-") {
			case "url":
				url = e.argv[i].value.Str
			case "transport":
				transport = e.argv[i].value.Str
			}
		}
	}
	return url, transport
}

// unwrapRemote is the exact inverse of wrapRemote.
func (e entry) unwrapRemote() (string, error) {
	cmd, args := e.members[e.command], e.members[e.args]
	a := e.raw[args.valStart:args.valEnd]
	var rawURL string
	var headers []string
	for i := 0; i < len(e.argv); i++ {
		v := e.argv[i].value.Str
		switch {
		case (v == "--url" || v == "-url") && i+1 < len(e.argv):
			i++
			rawURL = a[e.argv[i].start:e.argv[i].end]
		case strings.HasPrefix(v, "--url=") || strings.HasPrefix(v, "-url="):
			_, u, _ := strings.Cut(v, "=")
			rawURL = quote(u)
		case (v == "--header" || v == "-header") && i+1 < len(e.argv):
			i++
			headers = append(headers, e.argv[i].value.Str)
		case strings.HasPrefix(v, "-") && !strings.Contains(v, "=") && TakesValue(strings.TrimLeft(v, "-")):
			i++
		}
	}
	if rawURL == "" {
		return "", errors.New("no --url value")
	}
	colon := e.plain(cmd.keyEnd, cmd.valStart)
	inline := ","
	if strings.Contains(colon, " ") {
		inline = ", "
	}
	sep := e.memberSep(inline)
	urlText := `"url"` + colon + rawURL
	typ := e.transport
	if typ != "sse" {
		typ = "http"
	}
	var edits []edit
	typeMember := -1
	for i, m := range e.members {
		if m.key == "type" {
			typeMember = i
		}
	}
	switch {
	case typeMember >= 0 && e.transport == "auto":
		// wrap keeps "type" only for an entry that had one, so auto means this one
		// was written by hand: a "type" of "stdio" would now be wrong.
		t := e.members[typeMember]
		edits = append(edits, edit{t.valStart, t.valEnd, quote(typ)})
	case typeMember >= 0:
		t := e.members[typeMember]
		edits = append(edits, edit{t.valStart, t.valEnd, quote(e.transport)})
	case e.transport != "auto" || !e.hasMember("headers") && len(headers) > 0:
		// Written by hand: the type the flags say, which hosts need.
		urlText = `"type"` + colon + quote(typ) + sep + urlText
	}
	if !e.hasMember("headers") && len(headers) > 0 {
		urlText += sep + e.headersMember(headers, colon, inline)
	}
	if e.command+1 == e.args && strings.Trim(e.raw[cmd.valEnd:args.keyStart], " \t\r\n") == "," {
		edits = append(edits, edit{cmd.keyStart, args.valEnd, urlText})
	} else {
		// command and args apart (edited by hand): the url takes command's place,
		// args goes with the separator before it.
		edits = append(edits, edit{cmd.keyStart, cmd.valEnd, urlText})
		if e.args > 0 {
			edits = append(edits, edit{e.members[e.args-1].valEnd, args.valEnd, ""})
		} else {
			edits = append(edits, edit{args.keyStart, e.members[1].keyStart, ""})
		}
	}
	return splice(e.raw, edits), nil
}

func (e entry) hasMember(key string) bool {
	for _, m := range e.members {
		if m.key == key {
			return true
		}
	}
	return false
}
