package telemetry

import (
	"strings"
	"testing"
)

// The usual mistakes in OTEL_EXPORTER_OTLP_HEADERS — a colon for the equals sign, as
// in the HTTP header itself, a space after the name, a lost name — are refused
// without the secret in the message: the entry is not quoted whole, and a name that
// is not a token is shown only up to where it stops being one.
func TestHeaderMistakesHideTheSecret(t *testing.T) {
	const secret = "s3cr3t"
	for _, v := range []string{
		"Authorization: Bearer " + secret,
		"api-key:" + secret,
		"=" + secret,
		"Authorization: Bearer " + secret + "==",  // base64 padding makes it key=value
		"Authorization Bearer " + secret + "=",    // a name with a space in it
		"x-ok=1,api-key " + secret + "=" + secret, // the second entry
		"\"" + secret + "\"=v",                    // a name that starts wrong
	} {
		for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
			_, err := FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", name: v}), "")
			if err == nil {
				t.Errorf("%s=%q accepted", name, v)
				continue
			}
			if msg := err.Error(); !strings.Contains(msg, name) || strings.Contains(msg, secret) {
				t.Errorf("%s=%q: %q (want the variable named, the secret not shown)", name, v, msg)
			}
		}
	}
}
