package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// otlpCollector is an OTLP/HTTP endpoint in this process that behaves as asked:
// "ok" takes every export, "503" answers 503 with Retry-After: 1, "hang" accepts the
// request and never answers, "down" is a port nobody listens on.
type otlpCollector struct {
	url     string
	srv     *httptest.Server
	release chan struct{}
	posts   atomic.Int64
	bytes   atomic.Int64
}

func startOTLPCollector(fault string) *otlpCollector {
	c := &otlpCollector{release: make(chan struct{})}
	if fault == "down" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		check(err)
		c.url = "http://" + ln.Addr().String()
		ln.Close()
		return c
	}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.posts.Add(1)
		n, _ := io.Copy(io.Discard, r.Body)
		c.bytes.Add(n)
		switch fault {
		case "503":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		case "hang":
			select {
			case <-c.release:
			case <-r.Context().Done():
			}
		}
	}))
	c.url = c.srv.URL
	return c
}

func (c *otlpCollector) close() {
	if c.srv != nil {
		close(c.release)
		c.srv.Close()
	}
}

// otlpVariants are the proxy (BIR_OFF=1) with tracing on, against a collector that
// takes everything, and against the three faults a collector can have; their
// results are read against the same proxy with tracing off ("bir-proxy").
func otlpVariants(argv []string, dir string) ([]variant, []*otlpCollector) {
	var vs []variant
	var cs []*otlpCollector
	// Recording to the journal, with and without tracing: the same mode either way.
	ok := startOTLPCollector("ok")
	cs = append(cs, ok)
	journal := []string{"BIR_OFF=0", "BIR_RECORDER_URL=", "BIR_RECORDER_TOKEN="}
	vs = append(vs, variant{name: "bir-proxy/otlp-base-journal", argv: argv, env: journal, stateRoot: dir},
		variant{name: "bir-proxy/otlp-ok-journal", argv: argv, env: append(journal, "OTEL_EXPORTER_OTLP_ENDPOINT="+ok.url), stateRoot: dir})
	for _, fault := range []string{"ok", "down", "503", "hang"} {
		c := startOTLPCollector(fault)
		cs = append(cs, c)
		// XDG_STATE_HOME: the exporter's state file (for status) goes to a directory of
		// the bench's, not the user's, nor the bench's directory itself, which holds the
		// binary named bir-proxy where the state directory would be made.
		vs = append(vs, variant{name: "bir-proxy/otlp-" + fault, argv: argv, seqRSS: new(int64),
			env: []string{"BIR_OFF=1", "OTEL_EXPORTER_OTLP_ENDPOINT=" + c.url, "XDG_STATE_HOME=" + filepath.Join(dir, "otlp-state")}})
	}
	// With -also BINARY, the journal and healthy-collector variants of that binary too
	// (as also:NAME, read against NAME by main's also lines): tracing's cost before
	// and after in one run.
	if f := flag.Lookup("also"); f != nil && f.Value.String() != "" {
		for _, v := range slices.Clone(vs) {
			if v.name == "bir-proxy/otlp-base-journal" || v.name == "bir-proxy/otlp-ok-journal" || v.name == "bir-proxy/otlp-ok" {
				a := v
				a.name = "also:" + v.name
				a.argv = append([]string{f.Value.String()}, v.argv[1:]...)
				a.seqRSS = nil
				vs = append(vs, a)
			}
		}
	}
	return vs, cs
}

// printOTLP prints the tracing variants' sequential results against the proxy with
// tracing off.
func printOTLP(vs []variant, res map[string][3]time.Duration, cs []*otlpCollector) {
	for _, v := range vs {
		if !strings.HasPrefix(v.name, "bir-proxy/otlp-") {
			continue
		}
		r, b, base := res[v.name], res["bir-proxy"], "the proxy with tracing off (BIR_OFF=1)"
		if strings.HasSuffix(v.name, "-journal") {
			if v.name == "bir-proxy/otlp-base-journal" {
				continue
			}
			b, base = res["bir-proxy/otlp-base-journal"], "the proxy recording to the journal with tracing off"
		}
		extra := ""
		if v.seqRSS != nil {
			extra = fmt.Sprintf("  peak RSS %.1f MiB", float64(*v.seqRSS)/(1<<20))
		}
		fmt.Printf("  %-24s p50 %.2fx  p99 %.2fx  CPU/call %.2fx  %s%s\n", v.name, ratio(r[0], b[0]), ratio(r[1], b[1]), ratio(r[2], b[2]), base, extra)
	}
	for _, c := range cs {
		if c.srv != nil {
			fmt.Printf("  collector at %s: %d export POSTs, %d bytes\n", c.url, c.posts.Load(), c.bytes.Load())
		}
	}
}
