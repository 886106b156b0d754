package redact

// IsSecretKey reports whether a key name names a secret (SPEC §3.3): one of its words,
// split on case changes, letter/digit changes and any character that is not a letter or
// digit (`_`, `-`, `.`, spaces, ...), is a secret word (password, passwd, pwd,
// passphrase, secret, token, credential(s), auth, authorization, cookie, signature), or
// two neighbouring words joined form apikey, accesskey, privatekey or clientsecret (also
// written as one word). So clientSecret, CLIENT_SECRET, x-api-key, X-Auth-Token,
// db.password and APIKey are secrets, while max_tokens, keyword, tokenizer and author are
// not: a word must match whole.
//
// Beyond the SPEC's list, the plurals of the words that only ever hold secrets
// (passwords, secrets, cookies, passphrases, apikeys, accesskeys, privatekeys) count too,
// because a map under such a key is a map of secrets. "tokens" does not: the SPEC says
// max_tokens is not a secret.
func IsSecretKey(name string) bool { return isSecretName(name) }

// isSecretName is IsSecretKey for names still in the bytes they were found in, so that
// checking one costs no allocation.
func isSecretName[T ~string | ~[]byte](name T) bool {
	var prev, cur [maxWordLen]byte
	if lowerWord(name) {
		// One lower-case word (most names are) splits into itself alone.
		w := cur[:copy(cur[:], name)]
		return isSecretWord(w) || isSecretJoin(w)
	}
	prevLen := -1
	for i := 0; i < len(name); {
		start, end := nextWord(name, i)
		if start == end {
			break
		}
		i = end
		n := end - start
		if n > maxWordLen {
			prevLen = -1
			continue
		}
		for j := 0; j < n; j++ {
			cur[j] = lower(name[start+j])
		}
		w := cur[:n]
		if isSecretWord(w) || isSecretJoin(w) {
			return true
		}
		if prevLen >= 0 && prevLen+n <= maxWordLen {
			var joined [2 * maxWordLen]byte
			k := copy(joined[:], prev[:prevLen])
			k += copy(joined[k:], w)
			if isSecretJoin(joined[:k]) {
				return true
			}
		}
		copy(prev[:], w)
		prevLen = n
	}
	return false
}

// isSecretParam reports whether a URL query (or fragment) parameter name carries a
// secret. Query strings use short names that would be too broad as JSON keys (an object
// key "key" is usually a map or storage key, ?key= on a URL is usually an API key).
func isSecretParam[T ~string | ~[]byte](name T) bool {
	if isSecretName(name) {
		return true
	}
	if len(name) > 8 {
		return false
	}
	var buf [8]byte
	for i := 0; i < len(name); i++ {
		buf[i] = lower(name[i])
	}
	switch string(buf[:len(name)]) {
	case "key", "sig", "pass", "pw", "apikey":
		return true
	}
	return false
}

// maxWordLen bounds the words worth comparing: the longest secret word or join is 13
// bytes, so longer words are never secret and needn't be copied.
const maxWordLen = 16

func isSecretWord(w []byte) bool {
	switch string(w) {
	case "password", "passwd", "pwd", "passphrase", "secret", "token", "credential",
		"credentials", "auth", "authorization", "cookie", "signature",
		"passwords", "secrets", "cookies", "passphrases":
		return true
	}
	return false
}

func isSecretJoin(w []byte) bool {
	switch string(w) {
	case "apikey", "accesskey", "privatekey", "clientsecret",
		"apikeys", "accesskeys", "privatekeys":
		return true
	}
	return false
}

const (
	kindSep = iota
	kindLower
	kindUpper
	kindDigit
)

func charKind(c byte) int {
	switch {
	case 'a' <= c && c <= 'z':
		return kindLower
	case 'A' <= c && c <= 'Z':
		return kindUpper
	case '0' <= c && c <= '9':
		return kindDigit
	case c >= 0x80:
		// Bytes of non-ASCII letters stay inside a word rather than splitting it into
		// fragments that could spell a secret word by accident.
		return kindLower
	}
	return kindSep
}

// nextWord returns the bounds of the first word of name at or after i (start == end
// when there is none). "APIKey" splits as API|Key, "clientSecret" as client|Secret,
// "token2" as token|2.
func nextWord[T ~string | ~[]byte](name T, i int) (start, end int) {
	for i < len(name) && charKind(name[i]) == kindSep {
		i++
	}
	if i == len(name) {
		return i, i
	}
	start = i
	k := charKind(name[i])
	for i++; i < len(name); i++ {
		c := charKind(name[i])
		switch {
		case c == kindSep,
			(c == kindDigit) != (k == kindDigit),
			c == kindUpper && k == kindLower,
			c == kindUpper && k == kindUpper && i+1 < len(name) && charKind(name[i+1]) == kindLower:
			return start, i
		}
		k = c
	}
	return start, i
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// lowerWord reports whether name is made only of a-z, at most maxWordLen of them: one
// word as nextWord splits names (a longer one takes the general path).
func lowerWord[T ~string | ~[]byte](name T) bool {
	if len(name) > maxWordLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
