package verify

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/report"
)

// JournalBudget is the size the current answer of a call replayed from the journal is
// redacted and clipped to before it is compared: as a report's result was.
const JournalBudget = 64 << 10

// JournalSource reads the journal's reports of server (the files in paths, oldest
// first; a missing one is skipped) as recorded calls: the host's calls (not replay
// dispatches) received at or after since. A call whose arguments lost something to
// redaction or clipping is marked redacted, naming where. The journal is read with
// package journal's Reader; lines that do not read (a proxy killed mid-line, one over
// journal.MaxLine) are skipped and logged, records that are not calls skipped.
func JournalSource(paths []string, server string, since time.Time, log *slog.Logger) func() (Source, error) {
	if log == nil {
		log = slog.Default()
	}
	return func() (Source, error) {
		js := &journalSource{paths: paths, server: server, since: since, log: log,
			h: cassette.Header{Version: cassette.Version, Server: server, Era: cassette.EraUnknown}}
		found := false
		for _, p := range paths {
			if _, err := os.Stat(p); err == nil {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no journal of %q at %s", server, paths[len(paths)-1])
		}
		return js, nil
	}
}

type journalSource struct {
	paths  []string
	server string
	since  time.Time
	log    *slog.Logger
	h      cassette.Header

	r   *journal.Reader
	seq int64
}

func (j *journalSource) Header() *cassette.Header { return &j.h }

func (j *journalSource) Close() error {
	if j.r != nil {
		j.r.Close()
	}
	return nil
}

func (j *journalSource) Next() (*cassette.Call, error) {
	for {
		if j.r == nil {
			if len(j.paths) == 0 {
				return nil, io.EOF
			}
			j.r, j.paths = journal.NewReader(j.paths[0], false), j.paths[1:]
		}
		rec, err := j.r.Next()
		if err == io.EOF {
			if j.r.Long > 0 {
				j.log.Warn("journal lines too long to read were skipped", "file", j.r.Path(), "lines", j.r.Long)
			}
			j.r.Close()
			j.r = nil
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the journal: %w", err)
		}
		if rec.Kind == journal.KindAck || rec.Kind == journal.KindOther {
			continue // not a call
		}
		var st report.Step
		if rec.Kind == journal.KindReport {
			st, err = rec.Step()
		}
		if rec.Kind == journal.KindBroken || err != nil || st.Tool == "" {
			j.log.Warn("a journal line that does not read was skipped", "file", j.r.Path(), "line", j.r.Line())
			continue
		}
		if st.DispatchID != nil || (j.server != "" && st.Server != j.server) || st.ReceivedAt.Before(j.since) {
			continue
		}
		j.seq++
		c := &cassette.Call{Seq: j.seq, Tool: st.Tool, Arguments: st.Args, Outcome: st.Outcome,
			Result: st.Result, Error: st.Error, StartedAt: st.StartedAt, DurationMs: st.DurationMs}
		if keys := cassette.RedactedPaths(st.Args); len(keys) > 0 || st.ArgsClipped {
			c.Redacted, c.RedactedKeys = true, keys
			if len(keys) == 0 {
				c.RedactedKeys = []string{"the arguments were clipped"}
			}
		}
		return c, nil
	}
}

// redactAnswer is the current answer as the journal would have shown it.
func redactAnswer(a answer) answer {
	if a.result != nil {
		out, _ := redact.Report(a.result, JournalBudget)
		a.result = bytes.Clone(out)
	}
	if a.err != nil {
		out, _ := redact.Report(a.err, JournalBudget)
		a.err = bytes.Clone(out)
	}
	return a
}
