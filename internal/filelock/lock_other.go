//go:build !unix && !windows

package filelock

import (
	"errors"
	"os"
)

// Open cannot lock on this platform, so it refuses: a spool without a lock could
// be adopted by another run while its owner still writes it. Reports are then kept in
// memory only.
func Open(path string, flag int) (*os.File, error) {
	return nil, &os.PathError{Op: "lock", Path: path, Err: errors.ErrUnsupported}
}

func SyncDir(string) {}
