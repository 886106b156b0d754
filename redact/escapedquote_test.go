package redact

import (
	"strings"
	"testing"
)

// TestEscapedQuotedSecretInTextIsRedacted: JSON held escaped in text that is not JSON
// itself (a long call the host cut off mid-string, recorded streamed as the text it
// is; a log line quoting JSON) kept the secret: in \"password\":\"hunter2\" the value
// was taken to be the backslash before its quote, and hunter2 stayed.
func TestEscapedQuotedSecretInTextIsRedacted(t *testing.T) {
	for _, in := range []string{
		`{"s":"{\"password\":\"hunter2`,
		`log: {\"password\":\"hunter2\",\"user\":\"bob\"}`,
		`x \'token\': \'hunter2\' y`,
	} {
		out := Text(in)
		if strings.Contains(out, "hunter2") {
			t.Errorf("Text(%s) = %s: the secret stayed", in, out)
		}
		rep, _ := Report([]byte(in), 0)
		if strings.Contains(string(rep), "hunter2") {
			t.Errorf("Report(%s) = %s: the secret stayed", in, rep)
		}
		var r Reducer
		r.Write([]byte(in))
		if got, _ := r.Report(0); string(got) != string(rep) {
			t.Errorf("Reducer of %s: %s, Report: %s", in, got, rep)
		}
	}
	if out := Text(`log: {\"password\":\"hunter2\",\"user\":\"bob\"}`); !strings.Contains(out, `\"user\":\"bob\"`) {
		t.Errorf("what follows the redacted value went too: %s", out)
	}
}
