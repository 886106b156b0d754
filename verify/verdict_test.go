package verify

import (
	"runtime"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/mcpdiff"
)

// answersCalls is a server script that answers the handshake and then each of
// verify's tools/call (ids 3, 4, ...) with the results given, in order.
func answersCalls(results ...string) string {
	s := answersHandshake
	for i, r := range results {
		s += `read l; echo '{"jsonrpc":"2.0","id":"bir:verify:test:` + string(rune('3'+i)) + `","result":` + r + `}'` + "\n"
	}
	return s + "exec cat >/dev/null\n"
}

func recordedGreet(seq int, result string) string {
	return `{"seq":` + string(rune('0'+seq)) + `,"tool":"greet","arguments":{"name":"a"},"outcome":"ok","result":` + result + `,"startedAt":"2026-01-01T00:00:00Z","durationMs":1}`
}

// Numbers under keys that merely end in "ms" or "at" (items, lat, format) are no
// durations or clock readings: a change in them is a change. The volatile key
// pattern was case-insensitive, so "Ms$" took "items" and "At$" took "lat".
func TestVerifyNumbersUnderOrdinaryKeysCount(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("sh")
	}
	type c struct{ rec, cur string }
	cases := []c{
		{`{"content":[],"structuredContent":{"items":3}}`, `{"content":[],"structuredContent":{"items":5}}`},
		{`{"content":[],"structuredContent":{"lat":40.7,"lon":-74}}`, `{"content":[],"structuredContent":{"lat":41.2,"lon":-74}}`},
		{`{"content":[],"structuredContent":{"format":1}}`, `{"content":[],"structuredContent":{"format":2}}`},
		{`{"content":[],"structuredContent":{"totalItems":10}}`, `{"content":[],"structuredContent":{"totalItems":0}}`},
		// Still volatile, as documented: a duration's and a clock reading's number.
		{`{"content":[],"structuredContent":{"durationMs":3,"createdAt":1,"updated_at":5,"elapsed":1}}`, `{"content":[],"structuredContent":{"durationMs":40,"createdAt":2,"updated_at":6,"elapsed":2}}`},
	}
	var recs, curs []string
	for i, tc := range cases {
		recs = append(recs, recordedGreet(i+1, tc.rec))
		curs = append(curs, tc.cur)
	}
	cfg := hostileCalls(t, answersCalls(curs...), recs...)
	cfg.CallTimeout = time.Minute
	m, err := runBounded(t, testutil.Context(t), cfg, testutil.Guard)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.rows) != len(cases) {
		t.Fatalf("%d rows", len(m.rows))
	}
	for i, r := range m.rows {
		want := mcpdiff.Changed
		if i == len(cases)-1 {
			want = mcpdiff.Same
		}
		if r.Status != want {
			t.Errorf("call %d (%s → %s): %s %q, want %s\n%s", r.Seq, cases[i].rec, cases[i].cur, r.Status, r.Reason, want, r.Diff)
		}
	}
}
