package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/bir-dev/bir-proxy/internal/regular"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/tidwall/gjson"
)

// MaxLine is the longest line a Reader returns (a report is capped at 64 KiB when
// written); a longer one is skipped and counted (Reader.Long).
const MaxLine = 16 << 20

// Kind is what one line of a journal or spool file holds.
type Kind uint8

const (
	// KindReport is a call's step report: report.Step, SPEC §5.
	KindReport Kind = iota
	// KindAck is a spool file's done mark, {"ack":SEQ}: the recorder took report SEQ
	// (Record.Ack). The journal has none.
	KindAck
	// KindDrift is a tool's drift from its pin (Drift): not a call.
	KindDrift
	// KindOther is a record that is not a call, of a kind this reader does not know:
	// it carries an "ack" member that is not a number. Readers skip it.
	KindOther
	// KindBroken is a line that is not JSON: a proxy killed while writing it, or a
	// hand. Readers skip it.
	KindBroken
)

// Record is one line of a journal or spool file, as a Reader returns it.
type Record struct {
	Kind Kind
	// Line is the JSON line, without its line end. It is the Reader's buffer: valid
	// until the next call of Next.
	Line []byte
	// Ack is the seq a done mark (KindAck) acknowledges.
	Ack uint64
}

// Classify says what a line holds. A report is any JSON object without an "ack"
// member: a line of an older version that was not a report always carried one.
func Classify(line []byte) Record {
	r := Record{Kind: KindReport, Line: line}
	if !gjson.ValidBytes(line) {
		r.Kind = KindBroken
		return r
	}
	if ack := gjson.GetBytes(line, "ack"); ack.Exists() {
		r.Kind = kindOf(line)
		if ack.Type == gjson.Number {
			r.Kind, r.Ack = KindAck, ack.Uint()
		}
	}
	return r
}

// Step decodes a report (KindReport).
func (r Record) Step() (report.Step, error) {
	var st report.Step
	err := json.Unmarshal(r.Line, &st)
	return st, err
}

// Reader reads the whole lines of one journal or spool file, from where it last
// stopped: a line still being written (no newline yet) is left for a later Next, so
// a Reader can follow a file that grows. A journal rotated under it (the file at its
// path is another one, and the one it was reading is now path.1) is read to its end
// in path.1 before the new file is begun. Not safe for concurrent use.
type Reader struct {
	path  string
	spool bool // a spool file: never rotated; one smaller than what was read was compacted

	off  int64       // the end of the whole lines read, in the file of file
	file os.FileInfo // what was at path when off was taken; nil before the first read

	f      *os.File
	br     *bufio.Reader
	next   *os.File // after a rotation: the new file at path, begun when f (path.1) ends
	nextSt os.FileInfo
	buf    []byte
	lineNo int // whole lines read in the file being read, when read from its start

	// Long counts the lines over MaxLine that were skipped.
	Long int
}

// NewReader reads the journal at path (spool: a spool file, which is not rotated
// but may be compacted: when it is shorter than what was read, it is read again from
// its start). A file that is not there reads as empty.
func NewReader(path string, spool bool) *Reader { return &Reader{path: path, spool: spool} }

// Path is the file the Reader reads.
func (r *Reader) Path() string { return r.path }

// Next returns the next whole line, classified, skipping empty lines and those over
// MaxLine; io.EOF at the end of what is written. After io.EOF the file is closed, and
// a later Next reads what was written since.
func (r *Reader) Next() (Record, error) {
	for {
		if r.br == nil {
			ok, err := r.open()
			if err != nil {
				return Record{}, err
			}
			if !ok {
				return Record{}, io.EOF
			}
		}
		line, n, err := r.readLine()
		if err == io.EOF {
			if r.next != nil {
				// The rotated file is read: on to the new one, from its start.
				r.f.Close()
				r.f, r.file, r.off, r.next, r.lineNo = r.next, r.nextSt, 0, nil, 0
				r.br.Reset(r.f)
				continue
			}
			r.Close()
			return Record{}, io.EOF
		}
		if err != nil {
			r.Close()
			return Record{}, fmt.Errorf("reading %s: %w", r.path, err)
		}
		r.off += int64(n)
		r.lineNo++
		if line == nil {
			r.Long++
			continue
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		return Classify(line), nil
	}
}

// Line is the number of the line Next returned last, in its file, counting from 1 at
// the file's start (for messages: meaningful when the Reader started there).
func (r *Reader) Line() int { return r.lineNo }

// Close closes the file being read, if any; a later Next opens it again.
func (r *Reader) Close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	if r.next != nil {
		r.next.Close()
		r.next = nil
	}
	r.br = nil
}

// ErrNotFile is the error for a journal path that is not a regular file.
var ErrNotFile = regular.ErrNotRegular

// openFile opens path for reading, refusing what is not a regular file: a FIFO
// blocked open(2) until a writer came, and /dev/zero (a link to it, put at a
// journal's path) was read for ever.
func openFile(path string) (*os.File, os.FileInfo, error) { return regular.Open(path) }

// open opens the file at path where the last read ended; false when there is none.
func (r *Reader) open() (bool, error) {
	f, st, err := openFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // not written yet, or removed (a spool file delivered)
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", r.path, err)
	}
	if r.file != nil && !r.spool && !os.SameFile(r.file, st) {
		// Rotated: what was written to the old file since the last read is now in
		// path.1; it is finished before the new one is started.
		r.off = r.rotatedFrom(f, st, r.off)
		if r.next != nil {
			f, st = r.f, r.file
		}
	}
	if st.Size() < r.off {
		r.off = 0 // truncated (a compacted spool file) or replaced: start over
	}
	if r.off == 0 {
		r.lineNo = 0
	}
	if _, err := f.Seek(r.off, io.SeekStart); err != nil {
		f.Close()
		return false, fmt.Errorf("reading %s: %w", r.path, err)
	}
	r.f, r.file = f, st
	if r.br == nil {
		r.br = bufio.NewReaderSize(f, 64<<10)
	} else {
		r.br.Reset(f)
	}
	return true, nil
}

// rotatedFrom sets the reader up to finish the rotated file (path.1) from off, then
// the new one (f); it returns where to read from. When path.1 is not the file that
// was being read, the new one is read from its start.
func (r *Reader) rotatedFrom(f *os.File, st os.FileInfo, off int64) int64 {
	old, ost, err := openFile(Rotated(r.path, 1))
	if err != nil {
		return 0
	}
	if !os.SameFile(r.file, ost) {
		old.Close()
		return 0
	}
	r.f, r.file, r.next, r.nextSt = old, ost, f, st
	return off
}

// readLine reads one line with its newline, returning it and the bytes it took;
// nil (and its length) for a line over MaxLine, which is read past holding at most
// MaxLine. io.EOF for a line not ended yet: it is left for the next read.
func (r *Reader) readLine() ([]byte, int, error) {
	chunk, err := r.br.ReadSlice('\n')
	if err == nil {
		return chunk, len(chunk), nil // the usual line: the reader's own buffer
	}
	r.buf = r.buf[:0]
	if cap(r.buf) > 1<<20 {
		r.buf = nil // one long line's buffer is not kept for every short one after
	}
	n, over := 0, false
	for {
		n += len(chunk)
		if !over {
			if len(r.buf)+len(chunk) > MaxLine {
				over, r.buf = true, nil
			} else {
				r.buf = append(r.buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			chunk, err = r.br.ReadSlice('\n')
			continue // the line goes on
		case err != nil:
			return nil, 0, err // io.EOF: a line not yet ended
		}
		if over {
			return nil, n, nil
		}
		return r.buf, n, nil
	}
}

// tailChunk is how much of a file Tail reads at a time, from the end.
const tailChunk = 64 << 10

// Tail returns the last want lines of the file for which keep is true (called for
// reports and the records not calls that this version knows: Drift), oldest first, reading the file backwards: `log -n 5` on a 100 MB
// journal reads a block or two, not all of it into memory. A later Next starts at the
// end of the file's whole lines (a line still being written is left for it).
func (r *Reader) Tail(want int, keep func(Record) bool) ([][]byte, error) {
	f, st, err := openFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", r.path, err)
	}
	defer f.Close()
	pos, end := st.Size(), int64(-1)
	// The pieces of a line whose start is before pos, the last piece first. They are
	// kept apart and joined once, when its start is met: a 100 MB line was copied
	// again with every 64 KiB chunk before it (minutes, for `log -n 5`). One over
	// MaxLine is dropped as it grows (long), and skipped when its start is met.
	var carry [][]byte
	carryLen, long := 0, false
	var rev [][]byte // newest first
	for pos > 0 && len(rev) < want {
		n := min(tailChunk, pos)
		pos -= n
		data := make([]byte, n)
		if _, err := f.ReadAt(data, pos); err != nil {
			return nil, fmt.Errorf("reading %s: %w", r.path, err)
		}
		if end < 0 {
			i := bytes.LastIndexByte(data, '\n')
			if i < 0 {
				continue // no whole line yet: what is here is a line still being written
			}
			end = pos + int64(i) + 1
			data = data[:i]
		}
		// data ends where a line ends, without its newline (or where carry begins);
		// its first part may be the end of a line that starts before pos.
		parts := bytes.Split(data, []byte("\n"))
		for k := len(parts) - 1; k >= 0 && len(rev) < want; k-- {
			part := parts[k]
			if k == 0 && pos > 0 {
				if !long {
					carry, carryLen = append(carry, part), carryLen+len(part)
					if carryLen > MaxLine {
						carry, carryLen, long = nil, 0, true
					}
				}
				break
			}
			if k == len(parts)-1 && (long || len(carry) > 0) {
				// Over MaxLine with its newline, as Next counts it: skipped.
				skip := long || len(part)+carryLen+1 > MaxLine
				if !skip {
					whole := make([]byte, 0, len(part)+carryLen)
					whole = append(whole, part...)
					for i := len(carry) - 1; i >= 0; i-- {
						whole = append(whole, carry[i]...)
					}
					part = whole
				}
				carry, carryLen, long = nil, 0, false
				if skip {
					r.Long++
					continue
				}
			}
			line := bytes.TrimRight(part, "\r")
			if len(line) == 0 {
				continue
			}
			if rec := Classify(line); (rec.Kind == KindReport || rec.Kind == KindDrift) && keep(rec) {
				rev = append(rev, bytes.Clone(line))
			}
		}
	}
	if end < 0 {
		end = 0 // no whole line yet
	}
	r.Close()
	r.off, r.file, r.next = end, st, nil
	slices.Reverse(rev)
	return rev, nil
}
