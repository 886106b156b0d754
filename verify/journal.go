package verify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/report"
)

// maxJournalLine bounds one journal line read (a report is capped at 64 KiB).
const maxJournalLine = 16 << 20

// JournalBudget is the size the current answer of a call replayed from the journal is
// redacted and clipped to before it is compared: as a report's result was.
const JournalBudget = 64 << 10

// JournalSource reads the journal's reports of server (the files in paths, oldest
// first; a missing one is skipped) as recorded calls: the host's calls (not replay
// dispatches) received at or after since. A call whose arguments lost something to
// redaction or clipping is marked redacted, naming where. Lines that do not read (a
// proxy killed mid-line) are skipped and logged.
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

	f    *os.File
	br   *bufio.Reader
	name string
	line int
	seq  int64
}

func (j *journalSource) Header() *cassette.Header { return &j.h }

func (j *journalSource) Close() error {
	if j.f != nil {
		return j.f.Close()
	}
	return nil
}

func (j *journalSource) Next() (*cassette.Call, error) {
	for {
		if j.br == nil {
			if len(j.paths) == 0 {
				return nil, io.EOF
			}
			j.name, j.paths = j.paths[0], j.paths[1:]
			f, err := os.Open(j.name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("reading the journal: %w", err)
			}
			j.f, j.br, j.line = f, bufio.NewReaderSize(f, 64<<10), 0
		}
		line, _, err := cassette.ReadLine(j.br, maxJournalLine)
		if err == nil {
			j.line++
		}
		if err == io.EOF {
			j.f.Close()
			j.f, j.br = nil, nil
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s, line %d: %w", j.name, j.line+1, err)
		}
		var st report.Step
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &st); err != nil || st.Tool == "" {
			j.log.Warn("a journal line that does not read was skipped", "file", j.name, "line", j.line)
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
