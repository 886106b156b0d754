package telemetry

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A base endpoint with a query (a tenant, a token the collector's proxy wants) or a
// fragment gets the signal's path appended to its path, the query kept: not
// "/?tenant=a/v1/traces", a POST to "/" that every collector refuses.
func TestBaseEndpointWithAQuery(t *testing.T) {
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.Path + "?" + r.URL.RawQuery
	}))
	defer srv.Close()
	for base, want := range map[string]string{
		srv.URL + "?tenant=a":        "/v1/traces?tenant=a",
		srv.URL + "/otlp/?tenant=a":  "/otlp/v1/traces?tenant=a",
		srv.URL + "/otlp#frag":       "/otlp/v1/traces?",
		srv.URL + "/otlp?t=a#f?x=/y": "/otlp/v1/traces?t=a",
	} {
		cfg, err := FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_METRICS_EXPORTER": "none"}), "")
		if err != nil {
			t.Fatal(base, err)
		}
		x := New(Options{Config: cfg, BatchDelay: time.Hour})
		x.Submit(span(0))
		closeWithin(t, x, 2*time.Second)
		select {
		case p := <-got:
			if p != want {
				t.Errorf("%s: POST to %s, want %s", base, p, want)
			}
		default:
			t.Errorf("%s: nothing sent", base)
		}
	}
}
