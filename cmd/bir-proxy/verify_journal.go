package main

import (
	"time"

	"github.com/bir-dev/bir-proxy/internal/statedir"
	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/recorder/logview"
	"github.com/bir-dev/bir-proxy/verify"
)

// journalSource is verify --from-journal's recording: the server's journal (and its
// rotated files, oldest first).
func journalSource(p *proxyFlags, since string) (func() (verify.Source, error), error) {
	var from time.Time
	if since != "" {
		t, err := logview.ParseSince(since, time.Now())
		if err != nil {
			return nil, err
		}
		from = t
	}
	path := p.journal
	if path == "" {
		state, err := statedir.Dir()
		if err != nil {
			return nil, err
		}
		path = journal.Path(state, p.server)
	}
	var paths []string
	for n := 32; n >= 1; n-- {
		paths = append(paths, journal.Rotated(path, n))
	}
	return verify.JournalSource(append(paths, path), p.server, from, nil), nil
}
