package termtext

import (
	"strconv"
	"strings"
	"unicode"
)

// Argv shows a command line the way a shell user would type it: each argument that
// is empty, or has a space, a quote, a shell character or a control character in
// it, quoted Go's way (which escapes the control characters).
func Argv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") || strings.ContainsFunc(a, unicode.IsControl) {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.Join(q, " ")
}
