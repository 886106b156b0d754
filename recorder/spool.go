package recorder

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// A spool file holds the reports of one run, one JSON line each, followed by done marks
// ({"ack":17}) for the ones the recorder answered 200 for. Only the run that holds the
// file's lock writes it; a later run adopts the file once that lock is free.

// compactAt is the size past which a spool file whose reports are all done is emptied,
// so a long session with a healthy recorder does not grow a file of delivered reports.
const compactAt = 1 << 20

// entry is a report waiting for delivery: where its line is in the spool file, or its
// bytes when it could not be written there.
type entry struct {
	seq  uint64
	off  int64
	n    int
	body []byte
}

type spoolFile struct {
	path string
	own  bool // the current run's file (compacted when done) rather than an adopted one

	mu   sync.Mutex
	f    *os.File
	size int64 // where the next line goes; everything before it is whole lines
	live int   // report lines written and not yet marked done

	spooledTo uint64   // the highest seq whose line is in the file (own file only)
	early     []uint64 // done marks waiting for their report's line
	ready     []uint64 // scratch: the marks of one markDone that can be written now
	ackBuf    []byte   // scratch: their lines
	noCompact bool     // a write failed: live no longer counts the lines in the file

	// idx is where each report line not yet done is, by seq: reads go through it, so
	// that compact can move lines under a delivery reading them. liveBytes is what
	// those lines take.
	idx       []loc
	liveBytes int64
}

type loc struct {
	seq  uint64
	off  int64
	n    int // without the newline
	done bool
}

// find returns where in idx the report seq is, if it is there and not done.
func (s *spoolFile) find(seq uint64) (int, bool) {
	i, ok := slices.BinarySearchFunc(s.idx, seq, func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) })
	return i, ok && !s.idx[i].done
}

func spoolName(server, proxyID string) string {
	return fileSafe(server) + "." + proxyID + ".jsonl"
}

// createSpool creates the current run's spool file, locked.
func createSpool(dir, server, proxyID string) (*spoolFile, error) {
	final := filepath.Join(dir, spoolName(server, proxyID))
	tmp := final + ".new"
	f, err := openLocked(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, fmt.Errorf("create spool file: %w", err)
	}
	// Named only once locked: a run adopting abandoned files must never find this one
	// unlocked and empty and delete it under us.
	if err := os.Rename(tmp, final); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("create spool file: %w", err)
	}
	syncDir(dir)
	return &spoolFile{path: final, own: true, f: f}, nil
}

// appendReports writes lines (each ending in '\n', reports seqs, in order) in one write
// and returns where each line starts.
func (s *spoolFile) appendReports(lines [][]byte, seqs []uint64) ([]int64, error) {
	var buf []byte
	rel := make([]entry, len(lines))
	for i, l := range lines {
		rel[i] = entry{seq: seqs[i], off: int64(len(buf)), n: len(l) - 1}
		buf = append(buf, l...)
	}
	base, err := s.appendBatch(buf, rel)
	if err != nil {
		return nil, err
	}
	offs := make([]int64, len(rel))
	for i, e := range rel {
		offs[i] = base + e.off
	}
	return offs, nil
}

// appendBatch writes buf, the lines of the reports in lines (in seq order; each
// entry's off is where its line starts in buf, n its length without the '\n'), in one
// write and returns the offset buf starts at in the file. The done marks of these
// reports that came before their lines (delivery has them first) follow the lines in
// the same write, so buf may be appended to. The Reporter fsyncs within syncWindow.
func (s *spoolFile) appendBatch(buf []byte, lines []entry) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	base := s.size
	spooledTo := s.spooledTo
	if n := len(lines); n > 0 && lines[n-1].seq > spooledTo {
		spooledTo = lines[n-1].seq
	}
	ready := s.ready[:0]
	for _, seq := range s.early {
		if seq <= spooledTo {
			ready = append(ready, seq)
		}
	}
	s.ready = ready[:0]
	out := appendAcks(buf, ready)
	if _, err := s.f.WriteAt(out, s.size); err != nil {
		// A partial line would glue itself to the next one.
		s.f.Truncate(s.size)
		// These reports are delivered from memory; their done marks, written later,
		// would count against lines that are not here, so the count that allows
		// compaction can no longer be trusted.
		s.noCompact = true
		return 0, fmt.Errorf("write spool file: %w", err)
	}
	// fsynced by the Reporter's commit loop within syncWindow.
	for _, l := range lines {
		s.idx = append(s.idx, loc{seq: l.seq, off: base + l.off, n: l.n})
	}
	s.liveBytes += int64(len(buf))
	s.size += int64(len(out))
	s.live += len(lines)
	s.spooledTo = spooledTo
	if len(ready) > 0 {
		s.early = slices.DeleteFunc(s.early, func(seq uint64) bool { return seq <= spooledTo })
		s.countDone(ready)
	}
	return base, nil
}

// holds reports whether the report seq was written to the file (own file: in seq order;
// an adopted file holds all its reports).
func (s *spoolFile) holds(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.own || (seq <= s.spooledTo && !s.noCompact)
}

// sync flushes the file to disk.
func (s *spoolFile) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("sync spool file: %w", err)
	}
	return nil
}

// markDone appends the done marks for seqs, in one write. They are not synced: a mark
// lost to a machine crash only means the report is sent once more, and the recorder
// ignores repeats. A report is handed to delivery before its line is written, so its
// mark can come first; it then waits for the line, or a compaction could empty the
// file between the mark and the line and leave the line looking undelivered.
func (s *spoolFile) markDone(seqs ...uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := seqs
	if s.own {
		now = s.ready[:0]
		for _, seq := range seqs {
			if seq > s.spooledTo {
				s.early = append(s.early, seq)
			} else {
				now = append(now, seq)
			}
		}
		s.ready = now[:0]
	}
	return s.writeAcks(now)
}

// appendAcks appends the done marks of seqs to b, one line each.
func appendAcks(b []byte, seqs []uint64) []byte {
	for _, seq := range seqs {
		b = strconv.AppendUint(append(b, `{"ack":`...), seq, 10)
		b = append(b, "}\n"...)
	}
	return b
}

// writeAcks writes the done marks of seqs in one write (a batch of 256 reports was 256
// writes), then counts them done.
func (s *spoolFile) writeAcks(seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	line := appendAcks(s.ackBuf[:0], seqs)
	if cap(line) <= 64<<10 {
		s.ackBuf = line[:0]
	}
	if _, err := s.f.WriteAt(line, s.size); err != nil {
		s.f.Truncate(s.size)
		return fmt.Errorf("mark reports %d-%d done in spool file: %w", seqs[0], seqs[len(seqs)-1], err)
	}
	s.size += int64(len(line))
	s.countDone(seqs)
	return nil
}

// countDone counts the reports seqs, whose done marks are in the file, done, and
// empties the file once everything in it is.
func (s *spoolFile) countDone(seqs []uint64) {
	for _, seq := range seqs {
		s.live--
		if i, ok := s.find(seq); ok {
			s.liveBytes -= int64(s.idx[i].n + 1)
			s.idx[i].done = true
		}
	}
	// Marks come mostly in seq order: dropping the done ones at the front keeps the
	// index as short as what is waiting, at no cost per mark.
	k := 0
	for k < len(s.idx) && s.idx[k].done {
		k++
	}
	s.idx = s.idx[k:]
	if s.own && !s.noCompact && s.live == 0 && len(s.early) == 0 && s.size > compactAt {
		// Everything in the file is done: nothing is lost if we crash right after this.
		if err := s.f.Truncate(0); err == nil {
			s.size = 0
			s.idx, s.liveBytes = nil, 0
		}
	}
}

// usage returns the size of the file and what its reports not yet done take of it.
func (s *spoolFile) usage() (size, live int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size, s.liveBytes
}

// drop marks the report seq done without its delivery, to keep the spool under its
// bound, and returns the bytes its line takes; ok is false when its line is not in the
// file (not written yet, or a write failed).
func (s *spoolFile) drop(seq uint64) (n int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.find(seq)
	if !ok {
		return 0, false
	}
	n = int64(s.idx[i].n + 1)
	// As markDone: a mark lost to a failed write only means the report is sent after
	// all, by this run's compaction or a later run.
	_ = s.writeAcks([]uint64{seq})
	return n, true
}

// compact rewrites the file with only its reports not yet done, so that the space of
// delivered and dropped ones is given back: done marks only ever add to a file. The
// new file is written beside it, locked, then renamed over it, so a crash leaves one
// or the other whole, and a run adopting the name always finds it locked.
func (s *spoolFile) compact() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tmp := s.path + ".compact"
	// A leftover of a run killed while compacting; only the holder of the lock on
	// path, which we are, compacts it.
	os.Remove(tmp)
	nf, err := openLocked(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return fmt.Errorf("compact spool file: %w", err)
	}
	fail := func(err error) error {
		nf.Close()
		os.Remove(tmp)
		return fmt.Errorf("compact spool file: %w", err)
	}
	w := bufio.NewWriterSize(nf, 1<<20)
	idx := make([]loc, 0, len(s.idx))
	var off int64
	var line []byte
	for _, l := range s.idx {
		if l.done {
			continue
		}
		line = slices.Grow(line[:0], l.n+1)[:l.n+1]
		if _, err := s.f.ReadAt(line, l.off); err != nil {
			return fail(err)
		}
		if _, err := w.Write(line); err != nil {
			return fail(err)
		}
		idx = append(idx, loc{seq: l.seq, off: off, n: l.n})
		off += int64(l.n + 1)
	}
	if err := errors.Join(w.Flush(), nf.Sync()); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fail(err)
	}
	syncDir(filepath.Dir(s.path))
	s.f.Close() // the old file, now nameless: its lock no longer matters
	s.f, s.idx, s.size, s.liveBytes = nf, idx, off, off
	if !s.noCompact {
		s.live = len(idx)
	}
	return nil
}

// read returns the report line of e, without its newline, from where the file's index
// says it is now (compact moves lines).
func (s *spoolFile) read(e entry) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.find(e.seq)
	if !ok {
		return nil, fmt.Errorf("read report %d from spool file: not in it", e.seq)
	}
	l := s.idx[i]
	buf := make([]byte, l.n)
	if _, err := s.f.ReadAt(buf, l.off); err != nil {
		return nil, fmt.Errorf("read report %d from spool file: %w", e.seq, err)
	}
	return buf, nil
}

// remove deletes the file while still holding its lock, then closes it.
func (s *spoolFile) remove() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := os.Remove(s.path)
	return errors.Join(err, s.f.Close())
}

// close syncs the done marks and releases the file for a later run to adopt.
func (s *spoolFile) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.f.Sync(), s.f.Close())
}

// adoption is a spool file left by a run that is gone, with its reports not yet done.
type adoption struct {
	proxyID string
	file    *spoolFile
	entries []entry // by seq
	mod     time.Time
}

// adoptSpools takes over every spool file of server in dir whose lock is free, except
// the current run's own. Files with nothing left to deliver are deleted.
func adoptSpools(ctx context.Context, dir, server, ownID string, log *slog.Logger) []adoption {
	des, err := os.ReadDir(dir)
	if err != nil {
		log.Warn("cannot list the spool directory; reports of earlier runs stay there", "dir", dir, "err", err)
		return nil
	}
	prefix := fileSafe(server) + "."
	var out []adoption
	for _, de := range des {
		if ctx.Err() != nil {
			break
		}
		name := de.Name()
		id, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if id, ok = strings.CutSuffix(id, ".jsonl"); !ok || !validProxyID(id) || id == ownID {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := openLocked(path, os.O_RDWR)
		if err != nil {
			// Locked: its proxy is still running and delivers it itself. Gone: another
			// run adopted it and has just finished with it.
			if !errors.Is(err, errLocked) && !errors.Is(err, fs.ErrNotExist) {
				log.Warn("cannot open a spool file of an earlier run", "path", path, "err", err)
			}
			continue
		}
		if !stillNamed(f, path) {
			// Its run compacted it: we locked the file it replaced, which no longer
			// has a name, and the one that has it is still locked by its run.
			f.Close()
			continue
		}
		os.Remove(path + ".compact") // a leftover of a compaction cut short
		if err := privateFile(f, log); err != nil {
			log.Warn("not adopting a spool file of an earlier run", "err", err)
			f.Close()
			continue
		}
		var mod time.Time // when its run last wrote it: before the trim below writes it
		if st, err := f.Stat(); err == nil {
			mod = st.ModTime()
		}
		sf := &spoolFile{path: path, f: f}
		entries, size, err := scanSpool(f, server, id, log)
		if err != nil {
			log.Warn("cannot read a spool file of an earlier run", "path", path, "err", err)
			f.Close()
			continue
		}
		if st, err := f.Stat(); err == nil && st.Size() > size {
			// A torn last line from a writer killed mid-write; the marks we append
			// must not be glued to it.
			if err := f.Truncate(size); err != nil {
				log.Warn("cannot trim a torn line off a spool file", "path", path, "err", err)
				f.Close()
				continue
			}
		}
		sf.size, sf.live = size, len(entries)
		for _, e := range entries {
			sf.idx = append(sf.idx, loc{seq: e.seq, off: e.off, n: e.n})
			sf.liveBytes += int64(e.n + 1)
		}
		if len(entries) == 0 {
			if err := sf.remove(); err != nil {
				log.Debug("remove delivered spool file", "path", path, "err", err)
			}
			continue
		}
		out = append(out, adoption{proxyID: id, file: sf, entries: entries, mod: mod})
	}
	// Oldest first: when the spool is over its bound, the oldest reports go first.
	slices.SortStableFunc(out, func(a, b adoption) int { return a.mod.Compare(b.mod) })
	return out
}

// stillNamed reports whether path still names the open file f.
func stillNamed(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// scanSpool reads a spool file and returns its reports without a done mark, by seq, and
// the length of its whole lines.
func scanSpool(f *os.File, server, proxyID string, log *slog.Logger) ([]entry, int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, 1<<62), 64<<10)
	reports := map[uint64]entry{}
	done := map[uint64]bool{}
	var off int64
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if err == io.EOF {
				break // line, if any, is a torn tail
			}
			return nil, 0, err
		}
		start := off
		off += int64(len(line))
		body := line[:len(line)-1]
		if !gjson.ValidBytes(body) {
			log.Warn("skipping a malformed line in a spool file", "path", f.Name(), "offset", start)
			continue
		}
		if ack := gjson.GetBytes(body, "ack"); ack.Exists() {
			done[ack.Uint()] = true
			continue
		}
		seq := gjson.GetBytes(body, "seq").Uint()
		if seq == 0 || gjson.GetBytes(body, "proxyId").String() != proxyID || gjson.GetBytes(body, "server").String() != server {
			log.Warn("skipping a line of another proxy in a spool file", "path", f.Name(), "offset", start)
			continue
		}
		reports[seq] = entry{seq: seq, off: start, n: len(body)}
	}
	out := make([]entry, 0, len(reports))
	for seq, e := range reports {
		if !done[seq] {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	return out, off, nil
}

func validProxyID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
