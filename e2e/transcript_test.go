package e2e

import "testing"

// TestCompareUnordered checks the checker of remote transcripts: the direct run may
// hold a server's message twice (its stream replayed), the proxied run may not, and a
// message the proxied run lacks, or a step that differs, fails.
func TestCompareUnordered(t *testing.T) {
	steps := "== ping\n-> {\"method\":\"ping\",\"id\":1}\n<- {\"result\":{},\"id\":1}\n"
	req := "<- {\"method\":\"roots/list\",\"id\":0}\n"
	note := "<- {\"method\":\"notifications/message\"}\n"
	tr := func(steps string, loose ...string) []byte {
		s := steps + looseHead
		for _, l := range loose {
			s += l
		}
		return []byte(s)
	}
	for _, c := range []struct {
		name      string
		want, got []byte
		ok        bool
	}{
		{"equal", tr(steps, req, note, note), tr(steps, req, note, note), true},
		{"the direct run doubled", tr(steps, req, req, note, note, note, note), tr(steps, req, note, note), true},
		{"the proxy lost a message", tr(steps, req, note), tr(steps, note), false},
		{"the proxy sent one twice", tr(steps, req, note), tr(steps, req, req, note), false},
		{"a step differs", tr(steps, req), tr("== ping\n", req), false},
	} {
		if err := compareUnordered(c.want, c.got); (err == nil) != c.ok {
			t.Errorf("%s: compareUnordered says %v", c.name, err)
		}
	}
}
