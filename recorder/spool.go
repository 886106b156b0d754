package recorder

import (
	"bufio"
	"bytes"
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

	"github.com/bir-dev/bir-proxy/internal/statedir"
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
	// maxLine is the longest report line written to the file (compaction moves one
	// line at least at a time). unmarked are the reports marked done here but not in
	// the file (dropped, or delivered when the bound had no room for their marks): the
	// compaction that follows leaves them out; if it fails, their marks are written.
	maxLine  int64
	unmarked []uint64
	// stuck: a compaction failed and could not put back the reports it had moved;
	// they stay in the compaction's file for the next run (which adopts it and puts
	// them back), and this run compacts the file no more.
	stuck bool
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
		s.maxLine = max(s.maxLine, int64(l.n+1))
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
func (s *spoolFile) markDone(seqs ...uint64) error { return s.markDoneAs(true, seqs) }

// markDoneAs is markDone; with write false the marks of the reports already in the
// file are not written, only noted (unmarked): the compaction that must follow gives
// back their lines instead, when the spool's bound has no room for the marks.
func (s *spoolFile) markDoneAs(write bool, seqs []uint64) error {
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
	// Only reports still waiting in the file: a mark for one already done, or for
	// one a failed compaction left outside the file, would count it twice, or (the
	// latter) have the next run take the report it finds there as delivered.
	now = slices.DeleteFunc(now, func(seq uint64) bool { _, ok := s.find(seq); return !ok })
	if !write {
		s.unmarked = append(s.unmarked, now...)
		s.countDone(now)
		return nil
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
			s.idx, s.liveBytes, s.unmarked = nil, 0, nil
		}
	}
}

// usage returns the size of the file and what its reports not yet done take of it.
func (s *spoolFile) usage() (size, live int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size, s.liveBytes
}

// longestLine is the longest report line the file has held since it was last
// compacted: what one step of a compaction may need beside the file.
func (s *spoolFile) longestLine() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxLine
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
	// No done mark now: it would add to a spool that is over its bound. The
	// compaction that follows leaves the line out; if that fails, the mark is written
	// then (unmarked).
	s.unmarked = append(s.unmarked, seq)
	s.countDone([]uint64{seq})
	return n, true
}

// compact rewrites the file with only its reports not yet done, so that the space of
// delivered and dropped ones is given back: done marks only ever add to a file.
//
// The new file never stands whole beside the old one: that took twice what the reports
// kept take, at the moment the spool was at its bound (a 4 MiB bound peaked at 5.5 MB).
// Instead the reports kept move from the end of the old file into the new one, at most
// chunk bytes (or one line) at a time: each piece is written to the new file and
// fsynced, then the old file is cut short of it. So the two together never take more
// than the old file and one piece, and at every moment each report kept is whole in
// one of them (a machine crash included: the piece is on disk before the cut). The new
// file holds the pieces in the order they moved (newest first); the index, by seq, says
// where each line is. Once all have moved, the new file, locked, is renamed over the
// old, so a run adopting the name always finds it locked. A run killed on the way
// leaves both: a run adopting the file puts the new file's lines back into it first
// (mergeCompacted). A compaction that fails on the way puts them back itself.
func (s *spoolFile) compact(chunk int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tmp := s.path + ".compact"
	if s.stuck {
		return fmt.Errorf("compact spool file: an earlier compaction left reports in %s", tmp)
	}
	os.Remove(tmp) // only the holder of the lock on path, which we are, writes it
	nf, err := openLocked(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return s.compactFailed(fmt.Errorf("compact spool file: %w", err))
	}
	live := make([]loc, 0, len(s.idx))
	for _, l := range s.idx {
		if !l.done {
			live = append(live, l)
		}
	}
	slices.SortFunc(live, func(a, b loc) int { return cmp.Compare(a.off, b.off) })
	moved := make([]loc, 0, len(live)) // in nf, by offset
	var w int64
	var buf []byte
	end := len(live)
	fail := func(err error) error {
		// Put back what moved, so the old file holds every report again.
		cut, merr := mergeBack(s.f, s.size, nf, w, chunk, func(from, to, at int64) {
			for i := range moved {
				if moved[i].off >= from && moved[i].off < to {
					moved[i].off += at - from
				}
			}
		})
		if merr != nil {
			// The reports still in nf are not in the file: out of the index, so no
			// read takes other bytes for them and no done mark is written for them.
			nf.Close()
			s.stuck = true
			s.restoreIdx(nil, live[:end])
			return s.compactFailed(fmt.Errorf("compact spool file: %w; putting back its reports: %w (they stay in %s for the next run)", err, merr, tmp))
		}
		s.size = cut
		nf.Close()
		os.Remove(tmp)
		s.restoreIdx(moved, live[:end])
		return s.compactFailed(fmt.Errorf("compact spool file: %w", err))
	}
	for end > 0 {
		start := end - 1
		n := int64(live[start].n + 1)
		for start > 0 && n+int64(live[start-1].n+1) <= chunk {
			start--
			n += int64(live[start].n + 1)
		}
		buf = slices.Grow(buf[:0], int(n))[:n]
		pos := int64(0)
		for _, l := range live[start:end] {
			if _, err := s.f.ReadAt(buf[pos:pos+int64(l.n+1)], l.off); err != nil {
				return fail(err)
			}
			pos += int64(l.n + 1)
		}
		if _, err := nf.WriteAt(buf, w); err != nil {
			nf.Truncate(w)
			return fail(err)
		}
		pos = 0
		for _, l := range live[start:end] {
			moved = append(moved, loc{seq: l.seq, off: w + pos, n: l.n})
			pos += int64(l.n + 1)
		}
		w += n
		if err := nf.Sync(); err != nil {
			return fail(err)
		}
		if err := s.f.Truncate(live[start].off); err != nil {
			return fail(err)
		}
		s.size = live[start].off
		end = start
	}
	// What is left of the old file is delivered and dropped reports and their marks.
	if err := s.f.Truncate(0); err != nil {
		return fail(err)
	}
	s.size = 0
	if err := os.Rename(tmp, s.path); err != nil {
		return fail(err)
	}
	syncDir(filepath.Dir(s.path))
	s.f.Close() // the old file, now nameless: its lock no longer matters
	slices.SortFunc(moved, func(a, b loc) int { return cmp.Compare(a.seq, b.seq) })
	s.f, s.idx, s.size, s.liveBytes = nf, moved, w, w
	s.unmarked = nil
	s.maxLine = 0
	for _, l := range moved {
		s.maxLine = max(s.maxLine, int64(l.n+1))
	}
	if !s.noCompact {
		s.live = len(moved)
	}
	return nil
}

// restoreIdx makes the index the reports kept, after a compaction that failed put
// the moved ones back: those still where they were (stay) and the moved ones where
// they are now.
func (s *spoolFile) restoreIdx(moved, stay []loc) {
	idx := append(slices.Clone(stay), moved...)
	slices.SortStableFunc(idx, func(a, b loc) int { return cmp.Compare(a.seq, b.seq) })
	// A piece written to the new file whose cut from the old one failed is in both:
	// the index has each report once.
	s.idx = slices.CompactFunc(idx, func(a, b loc) bool { return a.seq == b.seq })
}

// compactFailed writes the done marks that the compaction would have made needless,
// so the reports dropped or delivered are not sent again, and returns err. The file
// keeps its size until a later compaction.
func (s *spoolFile) compactFailed(err error) error {
	if len(s.unmarked) > 0 {
		if werr := s.writeAcksOnly(s.unmarked); werr == nil {
			s.unmarked = nil
		}
	}
	return err
}

// writeAcksOnly writes the done marks of seqs, already counted done.
func (s *spoolFile) writeAcksOnly(seqs []uint64) error {
	line := appendAcks(nil, seqs)
	if _, err := s.f.WriteAt(line, s.size); err != nil {
		s.f.Truncate(s.size)
		return err
	}
	s.size += int64(len(line))
	return nil
}

// mergeCompacted is for a run adopting f (at path), whose whole lines
// end at size: a run killed while compacting left part of its reports in
// path.compact. It returns the new size.
func mergeCompacted(f *os.File, path string, size int64) (int64, error) {
	cf, err := os.OpenFile(path+".compact", os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return size, nil
	}
	if err != nil {
		return size, err
	}
	defer cf.Close()
	st, err := cf.Stat()
	if err != nil {
		return size, err
	}
	if size, err = mergeBack(f, size, cf, st.Size(), 1<<20, nil); err != nil {
		return size, err
	}
	return size, os.Remove(path + ".compact")
}

// mergeBack appends the whole lines of src (its first srcSize bytes) to dst (whose
// whole lines end at dstSize), taking them from src's end a piece at a time (at most
// chunk bytes, or one line) and cutting src short of each once dst has it on disk, so
// that the two never take more than they did and a piece. A torn last line of src (a
// write cut short) is dropped: a piece is cut from the old file only once written
// whole, so its lines are still there. moved, if set, is told each piece: src's
// [from, to) is now at dst's at. It returns dst's new size.
func mergeBack(dst *os.File, dstSize int64, src *os.File, srcSize, chunk int64, moved func(from, to, at int64)) (int64, error) {
	chunk = max(chunk, 4<<10)
	end, err := lastLineEnd(src, srcSize)
	if err != nil {
		return dstSize, err
	}
	var buf []byte
	for end > 0 {
		// The piece starts just after a newline (or at 0), at most chunk before end
		// unless one line is longer.
		from := end
		for span := chunk; ; span *= 2 {
			from = max(end-span, 0)
			buf = slices.Grow(buf[:0], int(end-from))[:end-from]
			if _, err := src.ReadAt(buf, from); err != nil && err != io.EOF {
				return dstSize, err
			}
			if from == 0 {
				break
			}
			// The newline before the piece's first whole line; not the piece's own
			// last byte, which ends it.
			if k := bytes.IndexByte(buf[:len(buf)-1], '\n'); k >= 0 {
				from += int64(k + 1)
				buf = buf[k+1:]
				break
			}
		}
		if _, err := dst.WriteAt(buf, dstSize); err != nil {
			dst.Truncate(dstSize)
			return dstSize, err
		}
		if err := dst.Sync(); err != nil {
			return dstSize, err
		}
		if moved != nil {
			moved(from, end, dstSize)
		}
		dstSize += int64(len(buf))
		if err := src.Truncate(from); err != nil {
			return dstSize, err
		}
		end = from
	}
	return dstSize, nil
}

// lastLineEnd is where the last whole line of f's first size bytes ends.
func lastLineEnd(f *os.File, size int64) (int64, error) {
	var buf [4 << 10]byte
	for end := size; end > 0; {
		from := max(end-int64(len(buf)), 0)
		b := buf[:end-from]
		if _, err := f.ReadAt(b, from); err != nil && err != io.EOF {
			return 0, err
		}
		if k := bytes.LastIndexByte(b, '\n'); k >= 0 {
			return from + int64(k) + 1, nil
		}
		end = from
	}
	return 0, nil
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
		if err := statedir.PrivateFile(f, log); err != nil {
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
		if _, err := os.Stat(path + ".compact"); err == nil {
			// Its run was killed while compacting it: part of its reports are in the
			// compaction's file.
			if _, err := mergeCompacted(f, path, size); err != nil {
				log.Warn("cannot put back the reports of a compaction cut short; they stay beside the spool file", "path", path, "err", err)
				f.Close()
				continue
			}
			if entries, size, err = scanSpool(f, server, id, log); err != nil {
				log.Warn("cannot read a spool file of an earlier run", "path", path, "err", err)
				f.Close()
				continue
			}
		}
		sf.size, sf.live = size, len(entries)
		for _, e := range entries {
			sf.idx = append(sf.idx, loc{seq: e.seq, off: e.off, n: e.n})
			sf.liveBytes += int64(e.n + 1)
			sf.maxLine = max(sf.maxLine, int64(e.n+1))
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
