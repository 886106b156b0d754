package redact

import (
	"bytes"
	"encoding/base64"
	"slices"
)

// Redacted replaces every secret value and every secret part of a text.
const Redacted = "[REDACTED]"

// Text returns s with the secrets it recognises in free text replaced by [REDACTED],
// leaving the rest as it was so the text stays useful (SPEC §3.3):
//   - passwords in URLs and DSNs of any scheme (postgres://app:[REDACTED]@db,
//     redis://:[REDACTED]@host, user:[REDACTED]@tcp(host)/db), and a bare token used as
//     a URL's user name;
//   - values of secret query or fragment parameters (?access_token=, &key=, &sig=, ...);
//   - values of assignments and header-style fields whose name is a secret key
//     (export GITHUB_TOKEN=[REDACTED], password: [REDACTED], "apiKey": "[REDACTED]",
//     Authorization: Bearer [REDACTED], --token [REDACTED]); the scheme word of an
//     authorization value is kept, and a bare variable reference (${TOKEN}, $TOKEN,
//     %TOKEN%, {{ token }}) is left alone since it is not the secret itself;
//   - the value of the password flag -p (mysql -p [REDACTED]) unless it is a port,
//     a path or another flag, or follows mkdir;
//   - Bearer credentials, and Basic credentials that decode to user:password;
//   - the body of PEM private-key blocks, to the end of the text when the block is not
//     terminated;
//   - well-known token shapes anywhere: GitHub (ghp_, gho_, ghs_, ghu_, ghr_,
//     github_pat_), GitLab (glpat- and kin), Slack (xox?-, xapp-), AWS key ids
//     (AKIA, ASIA) and 40-character secrets near the word "aws", OpenAI and Anthropic
//     (sk-...), Stripe (sk_live_, rk_live_, sk_test_, rk_test_, whsec_), Google
//     (AIza, ya29.), npm, Hugging Face, PyPI, and JWTs.
//
// Text is idempotent: the marker itself never matches a rule.
func Text(s string) string {
	b := []byte(s)
	spans := findSecrets(nil, b)
	if len(spans) == 0 {
		return s
	}
	out, _ := applySpans(make([]byte, 0, len(b)), b, spans, -1)
	return string(out)
}

// span is a half-open byte range of a text that is a secret.
type span struct{ start, end int }

// findSecrets appends to spans every secret range in b, sorted and merged. b may be a
// window cut from a longer text: each rule then treats the window's end as the end of
// the text, so a secret running past it is redacted to the end (and a bounded token
// shape needs the caller to keep a margin after whatever it shows).
func findSecrets(spans []span, b []byte) []span {
	n0 := len(spans)
	// One pass says which rules can match at all: each but scanWords needs one of a few
	// bytes, and most strings (keys, names, ids) have none of them.
	var seen uint8
	for _, c := range b {
		seen |= triggers[c]
	}
	if seen == 0 && len(b) < minWordSecret {
		return spans
	}
	if len(b) >= minWordSecret {
		spans = scanWords(spans, b)
	}
	if seen&trigColon != 0 && bytes.Contains(b, []byte("://")) {
		spans = scanURLs(spans, b)
	}
	if seen&(trigEquals|trigColon) != 0 {
		spans = scanAssignments(spans, b)
	}
	if seen&trigDash != 0 {
		if bytes.Contains(b, []byte("--")) {
			spans = scanFlags(spans, b)
		}
		if bytes.Contains(b, []byte("-p")) {
			spans = scanShortPassword(spans, b)
		}
		if bytes.Contains(b, []byte("-----BEGIN ")) {
			spans = scanPEM(spans, b)
		}
	}
	if seen&trigAt != 0 {
		spans = scanDSN(spans, b)
	}
	if len(b) >= minProse {
		spans = scanProse(spans, b)
	}
	return mergeSpans(spans, n0)
}

// minProse is the shortest text scanProse can find a secret in: "pin is x".
const minProse = 8

// minWordSecret is the shortest text scanWords can find a secret in: "Basic " and an
// 8-character credential, or a JWT's "eyJ" header of 10 and two dots around 2 more;
// every token shape is longer.
const minWordSecret = 14

// The bytes the rules other than scanWords need one of, as bits of triggers.
const (
	trigColon  = 1 << iota // "://" of a URL, "key: value"
	trigEquals             // "key=value"
	trigDash               // flags, -p, PEM
	trigAt                 // DSNs
)

var triggers = func() (t [256]uint8) {
	t[':'], t['='], t['-'], t['@'] = trigColon, trigEquals, trigDash, trigAt
	return t
}()

// mergeSpans sorts spans[from:] and merges overlapping or touching ranges, so that each
// secret becomes one marker.
func mergeSpans(spans []span, from int) []span {
	s := spans[from:]
	slices.SortFunc(s, func(a, b span) int { return a.start - b.start })
	out := s[:0]
	for _, sp := range s {
		if sp.end <= sp.start {
			continue
		}
		if k := len(out); k > 0 && sp.start <= out[k-1].end {
			if sp.end > out[k-1].end {
				out[k-1].end = sp.end
			}
			continue
		}
		out = append(out, sp)
	}
	return spans[:from+len(out)]
}

// applySpans appends src to dst with every span replaced by [REDACTED], stopping once
// at least limit bytes were written (limit < 0: no limit). It returns how many bytes of
// src the output stands for; a replacement that straddles the limit is written whole,
// and a cut in plain text falls on a UTF-8 character boundary.
func applySpans(dst, src []byte, spans []span, limit int) ([]byte, int) {
	written, pos := 0, 0
	for i := 0; i <= len(spans); i++ {
		if limit >= 0 && written >= limit {
			return dst, pos
		}
		end := len(src)
		if i < len(spans) {
			end = spans[i].start
		}
		seg := src[pos:end]
		if limit >= 0 && written+len(seg) > limit {
			cut := runeCut(seg, limit-written)
			return append(dst, seg[:cut]...), pos + cut
		}
		dst = append(dst, seg...)
		written += len(seg)
		pos = end
		if i == len(spans) {
			return dst, pos
		}
		dst = append(dst, Redacted...)
		written += len(Redacted)
		pos = spans[i].end
	}
	return dst, pos
}

// runeCut returns the largest n <= max at which b can be cut without splitting a UTF-8
// character.
func runeCut(b []byte, n int) int {
	if n >= len(b) {
		return len(b)
	}
	for i := n; i > 0 && i > n-4; i-- {
		if b[i]&0xC0 != 0x80 {
			return i
		}
	}
	return n
}

// Character classes, as bit sets indexed by byte.
const (
	clsAlnum  = 1 << iota // A-Z a-z 0-9
	clsUpper              // A-Z
	clsLower              // a-z
	clsDigit              // 0-9
	clsB64                // A-Z a-z 0-9 + /
	clsTok                // A-Z a-z 0-9 _ -
	clsCred               // what a Bearer credential is made of: token68 and friends
	clsKey                // what an unquoted key name is made of
	clsSpace              // space, tab
	clsB64Any             // any base64 or base64url character, padding, CR, LF
)

var classes = func() (t [256]uint16) {
	for c := 0; c < 256; c++ {
		var m uint16
		switch {
		case 'A' <= c && c <= 'Z':
			m |= clsAlnum | clsUpper
		case 'a' <= c && c <= 'z':
			m |= clsAlnum | clsLower
		case '0' <= c && c <= '9':
			m |= clsAlnum | clsDigit
		}
		if m&clsAlnum != 0 || c == '+' || c == '/' {
			m |= clsB64
		}
		if m&clsAlnum != 0 || c == '_' || c == '-' {
			m |= clsTok
		}
		if m&clsTok != 0 || c == '.' || c == '~' || c == '+' || c == '/' || c == '=' {
			m |= clsCred
		}
		if m&clsTok != 0 || c == '.' {
			m |= clsKey
		}
		if c == ' ' || c == '\t' {
			m |= clsSpace
		}
		if m&clsB64 != 0 || c == '-' || c == '_' || c == '=' || c == '\r' || c == '\n' {
			m |= clsB64Any
		}
		t[c] = m
	}
	return t
}()

func is(c byte, cls uint16) bool { return classes[c]&cls != 0 }

// runEnd returns the end of the run of cls characters starting at i.
func runEnd(b []byte, i int, cls uint16) int {
	for i < len(b) && classes[b[i]]&cls != 0 {
		i++
	}
	return i
}

// hasPrefixFold reports whether b[i:] starts with the lower-case ASCII word p, in any case.
func hasPrefixFold(b []byte, i int, p string) bool {
	if len(b)-i < len(p) {
		return false
	}
	for j := 0; j < len(p); j++ {
		if lower(b[i+j]) != p[j] {
			return false
		}
	}
	return true
}

func hasPrefixAt(b []byte, i int, p string) bool {
	return len(b)-i >= len(p) && string(b[i:i+len(p)]) == p
}

// scanWords finds token shapes, Bearer/Basic credentials and AWS secrets: one pass
// looking at the start of every word.
func scanWords(spans []span, b []byte) []span {
	b64Start := -1 // start of the current run of base64 characters, for AWS secrets
	jwtMiss := 0   // every "eyJ" before this is known not to start a JWT
	for i := 0; i < len(b); i++ {
		c := b[i]
		if is(c, clsB64) {
			if b64Start < 0 {
				b64Start = i
			}
		} else if b64Start >= 0 {
			spans = awsSecretRun(spans, b, b64Start, i)
			b64Start = -1
		}
		if !is(c, clsAlnum) || (i > 0 && is(b[i-1], clsAlnum)) {
			continue
		}
		if c|0x20 == 'b' {
			// Bearer and Basic keep their word: only the credential is a secret.
			if cs, ce := credentialAt(b, i); ce > cs {
				spans = append(spans, span{cs, ce})
			}
			continue
		}
		if end := tokenAt(b, i, &jwtMiss); end > i {
			spans = append(spans, span{i, end})
			// The token's characters can't start another secret; skipping them also
			// keeps the scan linear on texts made of one long run.
			for j := i; j < end; j++ {
				if !is(b[j], clsB64) {
					if b64Start >= 0 {
						spans = awsSecretRun(spans, b, b64Start, j)
					}
					b64Start = -1
				} else if b64Start < 0 {
					b64Start = j
				}
			}
			i = end - 1
		}
	}
	if b64Start >= 0 {
		spans = awsSecretRun(spans, b, b64Start, len(b))
	}
	return spans
}

// tokenAt returns the end of a secret starting at the word start i, or -1. A failed
// match looks at a bounded number of bytes, so that a text made of near-misses is still
// scanned in linear time.
func tokenAt(b []byte, i int, jwtMiss *int) int {
	switch b[i] {
	case 'g':
		if len(b)-i > 4 && b[i+1] == 'h' && b[i+3] == '_' && bytes.IndexByte([]byte("posur"), b[i+2]) >= 0 {
			return atLeast(b, i+4, clsAlnum, 30)
		}
		if hasPrefixAt(b, i, "github_pat_") {
			return atLeast(b, i+11, clsTok, 22)
		}
		for _, p := range []string{"glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "glcbt-", "glimt-"} {
			if hasPrefixAt(b, i, p) {
				return atLeast(b, i+len(p), clsTok, 20)
			}
		}
	case 'x':
		if len(b)-i > 5 && hasPrefixAt(b, i, "xox") && b[i+4] == '-' && is(b[i+3], clsLower) {
			return atLeast(b, i+5, clsTok, 10)
		}
		if hasPrefixAt(b, i, "xapp-") {
			return atLeast(b, i+5, clsTok, 10)
		}
	case 'A':
		if hasPrefixAt(b, i, "AKIA") || hasPrefixAt(b, i, "ASIA") {
			end := runEnd(b, i+4, clsUpper|clsDigit)
			if end-i == 20 && (end == len(b) || !is(b[end], clsAlnum)) {
				return end
			}
		}
		if hasPrefixAt(b, i, "AIza") {
			return atLeast(b, i+4, clsTok, 30)
		}
	case 's':
		if hasPrefixAt(b, i, "sk-") {
			return mixedAtLeast(b, i+3, 20)
		}
		if hasPrefixAt(b, i, "sk_live_") || hasPrefixAt(b, i, "sk_test_") {
			return atLeast(b, i+8, clsAlnum, 10)
		}
	case 'r':
		if hasPrefixAt(b, i, "rk_live_") || hasPrefixAt(b, i, "rk_test_") {
			return atLeast(b, i+8, clsAlnum, 10)
		}
	case 'w':
		if hasPrefixAt(b, i, "whsec_") {
			return atLeast(b, i+6, clsAlnum, 20)
		}
	case 'n':
		if hasPrefixAt(b, i, "npm_") {
			return atLeast(b, i+4, clsAlnum, 30)
		}
	case 'h':
		if hasPrefixAt(b, i, "hf_") {
			return mixedAtLeast(b, i+3, 30)
		}
	case 'y':
		if hasPrefixAt(b, i, "ya29.") {
			return atLeast(b, i+5, clsTok|clsCred, 20)
		}
	case 'p':
		if hasPrefixAt(b, i, "pypi-") {
			return atLeast(b, i+5, clsTok, 50)
		}
	case 'e':
		if i < *jwtMiss {
			return -1
		}
		end, miss := jwtAt(b, i)
		if end < 0 {
			*jwtMiss = miss
		}
		return end
	}
	return -1
}

// atLeast returns the end of the run of cls characters at i if it is at least min long.
func atLeast(b []byte, i int, cls uint16, min int) int {
	for j := i; j < i+min; j++ {
		if j >= len(b) || !is(b[j], cls) {
			return -1
		}
	}
	return runEnd(b, i+min, cls)
}

// mixedAtLeast is atLeast for token characters that must also look generated (mixed,
// judged on the first 64), as "sk-" and "hf_" are too common a start for words.
func mixedAtLeast(b []byte, i, min int) int {
	j := i
	for j < len(b) && j < i+64 && is(b[j], clsTok) {
		j++
	}
	if j-i < min || !mixed(b[i:j]) {
		return -1
	}
	return runEnd(b, j, clsTok)
}

// mixed reports whether b has an upper-case letter, a lower-case letter and a digit, as
// generated keys do and hyphenated words don't.
func mixed(b []byte) bool {
	var m uint16
	for _, c := range b {
		m |= classes[c]
	}
	return m&clsUpper != 0 && m&clsLower != 0 && m&clsDigit != 0
}

// jwtAt returns the end of a JWT (header.payload.signature, base64url, the header a JSON
// object so "eyJ...") at i, or -1 and how far no JWT can start: any "eyJ" inside the
// same run of token characters would fail the same way.
func jwtAt(b []byte, i int) (end, miss int) {
	if !hasPrefixAt(b, i, "eyJ") {
		return -1, i
	}
	e1 := runEnd(b, i, clsTok)
	if e1-i < 10 || e1 >= len(b) || b[e1] != '.' {
		return -1, e1
	}
	e2 := runEnd(b, e1+1, clsTok)
	if e2-e1-1 < 2 || e2 >= len(b) || b[e2] != '.' {
		return -1, e1
	}
	return runEnd(b, e2+1, clsTok), 0
}

// awsSecretRun checks the base64 run b[start:end] for an AWS secret access key: exactly
// 40 characters, mixed case with digits, with "aws" (any case) or an AWS key id within
// 256 bytes. Without the neighbour word a 40-character run is too often something else.
func awsSecretRun(spans []span, b []byte, start, end int) []span {
	if end-start != 40 || !mixed(b[start:end]) || (end < len(b) && b[end] == '=') {
		return spans
	}
	lo, hi := max(0, start-256), min(len(b), end+256)
	near := b[lo:hi]
	for j := 0; j+3 <= len(near); j++ {
		if lower(near[j]) == 'a' && lower(near[j+1]) == 'w' && lower(near[j+2]) == 's' {
			return append(spans, span{start, end})
		}
	}
	if bytes.Contains(near, []byte("AKIA")) || bytes.Contains(near, []byte("ASIA")) {
		return append(spans, span{start, end})
	}
	return spans
}

// credentialAt finds "Bearer X" or "Basic X" (any case) at the word start i and returns
// the bounds of X. A Bearer credential must look like one (8+ characters with a digit or
// punctuation, or 20+), so "the bearer of news" stays; a Basic one must decode to
// user:password.
func credentialAt(b []byte, i int) (int, int) {
	var basic bool
	switch {
	case hasPrefixFold(b, i, "bearer"):
		i += 6
	case hasPrefixFold(b, i, "basic"):
		i += 5
		basic = true
	default:
		return 0, 0
	}
	j := runEnd(b, i, clsSpace)
	if j == i {
		return 0, 0
	}
	end := runEnd(b, j, clsCred)
	cred := b[j:end]
	if basic && isBasicCredential(cred) || !basic && len(cred) >= 8 && (len(cred) >= 20 || hasNonLetter(cred)) {
		return j, end
	}
	return 0, 0
}

func hasNonLetter(b []byte) bool {
	for _, c := range b {
		if !is(c, clsUpper|clsLower) {
			return true
		}
	}
	return false
}

func isBasicCredential(cred []byte) bool {
	if len(cred) < 8 || len(cred) > 1024 {
		return false
	}
	var buf [768]byte
	n, err := base64.StdEncoding.Decode(buf[:], cred)
	if err != nil {
		return false
	}
	return bytes.IndexByte(buf[:n], ':') > 0
}
