// Package logview prints the journal for `bir-proxy log`: the reports written when no
// recorder was running, as a table or as their JSON lines. It only reads files, so it
// lives apart from package recorder's HTTP delivery and spool; all it takes from there
// is where the journals are (DefaultStateDir, JournalDir).
package logview

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/recorder"
)

// followEvery is how often PrintLog looks for new lines with Follow. Polling is fine
// here: this is a viewer a person runs, not the proxy.
const followEvery = 200 * time.Millisecond

// LogOptions says what PrintLog shows.
type LogOptions struct {
	Path   string // one journal file; when empty, every *.jsonl in Dir
	Dir    string // when Path and Dir are empty, the default journal directory
	Server string // only this server's reports
	Follow bool   // keep printing new reports until ctx is done
	JSON   bool   // print each report as its JSON line instead of a table row
	Limit  int    // only the last Limit reports (0: all) before following
}

// PrintLog prints journal reports to w for `bir-proxy log`: a table (local time,
// server, tool, duration, outcome, a one-line excerpt of the arguments) or the JSON
// lines themselves. Reports of several journals are merged by the time the call was
// received.
func PrintLog(ctx context.Context, w io.Writer, opts LogOptions) error {
	dir := opts.Dir
	if opts.Path == "" && dir == "" {
		state, err := recorder.DefaultStateDir()
		if err != nil {
			return err
		}
		dir = recorder.JournalDir(state)
	}
	files, err := journalFiles(opts.Path, dir)
	if err != nil {
		return err
	}
	if !opts.Follow {
		if opts.Path != "" {
			if _, err := os.Stat(opts.Path); err != nil {
				return fmt.Errorf("no journal: %w", err)
			}
		} else if len(files) == 0 {
			return fmt.Errorf("no journal in %s yet", dir)
		}
	}

	p := &logPrinter{w: w, opts: opts}
	var reports [][]byte
	for _, jf := range files {
		lines, err := jf.readNew(opts.Server)
		if err != nil {
			return err
		}
		if opts.Limit > 0 && len(lines) > opts.Limit {
			lines = lines[len(lines)-opts.Limit:]
		}
		reports = append(reports, lines...)
	}
	if len(files) > 1 {
		slices.SortStableFunc(reports, func(a, b []byte) int {
			return gjson.GetBytes(a, "receivedAt").Time().Compare(gjson.GetBytes(b, "receivedAt").Time())
		})
	}
	if opts.Limit > 0 && len(reports) > opts.Limit {
		reports = reports[len(reports)-opts.Limit:]
	}
	if err := p.header(); err != nil {
		return err
	}
	for _, line := range reports {
		if err := p.print(line); err != nil {
			return err
		}
	}
	if !opts.Follow {
		return nil
	}

	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if opts.Path == "" {
			// Journals of servers that start while we follow.
			more, err := journalFiles("", dir)
			if err != nil {
				return err
			}
			for _, jf := range more {
				if !slices.ContainsFunc(files, func(have *journalFile) bool { return have.path == jf.path }) {
					files = append(files, jf)
				}
			}
		}
		for _, jf := range files {
			lines, err := jf.readNew(opts.Server)
			if err != nil {
				return err
			}
			for _, line := range lines {
				if err := p.print(line); err != nil {
					return err
				}
			}
		}
	}
}

func journalFiles(path, dir string) ([]*journalFile, error) {
	if path != "" {
		return []*journalFile{{path: path}}, nil
	}
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list journals: %w", err)
	}
	var out []*journalFile
	for _, de := range des {
		if de.Type().IsRegular() && strings.HasSuffix(de.Name(), ".jsonl") {
			out = append(out, &journalFile{path: filepath.Join(dir, de.Name())})
		}
	}
	return out, nil
}

// journalFile is a journal being read: how far its whole lines have been read.
type journalFile struct {
	path string
	off  int64
}

// readNew returns the reports (of server, if set) in lines completed since the last
// call. A line still being written is left for the next call.
func (j *journalFile) readNew(server string) ([][]byte, error) {
	f, err := os.Open(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // not written yet, or removed
	}
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	if st.Size() < j.off {
		j.off = 0 // truncated or replaced: start over
	}
	if _, err := f.Seek(j.off, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	var out [][]byte
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, fmt.Errorf("read journal %s: %w", j.path, err)
		}
		j.off += int64(len(line))
		line = bytes.TrimRight(line, "\r\n")
		if !gjson.ValidBytes(line) {
			continue
		}
		if server != "" && gjson.GetBytes(line, "server").String() != server {
			continue
		}
		out = append(out, line)
	}
}

type logPrinter struct {
	w    io.Writer
	opts LogOptions
}

const (
	argsWidth   = 60
	serverWidth = 12
	toolWidth   = 24
)

func (p *logPrinter) header() error {
	if p.opts.JSON {
		return nil
	}
	_, err := fmt.Fprintf(p.w, "%-12s  %-*s  %-*s  %8s  %-14s  %s\n",
		"TIME", serverWidth, "SERVER", toolWidth, "TOOL", "DURATION", "OUTCOME", "ARGS")
	return err
}

func (p *logPrinter) print(line []byte) error {
	if p.opts.JSON {
		_, err := p.w.Write(append(line[:len(line):len(line)], '\n'))
		return err
	}
	_, err := io.WriteString(p.w, tableRow(line, time.Now()))
	return err
}

func tableRow(line []byte, now time.Time) string {
	r := gjson.ParseBytes(line)
	return fmt.Sprintf("%-12s  %-*s  %-*s  %8s  %-14s  %s\n",
		shortTime(r.Get("receivedAt").Time(), now),
		serverWidth, clip(printable(r.Get("server").String()), serverWidth),
		toolWidth, clip(printable(r.Get("tool").String()), toolWidth),
		shortDuration(r.Get("durationMs").Float()),
		clip(printable(r.Get("outcome").String()), 14),
		oneLineArgs(r.Get("args").Raw))
}

func shortTime(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	t, now = t.Local(), now.Local()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("Jan 02 15:04")
}

func shortDuration(ms float64) string {
	switch {
	case ms < 0:
		return "-"
	case ms < 10:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0fms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1fs", ms/1000)
	}
	d := time.Duration(ms * float64(time.Millisecond)).Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// oneLineArgs is the arguments as compact JSON, cut to fit the column. JSON escapes
// every control character, so nothing in them can move the terminal's cursor.
func oneLineArgs(raw string) string {
	if raw == "" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(raw)); err != nil {
		return clip(printable(raw), argsWidth)
	}
	return clip(buf.String(), argsWidth)
}

func clip(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	runes := []rune(s)
	return string(runes[:width-1]) + "…"
}

// printable keeps a decoded name from carrying terminal escape sequences.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}
