package redact

import (
	"strings"
	"testing"
)

// TestProseSecrets: a secret said in a sentence ("my password is hunter2") is
// redacted, as one given as KEY=value is; a sentence that says something about a
// secret without giving it keeps its words.
func TestProseSecrets(t *testing.T) {
	for _, c := range []struct {
		in   string
		gone []string
		kept []string
	}{
		{in: "my password is hunter2, do not share", gone: []string{"hunter2"}, kept: []string{"my password is ", ", do not share"}},
		{in: "The API key was XyZ_987abc.", gone: []string{"XyZ_987abc"}, kept: []string{"The API key was ", "."}},
		{in: `the db password is "correct horse battery" ok`, gone: []string{"correct horse battery"}, kept: []string{" ok"}},
		{in: "Your new passphrase is swordfish\nnext line", gone: []string{"swordfish"}, kept: []string{"next line"}},
		{in: "secret is: s3cr3t-value", gone: []string{"s3cr3t-value"}},
		{in: "the token is invalid", kept: []string{"the token is invalid"}},
		{in: "password is required", kept: []string{"password is required"}},
		{in: "the password is not set yet", kept: []string{"the password is not set yet"}},
		{in: "This key is the primary one", kept: []string{"This key is the primary one"}},
		{in: "the password is $DB_PASSWORD", kept: []string{"$DB_PASSWORD"}},
		{in: "this is fine, the weather is nice", kept: []string{"this is fine, the weather is nice"}},
	} {
		out := Text(c.in)
		for _, g := range c.gone {
			if strings.Contains(out, g) {
				t.Errorf("%q -> %q: %q is still there", c.in, out, g)
			}
		}
		for _, k := range c.kept {
			if !strings.Contains(out, k) {
				t.Errorf("%q -> %q: %q is gone", c.in, out, k)
			}
		}
	}
}
