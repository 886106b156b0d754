package relay

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jcs"
	"github.com/bir-dev/bir-proxy/redact"
)

// TestArgsDigestIsTheWholeArguments: pieces in, the whole value's fingerprint and
// report out; a later value replaces an earlier; none means {}.
func TestArgsDigestIsTheWholeArguments(t *testing.T) {
	args := []byte(`{"path":"/x","token":"sekrit-value-123","content":"` + strings.Repeat("abc", 40000) + `"}`)
	d := newArgsDigest()
	d.add([]byte(`{"old":1}`), true)
	d.add(nil, true)
	for i := 0; i < len(args); i += 999 {
		d.add(args[i:min(i+999, len(args))], false)
	}
	d.finish()
	want, _ := jcs.Fingerprint(args)
	if got := d.Fingerprint(); got != want || got == "" {
		t.Fatalf("fingerprint %q, want %q", got, want)
	}
	wr, wc := redact.Report(args, 4096)
	gr, gc := d.Report(4096)
	if !bytes.Equal(gr, wr) || gc != wc || bytes.Contains(gr, []byte("sekrit")) {
		t.Fatalf("report %.200s (%v), want %.200s (%v)", gr, gc, wr, wc)
	}

	empty := newArgsDigest()
	empty.add(nil, true)
	empty.finish()
	if got, want := empty.Fingerprint(), must(jcs.Fingerprint([]byte(`{}`))); got != want {
		t.Fatalf("absent arguments: fingerprint %q, want {}'s %q", got, want)
	}
}

// TestArgsDigestThatFellBehindSaysSo: pieces the queue has no room for are dropped
// rather than waited for, and the report says the arguments were not recorded.
func TestArgsDigestThatFellBehindSaysSo(t *testing.T) {
	d := newArgsDigest()
	d.add([]byte(`{"a":"`), true)
	d.add(make([]byte, maxDigestQueued+1), false) // more than may wait: dropped
	d.add([]byte(`"}`), false)
	d.finish()
	d.finish() // twice is once
	if fp := d.Fingerprint(); fp != "" {
		t.Fatalf("a digest that missed a piece has fingerprint %q", fp)
	}
	r, clipped := d.Report(4096)
	if !clipped || !bytes.Contains(r, []byte("not recorded")) {
		t.Fatalf("report %s (clipped %v), want one saying the arguments were not recorded", r, clipped)
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
