package redact

import (
	"bytes"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Secrets that are known by their neighbour rather than their own key: a header name and
// its value as a two-item array, and the short password flag -p and its value.

// secretPair reports whether the array whose first item is at p is a [name, value] pair
// whose name is a header or variable naming a secret (["X-Api-Key","v"],
// ["Authorization","Bearer …"]): fetch's and Python's header lists hold headers that
// way, and the value is the secret. The array must have exactly two items, so a list
// of words that happens to start with "token" keeps its other words.
func secretPair(d *doc, p int) bool {
	name, ok := shortString(d, p)
	if !ok || !headerName(name) || !isSecretName(name) {
		return false
	}
	q, err := expect(d.src, d.stringEnd(p), ',')
	if err != nil {
		return false
	}
	end, err := d.skip(jsonlex.SkipSpace(d.src, q))
	if err != nil {
		return false
	}
	_, err = expect(d.src, end, ']')
	return err == nil
}

// headerName reports whether a raw string body looks like a header or variable name:
// short, made of name characters, not a flag (those have their own rule).
func headerName(b []byte) bool {
	if len(b) == 0 || len(b) > 64 || b[0] == '-' {
		return false
	}
	return runEnd(b, 0, clsKey) == len(b)
}

// passwordFlagItem reports whether the array item at p is the string "-p" followed by a
// string item that looks like a password (["mysql","-p","hunter2"]); ["psql","-p","5432"]
// is a port and stays.
func passwordFlagItem(d *doc, p int) bool {
	if p+4 > len(d.src) || string(d.src[p:p+4]) != `"-p"` {
		return false
	}
	q, err := expect(d.src, p+4, ',')
	if err != nil {
		return false
	}
	v, ok := shortString(d, jsonlex.SkipSpace(d.src, q))
	return ok && passwordLike(v)
}

// scanShortPassword redacts the value of -p VALUE, the password flag of mysql, mariadb,
// mysqldump and sshpass. -p is also a port (psql, ssh, redis-cli, docker) and mkdir's
// "parents", so a value that is a number or port mapping, a path, another flag or a
// variable stays, and so does what follows mkdir -p. The attached form (-pSECRET) is
// not recognised: -print, -pedantic and the like look the same.
func scanShortPassword(spans []span, b []byte) []span {
	redEnd := -1 // where the last value redacted here ends
	for p := 0; p < len(b); {
		k := bytes.Index(b[p:], []byte("-p"))
		if k < 0 {
			break
		}
		k += p
		p = k + 2
		if k > 0 && !textStop(b[k-1]) && b[k-1] != '(' && b[k-1] != '[' {
			continue // top-p, step-parent: not a flag
		}
		if k+2 >= len(b) || !is(b[k+2], clsSpace) {
			continue
		}
		v := runEnd(b, k+2, clsSpace)
		// (A "mkdir" that was the last flag's value, redacted, is no command: read as
		// one, the flag after it was redacted only on a second pass.)
		if v >= len(b) || b[v] == '\n' || b[v] == '\r' || afterMkdir(b, k) && wordEndBefore(b, k) != redEnd {
			continue
		}
		vs, ve := valueAt(b, v, textStop)
		if passwordLike(b[vs:ve]) {
			spans = appendSecret(spans, b, vs, ve)
			redEnd = ve
			p = max(p, ve)
		}
	}
	return spans
}

// afterMkdir reports whether the word before the flag at k is mkdir (mkdir -p DIR).
func afterMkdir(b []byte, k int) bool {
	e := wordEndBefore(b, k)
	s := e
	for s > 0 && !textStop(b[s-1]) && b[s-1] != '/' && e-s < 6 {
		s--
	}
	return string(b[s:e]) == "mkdir"
}

// passwordLike reports whether the value of a -p flag can be a password: not empty,
// not already redacted, not another flag, a variable, a path, or a number or port
// mapping (5432, 8080:80, 127.0.0.1:53:53/udp).
func passwordLike(v []byte) bool {
	if len(v) == 0 || string(v) == Redacted || isVarRef(v) {
		return false
	}
	switch v[0] {
	case '-', '/', '.', '~':
		return false
	}
	return !portLike(v)
}

func portLike(v []byte) bool {
	for _, proto := range []string{"/tcp", "/udp", "/sctp"} {
		if bytes.HasSuffix(v, []byte(proto)) {
			v = v[:len(v)-len(proto)]
			break
		}
	}
	digits := false
	for _, c := range v {
		switch {
		case is(c, clsDigit):
			digits = true
		case c == '.' || c == ':' || c == '-':
		default:
			return false
		}
	}
	return digits
}

// wordEndBefore is where the word before the flag at k ends.
func wordEndBefore(b []byte, k int) int {
	e := k
	for e > 0 && is(b[e-1], clsSpace) {
		e--
	}
	return e
}
