package telemetry

import (
	"strings"
	"testing"
)

// An endpoint that cannot be used is said on stderr, which hosts keep in their logs:
// the password of a URL with credentials in it is never in the message, whatever is
// wrong with the URL (its scheme, its port, its host, or the credentials themselves).
func TestEndpointErrorsHideThePassword(t *testing.T) {
	for _, u := range []string{
		"ftp://user:s3cret@collector:4318",
		"http://user:s3cret@collector:bad",
		"http://user:s3cret@",
		"http://user:s3cret@collector:4318",
		"http://user:s3cret@coll ector",
		"http://user:s3cret@collector/%zz",
		"http://:s3cret@[::1",
		"http:user:s3cret@collector",
		"user:s3cret@collector",
		// A password holding '/', '?' or '#' unescaped: the authority ends there by
		// the RFC, and a cut there left the password in the message whole.
		"http://user:s3/cret@collector:4318",
		"http://user:s3?cret@collector:4318",
		"http://user:s3#cret@collector:4318",
		"http://user:12/s3cret@collector:4318", // parses: "user:12" is taken for the host
		"http://user:s3/c@ret@collector:4318",
		"http://user:s3%zz/cret@collector",
		"http://us/er:s3cret@collector",
	} {
		for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
			_, err := FromEnv(env(map[string]string{v: u}), "")
			if err == nil {
				t.Errorf("%s=%s accepted", v, u)
				continue
			}
			if m := err.Error(); strings.Contains(m, "s3") || strings.Contains(m, "cret") || strings.Contains(m, "ret") {
				t.Errorf("%s=%s: %v", v, u, err)
			}
		}
	}
}
