package oauth

import (
	"strings"
)

// Challenge is the Bearer challenge of a 401 or 403 answer (RFC 6750 §3, RFC 9728 §5.1):
// the parameters the client acts on.
type Challenge struct {
	ResourceMetadata string // resource_metadata: where the protected resource metadata is
	Scope            string // scope: what the request needs (space-separated)
	Error            string // error: invalid_token, insufficient_scope, ...
}

// ParseChallenge reads the Bearer challenge out of WWW-Authenticate values. A header
// may hold several challenges (`Basic realm="x", Bearer scope="a"`) and several
// headers may be given; the first Bearer challenge is used. Anything it cannot read is
// skipped rather than refused: a malformed header must not stop a sign-in that the
// well-known paths can still find.
func ParseChallenge(values []string) Challenge {
	var c Challenge
	for _, v := range values {
		for _, ch := range splitChallenges(v) {
			if !strings.EqualFold(ch.scheme, "bearer") {
				continue
			}
			c.ResourceMetadata = ch.params["resource_metadata"]
			c.Scope = ch.params["scope"]
			c.Error = ch.params["error"]
			return c
		}
	}
	return c
}

type rawChallenge struct {
	scheme string
	params map[string]string
}

// splitChallenges tokenises one WWW-Authenticate value (RFC 9110 §11.6.1): a scheme,
// then comma-separated name=value pairs (a value a token or a quoted string with
// backslash escapes), a new challenge starting at a token not followed by '='.
func splitChallenges(s string) []rawChallenge {
	var out []rawChallenge
	var cur *rawChallenge
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ',') {
			i++
		}
	}
	token := func() string {
		j := i
		for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != ',' && s[i] != '=' && s[i] != '"' {
			i++
		}
		return s[j:i]
	}
	for {
		skip()
		if i >= len(s) {
			break
		}
		start := i
		name := token()
		if name == "" {
			i++ // a stray quote or '=': skip it
			continue
		}
		// name=value, or a new scheme (token68 values are read as a scheme and skipped).
		j := i
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		if j < len(s) && s[j] == '=' && cur != nil && !(j+1 < len(s) && s[j+1] == '=') {
			i = j + 1
			for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
				i++
			}
			var val string
			if i < len(s) && s[i] == '"' {
				i++
				var b strings.Builder
				for i < len(s) && s[i] != '"' {
					if s[i] == '\\' && i+1 < len(s) {
						i++
					}
					b.WriteByte(s[i])
					i++
				}
				i++ // the closing quote (or past the end)
				val = b.String()
			} else {
				val = token()
			}
			key := strings.ToLower(name)
			if _, dup := cur.params[key]; !dup {
				cur.params[key] = val
			}
			continue
		}
		if j < len(s) && s[j] == '=' {
			// token68 of a scheme we do not read (`Basic abc==`): skip to the next comma.
			for i < len(s) && s[i] != ',' {
				i++
			}
			continue
		}
		_ = start
		out = append(out, rawChallenge{scheme: name, params: map[string]string{}})
		cur = &out[len(out)-1]
	}
	return out
}

// scopeList splits a space-separated scope string.
func scopeList(s string) []string { return strings.Fields(s) }

// union is a followed by whatever of b is not in a, in order, without duplicates.
func union(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range [][]string{a, b} {
		for _, s := range l {
			if s != "" && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// covers reports whether have holds every scope of need.
func covers(have, need []string) bool {
	set := map[string]bool{}
	for _, s := range have {
		set[s] = true
	}
	for _, s := range need {
		if !set[s] {
			return false
		}
	}
	return true
}
