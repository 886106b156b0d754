//go:build !unix && !windows

package recorder

import (
	"errors"
	"os"
)

// openLocked cannot lock on this platform, so it refuses: a spool without a lock could
// be adopted by another run while its owner still writes it. Reports are then kept in
// memory only.
func openLocked(path string, flag int) (*os.File, error) {
	return nil, &os.PathError{Op: "lock", Path: path, Err: errors.ErrUnsupported}
}

func syncDir(string) {}
