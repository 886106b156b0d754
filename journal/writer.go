package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strconv"

	"github.com/bir-dev/bir-proxy/internal/statedir"
)

// Journal size bounds, by default: a proxy people leave on all day must not fill the
// disk with reports nobody reads.
const (
	DefaultMaxBytes = 64 << 20
	DefaultKeep     = 3
)

// Rotated is the name of the n-th older file of the journal at path (1 is the most
// recent): path + ".1", ".2", ... `bir-proxy log` reads them oldest first.
func Rotated(path string, n int) string { return path + "." + strconv.Itoa(n) }

// Writer appends report lines to the journal file, and rotates it once it holds
// maxBytes: the file becomes path.1 (path.1 becomes path.2, and so on, keeping keep of
// them) and a new one is started. Several proxies of one server share the file: each
// checks before a write whether another has rotated it, and reopens.
type Writer struct {
	path     string
	maxBytes int64
	keep     int
	log      *slog.Logger

	f    *os.File
	size int64 // the file's size after our last write (others append too)
}

// Open opens the journal at path for appending: rotated at maxBytes (0:
// DefaultMaxBytes), keeping keep older files (0: DefaultKeep). Every file of it is made
// the user's alone (statedir.PrivateFile); its directory must exist.
func Open(path string, maxBytes int64, keep int, log *slog.Logger) (*Writer, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if keep <= 0 {
		keep = DefaultKeep
	}
	if log == nil {
		log = slog.Default()
	}
	j := &Writer{path: path, maxBytes: maxBytes, keep: keep, log: log}
	if err := j.open(); err != nil {
		return nil, err
	}
	return j, nil
}

func (j *Writer) open() error {
	// O_APPEND and one write per run of whole lines: proxies sharing the file must not
	// cut into each other's lines.
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	// Every file of the rotation, not only the first: each holds reports.
	if err := statedir.PrivateFile(f, j.log); err != nil {
		f.Close()
		return fmt.Errorf("open journal: %w", err)
	}
	if st, err := f.Stat(); err == nil {
		j.size = st.Size()
	}
	j.f = f
	return nil
}

// Write appends buf, a run of whole lines, rotating first when another proxy has
// rotated the file, and between lines wherever the file would pass maxBytes.
func (j *Writer) Write(buf []byte) error {
	if st, err := os.Stat(j.path); err == nil {
		if mine, err := j.f.Stat(); err == nil && !os.SameFile(st, mine) {
			// Another proxy rotated it: lines written to our file now would land in an
			// older file, out of order with the new one.
			j.reopen()
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		j.reopen() // removed under us: start it again rather than write to nothing
	}
	for len(buf) > 0 {
		n := len(buf)
		if room := j.maxBytes - j.size; int64(n) > room {
			// The whole lines that fit; none fit: a new file, where at least one goes.
			n = 0
			if room > 0 {
				n = bytes.LastIndexByte(buf[:room], '\n') + 1
			}
			if n == 0 {
				if j.size > 0 {
					j.rotate()
					continue
				}
				n = bytes.IndexByte(buf, '\n') + 1 // one line larger than the bound
				if n == 0 {
					n = len(buf)
				}
			}
		}
		if _, err := j.f.Write(buf[:n]); err != nil {
			return err
		}
		j.size += int64(n)
		buf = buf[n:]
	}
	return nil
}

// rotate shifts the files and starts a new one. A failure leaves the proxy writing
// where it was: reports matter more than the bound.
func (j *Writer) rotate() {
	// Only if the file at path is still ours: another proxy may have rotated it since our
	// last write, and rotating again would push its fresh file out of the way.
	st, err := os.Stat(j.path)
	mine, err2 := j.f.Stat()
	if err != nil || err2 != nil || !os.SameFile(st, mine) {
		j.reopen()
		return
	}
	if err := os.Remove(Rotated(j.path, j.keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		j.log.Warn("cannot remove the oldest journal file", "err", err)
	}
	for n := j.keep - 1; n >= 1; n-- {
		if err := os.Rename(Rotated(j.path, n), Rotated(j.path, n+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			j.log.Warn("cannot rotate the journal", "err", err)
		}
	}
	if err := os.Rename(j.path, Rotated(j.path, 1)); err != nil {
		j.log.Warn("cannot rotate the journal; it keeps growing", "err", err)
		j.size = 0 // try again in maxBytes, not at every write
		return
	}
	j.reopen()
}

func (j *Writer) reopen() {
	old := j.f
	if err := j.open(); err != nil {
		j.log.Warn("cannot open the journal again; writing to the old file", "err", err)
		return
	}
	old.Close()
}

// Sync flushes what was written to the disk.
func (j *Writer) Sync() error { return j.f.Sync() }

// Close closes the file being written.
func (j *Writer) Close() error { return j.f.Close() }
