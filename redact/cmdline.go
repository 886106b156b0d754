package redact

import (
	"strings"
	"unicode/utf8"
)

// CommandLine returns a copy of a command line (a program and its arguments, as given to
// exec) with the secrets it recognises replaced by [REDACTED], by the rules Report
// applies to arguments:
//   - each argument as free text (Text): passwords in URLs and DSNs, token shapes,
//     --token=VALUE and KEY=VALUE assignments of secret names, Bearer credentials,
//     a whole shell command passed to sh -c;
//   - an argument after a flag naming a secret (--password VALUE, -password VALUE,
//     --github-token VALUE) is replaced whole, unless it is another flag (the first was a
//     switch) or a variable reference;
//   - the argument after -p when it looks like a password (not a port, path or flag).
//
// argv is not modified. The register body carries this, never the raw command line:
// servers are routinely given their keys as arguments.
func CommandLine(argv []string) []string {
	if argv == nil {
		return nil
	}
	out := make([]string, len(argv))
	for i := 0; i < len(argv); i++ {
		out[i] = Text(argv[i])
		if i+1 < len(argv) && secretFlag(argv[i], argv[i+1]) {
			out[i+1] = Redacted
			i++
		}
	}
	return out
}

// secretFlag reports whether arg is a flag whose value is the secret next.
func secretFlag(arg, next string) bool {
	if len(arg) < 2 || arg[0] != '-' || strings.ContainsAny(arg, "= \t") {
		return false // not a flag, or one carrying its own value (Text saw that)
	}
	if next == "" || next[0] == '-' || next == Redacted || isVarRef([]byte(next)) {
		return false
	}
	if arg == "-p" {
		return passwordLike([]byte(next))
	}
	return isSecretName(strings.TrimLeft(arg, "-"))
}

// Label returns a short host-chosen name — a tool name, a callId — with the secrets Text
// recognises replaced, cut to at most limit bytes on a character boundary and marked with
// "…" when cut. The redaction comes first, so a token across the cut is seen whole; only
// the first limit+1 KiB are looked at, so a 100 MB name costs what a short one does.
func Label(s string, limit int) string {
	cut := false
	if len(s) > limit+margin {
		s, cut = s[:stringCut(s, limit+margin)], true
	}
	s = Text(s)
	if !cut && len(s) <= limit {
		return s
	}
	const mark = "…"
	return s[:stringCut(s, max(0, limit-len(mark)))] + mark
}

// stringCut returns the largest n <= max at which s can be cut without splitting a
// UTF-8 character.
func stringCut(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}
