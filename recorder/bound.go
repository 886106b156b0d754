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

// spoolBlock is the unit a file takes on disk in: a file of 1 byte takes a block.
const spoolBlock = 4 << 10

// onDisk is what a file of size bytes takes on disk.
func onDisk(size int64) int64 { return (size + spoolBlock - 1) / spoolBlock * spoolBlock }

// boundSlack is what the spool directory may take besides the spool files: the
// <server>.dropped count and its replacement while it is rewritten.
const boundSlack = 2 * spoolBlock

// maxAckLine is the longest done mark: {"ack":18446744073709551615} and its newline.
const maxAckLine = 29

// compactChunk is how much of a file a compaction moves at a time, which is what it
// takes beside the file (or one line, when longer).
func (d *dispatcher) compactChunk() int64 { return min(max(d.spoolMax/16, 16<<10), 4<<20) }

// spoolUse adds up what the spool takes on disk now and what its reports not yet done
// take, and the most that compacting any of its files needs beside them.
func (d *dispatcher) spoolUse() (used, live, reserve int64) {
	reserve = d.compactChunk()
	for _, l := range d.lanes {
		size, lv := l.usage()
		live += lv
		if l.file == nil {
			used += size
			continue
		}
		used += onDisk(size)
		reserve = max(reserve, l.file.longestLine())
	}
	// A piece of a compaction starts the new file's last block part way.
	return used, live, onDisk(reserve) + spoolBlock
}

// room reports whether incoming more bytes fit in the spool with room left to compact
// it: the bound holds at every moment only if a compaction, which takes a piece
// beside the file it shrinks, can always run.
func (d *dispatcher) room(incoming int64) bool {
	used, _, reserve := d.spoolUse()
	return used+onDisk(incoming)+reserve+boundSlack <= d.spoolMax
}

// bound makes room for incoming more bytes (a write of reports about to be made, 0
// after one) under the spool's bound: past it, it drops the oldest waiting reports
// until those left take three quarters of the bound, less the room a compaction needs
// (so that it is not done again at the next report), and compacts the files it dropped from; files
// that hold much that is done (an eighth of the bound), or any when room is still
// short, are compacted too. The bound is checked before every write that grows the
// spool (the commit loop's, through makeRoom; done marks, in done1), not after: it
// was checked after each write, and a 4 MiB bound peaked at 5.5 MB.
func (d *dispatcher) bound(incoming int64) {
	used, live, reserve := d.spoolUse()
	over := used+onDisk(incoming)+reserve+boundSlack > d.spoolMax
	// What is left after dropping, written whole and with each file's last block
	// taken whole, leaves room for the incoming (a piece is at most an eighth of the
	// bound) and the next compaction.
	target := d.spoolMax - d.spoolMax/4 - reserve - boundSlack - int64(len(d.lanes))*spoolBlock
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
	if over {
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
	}
	for _, l := range order {
		if l.file == nil || d.finished(l) { // a finished lane's file is deleted
			continue
		}
		size, lv := l.file.usage()
		if compact[l] || size-lv > d.spoolMax/8 || over && size > lv {
			if err := l.file.compact(d.compactChunk()); err != nil {
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

// makeRoom is bound(incoming) on delivery's goroutine, for the commit loop about to
// write incoming bytes of reports to the spool: it returns once there is room (or
// there is none to be made: the reports left are in flight). The host never waits on
// it; Submit only queues.
func (d *dispatcher) makeRoom(incoming int64) {
	req := roomReq{n: incoming, done: make(chan struct{})}
	select {
	case d.roomReqs <- req:
		<-req.done
	case <-d.done: // delivery has ended: nothing more to drop or compact
	}
}

// roomReq asks delivery's goroutine for room for n bytes; done is closed once made.
type roomReq struct {
	n    int64
	done chan struct{}
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
