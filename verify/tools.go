package verify

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/editdist"
	"github.com/bir-dev/bir-proxy/internal/termtext"
)

// ToolChanges is how the server's tools/list differs from the recorded one by name:
// the tools it no longer lists, those it lists anew, and for a removed tool an added
// one of a close name ("did you mean"). A renamed tool showed only as missing_tool on
// each of its calls, and nothing said where it had gone.
type ToolChanges struct {
	Removed, Added []string          // sorted
	Close          map[string]string // removed → the closest added, when close
}

// maxCloseWork bounds the name pairs compared for "did you mean" (a server listing
// thousands of new tools is not compared with each of thousands gone).
const maxCloseWork = 10000

// maxNameRunes: names longer than this are compared by their normalized form only.
const maxNameRunes = 64

// toolChanges compares the recorded tools with the current ones; none when the
// recording has no tools/list (nothing to compare with). cut: the current list was not
// read to its end, so a tool not among those read may be on a page not read: no tool
// is said to be removed.
func toolChanges(rec, cur map[string][]byte, cut bool) ToolChanges {
	var tc ToolChanges
	if rec == nil {
		return tc
	}
	for name := range rec {
		if _, ok := cur[name]; !ok && !cut {
			tc.Removed = append(tc.Removed, name)
		}
	}
	for name := range cur {
		if _, ok := rec[name]; !ok {
			tc.Added = append(tc.Added, name)
		}
	}
	slices.Sort(tc.Removed)
	slices.Sort(tc.Added)
	if len(tc.Removed) > 0 && len(tc.Added) > 0 && len(tc.Removed)*len(tc.Added) <= maxCloseWork {
		for _, r := range tc.Removed {
			best, bestD := "", -1
			for _, a := range tc.Added {
				if d, ok := closeNames(r, a); ok && (bestD < 0 || d < bestD) {
					best, bestD = a, d
				}
			}
			if best != "" {
				if tc.Close == nil {
					tc.Close = map[string]string{}
				}
				tc.Close[r] = best
			}
		}
	}
	return tc
}

// normName is a name as a person reads it: case and the separators _ - . / and space
// aside ("get_file" is "getFile" is "get-file").
func normName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '_', '-', '.', '/', ' ':
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// closeNames says whether two tool names are close enough that one was likely renamed
// to the other, and how far apart they are (smaller is closer): the same but for case
// and separators, one the other with something added at either end (legacy →
// legacy_v2), or an edit distance of at most a third of the shorter name.
func closeNames(a, b string) (int, bool) {
	na, nb := normName(a), normName(b)
	if na == nb {
		return 0, true
	}
	if utf8.RuneCountInString(na) > maxNameRunes || utf8.RuneCountInString(nb) > maxNameRunes {
		return 0, false
	}
	ra, rb := []rune(na), []rune(nb)
	shorter := min(len(ra), len(rb))
	d := editdist.Of(ra, rb)
	if shorter >= 3 && (strings.HasPrefix(nb, na) || strings.HasPrefix(na, nb) || strings.HasSuffix(nb, na) || strings.HasSuffix(na, nb)) {
		return d, true
	}
	return d, d <= max(1, shorter/3)
}

// maxNamesShown bounds the names a tools line lists of each kind.
const maxNamesShown = 8

// Line is the changes in one line, for a person ("" when none): "tools since the
// recording: 1 removed: legacy (did you mean legacy_v2?); 2 added: legacy_v2, readme".
// Names are escaped (a server's) and clipped, and at most maxNamesShown of each kind
// listed.
func (tc ToolChanges) Line() string {
	if len(tc.Removed) == 0 && len(tc.Added) == 0 {
		return ""
	}
	var parts []string
	if n := len(tc.Removed); n > 0 {
		parts = append(parts, strconv.Itoa(n)+" removed: "+names(tc.Removed, func(r string) string {
			if a, ok := tc.Close[r]; ok {
				return " (did you mean " + shown(a) + "?)"
			}
			return ""
		}))
	}
	if n := len(tc.Added); n > 0 {
		parts = append(parts, strconv.Itoa(n)+" added: "+names(tc.Added, nil))
	}
	return "tools since the recording: " + strings.Join(parts, "; ")
}

func names(ns []string, note func(string) string) string {
	var b strings.Builder
	for i, n := range ns {
		if i == maxNamesShown {
			b.WriteString(", and " + strconv.Itoa(len(ns)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(shown(n))
		if note != nil {
			b.WriteString(note(n))
		}
	}
	return b.String()
}

// shown is a server's tool name for a line: escaped, and clipped to maxNameRunes.
func shown(name string) string {
	s := termtext.Line(name)
	if utf8.RuneCountInString(s) > maxNameRunes {
		s = string([]rune(s)[:maxNameRunes-1]) + "…"
	}
	return s
}

// plural is n and the noun, in the singular for 1: "1 call", "0 calls", "2 findings".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
