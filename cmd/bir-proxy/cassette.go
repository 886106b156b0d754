package main

import (
	"flag"
	"log/slog"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/redact"
)

// cassetteFlags are the proxy's recording flags for `bir-proxy verify`.
type cassetteFlags struct {
	path   string
	redact bool
}

func defineCassetteFlags(fs *flag.FlagSet) *cassetteFlags {
	c := &cassetteFlags{}
	fs.StringVar(&c.path, "cassette", "", "also record every tools/call to this `FILE` for bir-proxy verify: the arguments RAW, as sent (secrets included; the file is 0600), and the results (see docs/cassette.md)")
	fs.BoolVar(&c.redact, "cassette-redact", false, "with --cassette: record the arguments redacted (such calls cannot be replayed)")
	return c
}

// open starts the cassette, or returns nil when none was asked for (or BIR_OFF: a pure
// pipe records nothing). A cassette that cannot be opened is said, and the proxy runs
// without it: the host's session matters more.
func (c *cassetteFlags) open(f *proxyFlags, off bool, logger *slog.Logger) *cassette.Writer {
	if c.path == "" {
		return nil
	}
	if off {
		logger.Warn("BIR_OFF: no cassette is recorded", "cassette", c.path)
		return nil
	}
	h := cassette.Header{Server: f.server}
	if f.url != "" {
		h.URL = redact.URL(f.url) // as given: ${VAR} unexpanded; headers never
	} else {
		h.Command = redact.CommandLine(f.command)
	}
	w, err := cassette.Create(cassette.WriterOptions{Path: c.path, Header: h, Logger: logger})
	if err != nil {
		logger.Warn("no cassette is recorded", "err", err)
		return nil
	}
	return w
}

// options puts the cassette into the interceptor's options.
func (c *cassetteFlags) options(o *intercept.Options, w *cassette.Writer) {
	if w != nil {
		o.Cassette, o.CassetteRedact = w, c.redact
	}
}

func closeCassette(w *cassette.Writer, logger *slog.Logger) {
	if w == nil {
		return
	}
	if err := w.Close(); err != nil {
		logger.Warn("the cassette", "err", err)
	}
}
