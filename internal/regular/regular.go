// Package regular opens files that must be regular files: a journal, a cassette in
// a folder, a backup's label. A FIFO put at such a path blocked open(2) until a
// writer came (for ever: `log`, `verify DIR` and `unwrap --restore` hung), and a
// link to /dev/zero was read for ever; Open returns at once and refuses both.
package regular

import (
	"errors"
	"io/fs"
	"os"
)

// ErrNotRegular is Open's error for a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading without waiting for a FIFO's writer, and refuses what
// is not a regular file (ErrNotRegular) after closing it.
func Open(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNonBlock, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = ErrNotRegular
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// OpenNoWait opens path for reading as os.Open does, whatever it is, but without
// waiting for a FIFO's writer: a FIFO that has none reads as empty. (A cassette named
// on verify's command line may be a pipe, <(…); a FIFO with no writer blocked it in
// open(2) for ever, SIGTERM or not.)
func OpenNoWait(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|oNonBlock, 0)
}
