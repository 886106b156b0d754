package redact

// LooksLikeToken reports whether a URL's user name is a credential rather than a
// name: 16 characters or more of token characters (letters, digits, -._~+/=), with
// both letters and digits, the rule Text applies to the user name of a URL in free
// text. "agent" or "alice" is a name: scrubbing it from every text would turn a
// server's "user-agent" into "[REDACTED]-agent".
func LooksLikeToken(name string) bool { return looksLikeToken([]byte(name)) }
