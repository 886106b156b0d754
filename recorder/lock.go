package recorder

import (
	"os"

	"github.com/bir-dev/bir-proxy/internal/filelock"
)

// The spool's lock is internal/filelock's, shared with the OAuth token store.

var errLocked = filelock.ErrLocked

func openLocked(path string, flag int) (*os.File, error) { return filelock.Open(path, flag) }

func syncDir(dir string) { filelock.SyncDir(dir) }
