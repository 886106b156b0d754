package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"time"

	"github.com/bir-dev/bir-proxy/internal/version"
	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/pins"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/upstream"
)

// closeGrace is how long the proxy, at exit, lets reports still in flight reach the
// recorder. What doesn't make it stays in the spool for the next run; a host waiting
// for its server to exit should not wait on the recorder.
const closeGrace = time.Second

// reporting wraps the recorder's Reporter, which is absent under BIR_OFF=1 or when it
// could not be opened; the session goes on either way.
type reporting struct {
	r  *recorder.Reporter
	id string
}

// openReporter finds where reports go (SPEC §5): a recorder, or else the journal.
func openReporter(ctx context.Context, f *proxyFlags, log *slog.Logger) *reporting {
	if off() {
		return &reporting{id: randomID()}
	}
	cwd, _ := os.Getwd()
	ep, err := recorder.Discover(recorder.DiscoverOptions{Flag: f.recorderURL, Env: os.Getenv, Dir: cwd, AllowRemote: f.allowRemote, Logger: log})
	if err != nil {
		// A recorder we may not talk to (not loopback, a discovery file that is
		// unreadable or that others could have written): reports go to the journal
		// rather than nowhere.
		log.Warn("not using the configured recorder; reports go to the journal", "err", err)
		ep = nil
	}
	r, err := recorder.Open(ctx, recorder.Config{
		Endpoint:    ep,
		Server:      f.server,
		Version:     version.Get().String(),
		Upstream:    f.upstreamFacts(),
		JournalPath: f.journal,
		// The flags' zero or negative values take the defaults.
		JournalMaxBytes: int64(f.journalMaxMB) << 20,
		JournalKeep:     f.journalKeep,
		SpoolMax:        f.spoolMax.n,
		Logger:          log,
	})
	if err != nil {
		log.Warn("recording is off for this session", "err", err)
		return &reporting{id: randomID()}
	}
	return &reporting{r: r, id: r.ProxyID()}
}

// upstreamFacts is how the registration describes the upstream. A remote one is its
// URL as given (${VAR} references unexpanded: they name secrets, they are not ones),
// with credentials and query secrets redacted. For auto, the registration at start
// says "http" (what is tried first); a fallback to HTTP+SSE, learnt from the first
// POST's answer, is registered again (settledTransport).
func (f *proxyFlags) upstreamFacts() recorder.Upstream {
	if f.url == "" {
		return recorder.Upstream{Transport: "stdio", Command: f.command}
	}
	transport := "http"
	if f.transport == upstream.TransportSSE {
		transport = "sse"
	}
	return recorder.Upstream{Transport: transport, URL: redact.URL(f.url)}
}

// settledTransport passes on the transport a remote connection settled on.
func (p *reporting) settledTransport(t string) {
	if p.r != nil {
		p.r.SettledTransport(t)
	}
}

func (p *reporting) sink() report.Sink {
	if p.r == nil {
		return nil // an untyped nil: intercept then only removes the key
	}
	return p.r
}

func (p *reporting) proxyID() string { return p.id }

// drift journals a tool's drift from its pin (journal mode only: Reporter.Drift).
func (p *reporting) drift(s pins.Status) {
	if p.r != nil {
		p.r.Drift(journal.DriftOf{Tool: s.Name, Status: s.Status, Changed: s.Changed, From: s.From}, time.Now())
	}
}

// learned passes on what a revived server said about itself: the recorder registers
// again (SPEC §5), as after the first handshake.
func (p *reporting) learned(f report.ServerFacts) {
	if p.r != nil {
		p.r.Learned(f)
	}
}

// remote is the recorder replay dispatches come from: nil under BIR_OFF and in
// journal mode, where nothing may be asked of a recorder.
func (p *reporting) remote() *recorder.Remote {
	if p.r == nil {
		return nil
	}
	return p.r.Remote()
}

func (p *reporting) close() {
	if p.r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	_ = p.r.Close(ctx)
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
