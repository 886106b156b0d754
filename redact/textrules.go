package redact

import (
	"bytes"
	"strings"
)

// appendSecret adds b[start:end] as a secret unless it is empty or already redacted.
func appendSecret(spans []span, b []byte, start, end int) []span {
	if end <= start || string(b[start:end]) == Redacted {
		return spans
	}
	return append(spans, span{start, end})
}

func isSchemeChar(c byte) bool { return is(c, clsAlnum) || c == '+' || c == '-' || c == '.' }

// authorityStop reports whether c ends a URL's authority (RFC 3986), or the URL itself
// in running text.
func authorityStop(c byte) bool {
	switch c {
	case '/', '?', '#', ' ', '\t', '\r', '\n', '"', '\'', '`', '<', '>', '\\':
		return true
	}
	return false
}

func textStop(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '"', '\'', '`', '<', '>':
		return true
	}
	return false
}

// scanURLs redacts the password of scheme://user:PASS@host (any scheme, so DSNs too),
// and a user name that is a bare token (https://TOKEN@host).
func scanURLs(spans []span, b []byte) []span {
	for p := 0; p < len(b); {
		k := bytes.Index(b[p:], []byte("://"))
		if k < 0 {
			break
		}
		k += p
		p = k + 3
		if k == 0 || !isSchemeChar(b[k-1]) {
			continue
		}
		a := k + 3
		e := a
		for e < len(b) && !authorityStop(b[e]) {
			e++
		}
		if at := bytes.LastIndexByte(b[a:e], '@'); at >= 0 {
			at += a
			if c := bytes.IndexByte(b[a:at], ':'); c >= 0 {
				spans = appendSecret(spans, b, a+c+1, at)
			} else if looksLikeToken(b[a:at]) {
				spans = appendSecret(spans, b, a, at)
			}
			p = e
			continue
		}
		// A password holding an unescaped '/', '?' or '#' ends the authority early by the
		// RFC, but people paste such DSNs all the same: if what follows the colon is not
		// a port and an '@' comes before the URL ends, that colon starts a password.
		c := bytes.IndexByte(b[a:e], ':')
		if c < 0 || e >= len(b) || textStop(b[e]) || allDigits(b[a+c+1:e]) {
			continue
		}
		c += a
		end := e
		for end < len(b) && !textStop(b[end]) && b[end] != '@' {
			end++
		}
		if end < len(b) && b[end] == '@' {
			spans = appendSecret(spans, b, c+1, end)
		}
		p = max(p, end) // a later "://" before end would find the same '@' or none
	}
	return spans
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if !is(c, clsDigit) {
			return false
		}
	}
	return true
}

// looksLikeToken reports whether a URL user name is a credential rather than a name
// (git, alice): long, made of token characters, with letters and digits.
func looksLikeToken(b []byte) bool {
	if len(b) < 16 {
		return false
	}
	var m uint16
	for _, c := range b {
		if !is(c, clsCred) {
			return false
		}
		m |= classes[c]
	}
	return m&(clsUpper|clsLower) != 0 && m&clsDigit != 0
}

// scanDSN redacts the password of a Go MySQL-style DSN, user:PASS@tcp(host)/db, which has
// no scheme for scanURLs to find.
func scanDSN(spans []span, b []byte) []span {
	floor := 0 // no user:pass reaches back past the previous DSN
	for p := 0; p < len(b); {
		k := bytes.IndexByte(b[p:], '@')
		if k < 0 {
			break
		}
		at := p + k
		p = at + 1
		rest := b[at+1:]
		if !bytes.HasPrefix(rest, []byte("tcp(")) && !bytes.HasPrefix(rest, []byte("tcp6(")) &&
			!bytes.HasPrefix(rest, []byte("unix(")) && !bytes.HasPrefix(rest, []byte("udp(")) {
			continue
		}
		s := at
		for s > floor && !textStop(b[s-1]) && b[s-1] != '/' && at-s < 1024 {
			s--
		}
		floor = at + 1
		if c := bytes.IndexByte(b[s:at], ':'); c >= 0 {
			spans = appendSecret(spans, b, s+c+1, at)
		}
	}
	return spans
}

// scanPEM redacts the body of every PEM private-key block, keeping the BEGIN and END
// lines so the reader still sees what was there. An unterminated block is secret to the
// end of the text: in a window cut from a longer value the END line may be past the cut.
func scanPEM(spans []span, b []byte) []span {
	const begin = "-----BEGIN "
	for p := 0; p < len(b); {
		k := bytes.Index(b[p:], []byte(begin))
		if k < 0 {
			break
		}
		ls := p + k + len(begin)
		p = ls
		le := bytes.Index(b[ls:min(len(b), ls+80)], []byte("-----"))
		if le < 0 {
			continue
		}
		bodyStart := ls + le + 5
		p = bodyStart
		if !bytes.Contains(b[ls:ls+le], []byte("PRIVATE KEY")) {
			continue
		}
		bodyEnd := len(b)
		if e := bytes.Index(b[bodyStart:], []byte("-----END ")); e >= 0 {
			bodyEnd = bodyStart + e
		}
		s, e := trimSpaceLike(b, bodyStart, bodyEnd)
		spans = appendSecret(spans, b, s, e)
		p = bodyEnd
	}
	return spans
}

// trimSpaceLike narrows [s, e) past white space and literal "\n" escapes (a PEM block
// pasted into a one-line config), keeping the block's line breaks around the marker.
func trimSpaceLike(b []byte, s, e int) (int, int) {
	for s < e {
		switch {
		case b[s] == ' ' || b[s] == '\t' || b[s] == '\r' || b[s] == '\n':
			s++
		case b[s] == '\\' && s+1 < e && (b[s+1] == 'n' || b[s+1] == 'r'):
			s += 2
		default:
			goto right
		}
	}
right:
	for e > s {
		switch {
		case b[e-1] == ' ' || b[e-1] == '\t' || b[e-1] == '\r' || b[e-1] == '\n':
			e--
		case e-2 >= s && b[e-2] == '\\' && (b[e-1] == 'n' || b[e-1] == 'r'):
			e -= 2
		default:
			return s, e
		}
	}
	return s, e
}

// scanFlags redacts the value of a command-line flag naming a secret when it is passed
// as the next word: --password hunter2, --api-key "k 1". (--token=x is an assignment.)
func scanFlags(spans []span, b []byte) []span {
	for p := 0; p < len(b); {
		k := bytes.Index(b[p:], []byte("--"))
		if k < 0 {
			break
		}
		k += p
		ns := k + 2
		ne := runEnd(b, ns, clsKey)
		p = max(ne, k+1)
		if (k > 0 && !textStop(b[k-1]) && b[k-1] != '(' && b[k-1] != '[') || ne == ns || ne >= len(b) || !is(b[ne], clsSpace) {
			continue
		}
		if !isSecretName(b[ns:ne]) {
			continue
		}
		v := runEnd(b, ne, clsSpace)
		if v >= len(b) || b[v] == '-' {
			continue
		}
		vs, ve := valueAt(b, v, textStop)
		if !isVarRef(b[vs:ve]) {
			spans = appendSecret(spans, b, vs, ve)
		}
		p = max(p, ve)
	}
	return spans
}

// valueAt returns the bounds of the value starting at v: the inside of a quoted string
// (to the end of the line when unclosed), a bracketed JSON-ish value whole, or up to the
// first byte for which stop is true.
func valueAt(b []byte, v int, stop func(byte) bool) (int, int) {
	switch q := b[v]; q {
	case '"', '\'', '`':
		for e := v + 1; e < len(b); e++ {
			switch b[e] {
			case '\\':
				e++
			case q:
				return v + 1, e
			case '\n':
				return v + 1, e
			}
		}
		return v + 1, len(b)
	case '{', '[':
		return v, balancedEnd(b, v)
	case '\\':
		// Quoted with escaped quotes (\"hunter2\"): JSON held escaped in text.
		if v+1 < len(b) && (b[v+1] == '"' || b[v+1] == '\'') {
			q := b[v+1]
			for e := v + 2; e < len(b); e++ {
				switch {
				case b[e] == '\\' && e+1 < len(b) && b[e+1] == q:
					return v + 2, e
				case b[e] == '\n':
					return v + 2, e
				}
			}
			return v + 2, len(b)
		}
	}
	e := v
	for e < len(b) && !stop(b[e]) {
		e++
	}
	return v, e
}

// balancedEnd returns the end of the bracketed value at v (past its closing bracket),
// skipping quoted strings, or len(b) when it doesn't close.
func balancedEnd(b []byte, v int) int {
	depth := 0
	for e := v; e < len(b); e++ {
		switch b[e] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return e + 1
			}
		case '"':
			for e++; e < len(b) && b[e] != '"'; e++ {
				if b[e] == '\\' {
					e++
				}
			}
		}
	}
	return len(b)
}

// authSchemes are the words that may begin an authorization value; they are kept so the
// reader sees what kind of credential was sent.
func isAuthScheme(w []byte) bool {
	if len(w) > 16 {
		return false
	}
	var buf [16]byte
	for i, c := range w {
		buf[i] = lower(c)
	}
	switch string(buf[:len(w)]) {
	case "bearer", "basic", "token", "digest", "negotiate", "ntlm", "apikey", "dpop", "gnap",
		"hoba", "mutual", "aws4-hmac-sha256", "bot":
		return true
	}
	return false
}

// isVarRef reports whether a value is only a reference to a secret kept elsewhere
// (${TOKEN}, $TOKEN, %TOKEN%, {{ .Token }}), which is worth keeping visible.
func isVarRef(v []byte) bool {
	n := len(v)
	switch {
	case n >= 4 && v[0] == '$' && v[1] == '{' && v[n-1] == '}' && bytes.IndexByte(v[2:n-1], '}') < 0:
		return true
	case n >= 5 && v[0] == '{' && v[1] == '{' && v[n-1] == '}' && v[n-2] == '}':
		return true
	case n >= 3 && v[0] == '%' && v[n-1] == '%':
		return runEnd(v, 1, clsTok) == n-1
	case n >= 2 && v[0] == '$':
		return runEnd(v, 1, clsTok) == n && !is(v[1], clsDigit)
	}
	return false
}

// scanAssignments redacts the values of KEY=value, KEY: value and "KEY": "value" where
// KEY names a secret (IsSecretKey, or isSecretParam right after '?', '&' or '#').
func scanAssignments(spans []span, b []byte) []span {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '=' && c != ':' {
			continue
		}
		var next, prev byte
		if i+1 < len(b) {
			next = b[i+1]
		}
		if i > 0 {
			prev = b[i-1]
		}
		if c == ':' && (next == ':' || prev == ':' || (next == '/' && i+2 < len(b) && b[i+2] == '/')) {
			continue // C++ scopes, URL schemes
		}
		if c == '=' && (next == '=' || next == '>' || prev == '=' || prev == '!' || prev == '<' || prev == '>') {
			continue // comparisons and arrows, not assignments
		}
		ks, ke, quoted, ok := keyBefore(b, i)
		if !ok {
			continue
		}
		name := b[ks:ke]
		before := ks - 1
		if quoted {
			before--
		}
		var secret bool
		query := before >= 0 && (b[before] == '?' || b[before] == '&' || b[before] == '#')
		if query {
			secret = isSecretParam(name)
		} else {
			secret = isSecretName(name)
		}
		if !secret {
			continue
		}
		if c == ':' && !quoted && next != ' ' && next != '\t' && next != '"' && next != '\'' {
			continue // user:pass in a URL, times, ratios: a header or YAML field has a space
		}
		v := runEnd(b, i+1, clsSpace)
		if v >= len(b) || b[v] == '\n' || b[v] == '\r' {
			continue
		}
		var stop func(byte) bool
		switch {
		case query:
			stop = func(c byte) bool { return textStop(c) || c == '&' || c == '#' || c == ';' }
		case c == '=':
			stop = func(c byte) bool {
				return textStop(c) || c == '&' || c == ';' || c == ',' || c == ')' || c == ']' || c == '}'
			}
		case quoted:
			stop = func(c byte) bool { return textStop(c) || c == ',' || c == '}' || c == ']' }
		default:
			// A header or YAML field: the rest of the line.
			stop = func(c byte) bool { return c == '\n' || c == '\r' || c == '"' || c == '\'' || c == '`' }
		}
		vs, ve := valueAt(b, v, stop)
		for ve > vs && is(b[ve-1], clsSpace) {
			ve--
		}
		// Keep the scheme: "Authorization: Bearer [REDACTED]".
		if w := runEnd(b, vs, clsTok); w < ve && is(b[w], clsSpace) && isAuthScheme(b[vs:w]) {
			vs = runEnd(b, w, clsSpace)
		}
		if isVarRef(b[vs:ve]) {
			continue
		}
		spans = appendSecret(spans, b, vs, ve)
		if ve > i {
			i = ve - 1 // what is inside a redacted value needn't be looked at again
		}
	}
	return spans
}

// keyBefore finds the key name that ends just before the separator at i: a quoted name
// ("password": or 'password' =) or a run of key characters (GITHUB_TOKEN=, db.password:).
func keyBefore(b []byte, i int) (ks, ke int, quoted, ok bool) {
	k := i
	for k > 0 && i-k < 4 && is(b[k-1], clsSpace) {
		k--
	}
	if k > 0 && (b[k-1] == '"' || b[k-1] == '\'') {
		q := b[k-1]
		ke = k - 1
		lo := max(0, ke-64)
		open := bytes.LastIndexByte(b[lo:ke], q)
		switch {
		case open >= 0:
			ks = lo + open + 1
		case lo > 0:
			// A quoted key longer than the look-back: its last 64 bytes are taken for
			// it, so that its last words still name a secret (a key of 80 bytes ending
			// in _api_token kept its value, and Text was not idempotent: a first pass
			// that shortened the key let a second redact it).
			ks = lo
		default:
			return 0, 0, false, false
		}
		if bytes.IndexByte(b[ks:ke], '\n') >= 0 {
			return 0, 0, false, false
		}
		return ks, ke, true, ke > ks
	}
	ke = k
	ks = ke
	for ks > 0 && ke-ks < 128 && is(b[ks-1], clsKey) {
		ks--
	}
	return ks, ke, false, ke > ks
}

// scanProse redacts a secret said in a sentence: the word after "is" or "was" (or
// "is:") that follows a word naming a secret, or two (my password is hunter2, the API
// key was k-123, secret is: x). A word that says something about the secret rather
// than giving it (the token is invalid, password is required, not, the) is kept.
func scanProse(spans []span, b []byte) []span {
	for _, verb := range [...]string{" is", " was"} {
		for p := 0; p < len(b); {
			k := bytes.Index(b[p:], []byte(verb))
			if k < 0 {
				break
			}
			k += p
			p = k + len(verb)
			v := p
			if v < len(b) && b[v] == ':' {
				v++
			}
			if v >= len(b) || !is(b[v], clsSpace) {
				continue // "island", "wasted"
			}
			if v = runEnd(b, v, clsSpace); v >= len(b) || b[v] == '\n' || b[v] == '\r' {
				continue
			}
			if !proseNamesSecret(b, k) {
				continue
			}
			vs, ve := valueAt(b, v, textStop)
			if bytes.HasPrefix(b[vs:ve], []byte(Redacted)) {
				continue // redacted already ("[REDACTED]." is not "[REDACTED" and ".")
			}
			if vs == v { // unquoted: a sentence's punctuation is not the secret's
				for ve > vs && strings.IndexByte(".,;:!?)]}", b[ve-1]) >= 0 {
					ve--
				}
			}
			if w := b[vs:ve]; len(w) == 0 || isVarRef(w) || proseWord(w) {
				continue
			}
			spans = appendSecret(spans, b, vs, ve)
			p = max(p, ve)
		}
	}
	return spans
}

// proseNamesSecret says the word before b[k] (a space), or the two words before it,
// name a secret.
func proseNamesSecret(b []byte, k int) bool {
	ks := wordBefore(b, k)
	if ks == k {
		return false
	}
	if isSecretName(b[ks:k]) {
		return true
	}
	if ks >= 2 && b[ks-1] == ' ' {
		if ks2 := wordBefore(b, ks-1); ks2 < ks-1 {
			return isSecretName(b[ks2:k]) // "API key": a pair of words
		}
	}
	return false
}

// wordBefore is the start of the run of key characters (at most 64) ending at e.
func wordBefore(b []byte, e int) int {
	s := e
	for s > 0 && e-s < 64 && is(b[s-1], clsKey) {
		s--
	}
	return s
}

// proseWord says w is a word of the sentence, not a secret: what follows "the password
// is" without being one.
func proseWord(w []byte) bool {
	if len(w) > 20 {
		return false
	}
	var low [20]byte
	for i, c := range w {
		low[i] = lower(c)
	}
	switch string(low[:len(w)]) {
	case "not", "no", "invalid", "valid", "required", "incorrect", "correct", "wrong",
		"expired", "missing", "empty", "set", "unset", "blank", "null", "none", "nil", "too",
		"the", "a", "an", "being", "now", "still", "also", "stored", "saved", "shown",
		"hidden", "needed", "optional", "changed", "reset", "rotated", "revoked", "ok",
		"fine", "good", "bad", "weak", "strong", "long", "short", "used", "in", "on", "at",
		"for", "of", "to", "from", "with", "your", "my", "our", "their", "his", "her", "its",
		"this", "that", "what", "which", "sent", "generated", "encrypted", "hashed", "here",
		"there", "below", "above", "same", "different", "available", "unavailable",
		"configured", "provided", "known", "unknown", "redacted", "true", "false",
		"incomplete", "case-sensitive", "mandatory", "secret", "private", "public", "only",
		"never", "always", "usually", "currently", "already", "stale", "old", "new",
		"active", "inactive", "disabled", "enabled":
		return true
	}
	return false
}
