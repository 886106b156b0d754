package relay

import (
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jcs"
	"github.com/bir-dev/bir-proxy/redact"
)

// TestArgsDigestGathersTinyPieces: pieces of a byte or two (the keys and separators
// ArgStrip emits on their own), far more than the queue has slots, are all read, and
// a begin drops what came before it: the digest is the last value's.
func TestArgsDigestGathersTinyPieces(t *testing.T) {
	var b strings.Builder
	b.WriteByte('{')
	for i := range 5000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k":"v"`)
	}
	b.WriteString(`,"password":"hunter2"}`)
	last := b.String()
	d := newArgsDigest()
	d.add(nil, true)
	for i := range 3000 { // an earlier value, dropped by the begin below
		d.add([]byte{"[1,"[i%3]}, false)
	}
	d.add(nil, true)
	for i := 0; i < len(last); i += 2 {
		d.add([]byte(last[i:min(i+2, len(last))]), false)
	}
	d.finish()
	want, _ := redact.Report([]byte(last), 0)
	if got, _ := d.Report(0); string(got) != string(want) {
		t.Errorf("report %.200s, want %.200s", got, want)
	}
	fp, _ := jcs.Fingerprint([]byte(last))
	if got := d.Fingerprint(); got != fp {
		t.Errorf("fingerprint %q, want %q", got, fp)
	}
}

// TestArgsDigestBegunAgainWithNothing: a later params with no arguments leaves the
// call's arguments absent, reported as {}.
func TestArgsDigestBegunAgainWithNothing(t *testing.T) {
	d := newArgsDigest()
	d.add(nil, true)
	d.add([]byte(`{"password":"hunter2"}`), false)
	d.add(nil, true)
	d.finish()
	want, _ := redact.Report([]byte(`{}`), 0)
	if got, _ := d.Report(0); string(got) != string(want) {
		t.Errorf("report %s, want %s", got, want)
	}
	fp, _ := jcs.Fingerprint([]byte(`{}`))
	if got := d.Fingerprint(); got != fp {
		t.Errorf("fingerprint %q, want %q", got, fp)
	}
}
