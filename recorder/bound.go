package recorder

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The spool's bound. A recorder down for days used to let the spool grow without
// limit, until the disk filled under the user's other work. The spool files of a
// server (this run's and those it adopted from earlier runs) are kept under spoolMax:
// past it the oldest reports are dropped, with a count said on stderr and kept on disk
// for `bir-proxy status`, and the files are compacted to give the space back. The
// host's session never waits for any of this: it runs on delivery's goroutine.

// usage returns what a lane's reports take: its file's size and the part of it that
// its reports not yet done take, or for a lane without a file, what it holds in memory.
func (l *lane) usage() (size, live int64) {
	if l.file == nil {
		return l.memBytes, l.memBytes
	}
	return l.file.usage()
}

// bound drops the oldest waiting reports and compacts files until the spool is back
// under three quarters of its bound (so that it is not done again at the next report),
// once it has passed the bound.
func (d *dispatcher) bound() {
	var total, live int64
	for _, l := range d.lanes {
		size, lv := l.usage()
		total, live = total+size, live+lv
	}
	if total <= d.spoolMax {
		return
	}
	target := d.spoolMax - d.spoolMax/4
	// Oldest first: the adopted lanes in the order adoptSpools found them (oldest file
	// first), then this run's. A report in flight is not dropped: it may be taken.
	order := make([]*lane, 0, len(d.lanes))
	for _, l := range d.lanes {
		if l != d.current {
			order = append(order, l)
		}
	}
	order = append(order, d.current)
	dropped := 0
	compact := map[*lane]bool{}
	for _, l := range order {
		for live > target && len(l.queued) > 0 {
			e := l.queued[0]
			n := int64(len(e.body) + 1)
			if l.file == nil {
				l.memBytes -= n
			} else {
				var ok bool
				if n, ok = l.file.drop(e.seq); !ok {
					// Not in the file yet (or never, after a write failed): it and all
					// after it are this run's newest.
					break
				}
				compact[l] = true
			}
			l.queued = l.queued[1:]
			live -= n
			dropped++
		}
	}
	for _, l := range order {
		if l.file == nil {
			continue
		}
		if d.finished(l) {
			continue
		}
		if size, lv := l.file.usage(); compact[l] || size-lv > d.spoolMax/8 {
			if err := l.file.compact(); err != nil {
				d.log.Warn("cannot compact a spool file; it keeps the space of delivered and dropped reports", "path", l.file.path, "err", err)
			}
		}
	}
	if dropped == 0 {
		return
	}
	d.dropped += int64(dropped)
	d.log.Warn("the spool is full: dropped the oldest reports (raise --spool-max to keep more)",
		"reports", dropped, "droppedThisRun", d.dropped, "spoolMax", d.spoolMax)
	if err := addDropped(d.droppedFile, d.regBase.Server, dropped); err != nil {
		d.log.Debug("cannot count dropped reports for status", "err", err)
	}
}

// droppedRecord is what <spool>/<server>.dropped holds: how many reports of the server
// were dropped to keep its spool under the bound, since the file was created.
type droppedRecord struct {
	Server  string    `json:"server"`
	Dropped int64     `json:"dropped"`
	Last    time.Time `json:"last"`
}

const droppedSuffix = ".dropped"

func droppedPath(spoolDir, server string) string {
	return filepath.Join(spoolDir, fileSafe(server)+droppedSuffix)
}

// addDropped adds n to the count in path, replacing the file whole. Two proxies of a
// server dropping at the same moment may lose one's addition: it is a count for a
// person to read, not a ledger.
func addDropped(path, server string, n int) error {
	if path == "" {
		return nil
	}
	var rec droppedRecord
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &rec)
	}
	rec.Server, rec.Dropped, rec.Last = server, rec.Dropped+int64(n), time.Now().UTC()
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("count dropped reports: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("count dropped reports: %w", err)
	}
	return nil
}

// SpoolState is what the spool holds for one server, for `bir-proxy status`.
type SpoolState struct {
	Server   string    // as the reports name it; the file-name form when no report was dropped
	Files    int       // spool files waiting (runs whose reports are not all delivered)
	Bytes    int64     // their size
	Dropped  int64     // reports dropped to keep the spool under its bound, ever
	LastDrop time.Time // when the last of them was dropped
}

// SpoolStatus lists, by server, the spool files waiting in stateDir and the reports
// dropped to keep them under the bound. A missing spool directory is no error.
func SpoolStatus(stateDir string) ([]SpoolState, error) {
	dir := spoolDir(stateDir)
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the spool directory: %w", err)
	}
	by := map[string]*SpoolState{}
	get := func(key string) *SpoolState {
		if by[key] == nil {
			name, err := url.PathUnescape(key) // fileSafe's %XX
			if err != nil {
				name = key
			}
			by[key] = &SpoolState{Server: name}
		}
		return by[key]
	}
	for _, de := range des {
		name := de.Name()
		if key, ok := strings.CutSuffix(name, droppedSuffix); ok {
			var rec droppedRecord
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || json.Unmarshal(b, &rec) != nil {
				continue
			}
			st := get(key)
			st.Dropped, st.LastDrop = rec.Dropped, rec.Last
			if rec.Server != "" {
				st.Server = rec.Server
			}
			continue
		}
		rest, ok := strings.CutSuffix(name, ".jsonl")
		if !ok || len(rest) < 34 || rest[len(rest)-33] != '.' || !validProxyID(rest[len(rest)-32:]) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		st := get(rest[:len(rest)-33])
		st.Files++
		st.Bytes += info.Size()
	}
	out := make([]SpoolState, 0, len(by))
	for _, st := range by {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b SpoolState) int { return strings.Compare(a.Server, b.Server) })
	return out, nil
}
