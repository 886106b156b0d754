package verify

import (
	"fmt"
	"strings"
	"testing"
)

// A renamed tool is found among those added; unrelated ones are not offered.
func TestToolChangesDidYouMean(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		close bool
	}{
		{"legacy", "legacy_v2", true}, {"get_file", "getFile", true}, {"search", "serach", true},
		{"read_file", "read_files", true}, {"list", "delete", false}, {"ab", "xy", false}, {"greet", "wipe_all", false},
	} {
		if _, ok := closeNames(c.a, c.b); ok != c.close {
			t.Errorf("%s ~ %s: %v, want %v", c.a, c.b, ok, c.close)
		}
	}
	m := func(ns ...string) map[string][]byte {
		r := map[string][]byte{}
		for _, n := range ns {
			r[n] = nil
		}
		return r
	}
	tc := toolChanges(m("greet", "legacy", "gone"), m("greet", "legacy_v2", "legacy_v3x", "zzz"), false)
	if got := tc.Line(); got != "tools since the recording: 2 removed: gone, legacy (did you mean legacy_v2?); 3 added: legacy_v2, legacy_v3x, zzz" {
		t.Errorf("%q", got)
	}
	if tc := toolChanges(m("greet", "legacy"), m("greet"), true); len(tc.Removed) != 0 {
		t.Errorf("a cut list said %v removed", tc.Removed)
	}
	if tc := toolChanges(nil, m("greet"), false); tc.Line() != "" {
		t.Errorf("no recorded list: %q", tc.Line())
	}
	// Thousands added, a long escaped name: one bounded line.
	cur := m("greet")
	for i := range 5000 {
		cur[fmt.Sprintf("tool_%d\x1b]52;c;eA==\x07%s", i, strings.Repeat("x", 200))] = nil
	}
	l := toolChanges(m("greet", "gone"), cur, false).Line()
	if len(l) > 2000 || strings.ContainsAny(l, "\x1b\x07") || !strings.Contains(l, "and 4992 more") {
		t.Errorf("%d bytes: %.300q", len(l), l)
	}
}
