// Package filelock is the one advisory file lock of bir-proxy: an exclusive lock
// held for as long as a file stays open, released by the kernel when its process
// dies (so a crashed holder never leaves a stale lock). The recorder's spool and the
// OAuth token store both use it.
package filelock

import (
	"context"
	"errors"
	"os"
	"time"
)

// ErrLocked is Open's error when another open file holds the lock.
var ErrLocked = errors.New("locked by another process")

// Wait opens path (created 0600 if missing) and waits, until ctx ends, for its lock.
// The lock is held until the returned file is closed. The wait polls: flock's
// blocking form cannot be interrupted by a context, and a waiter that cannot be
// stopped would hold a proxy's exit.
func Wait(ctx context.Context, path string) (*os.File, error) {
	delay := 5 * time.Millisecond
	for {
		f, err := Open(path, os.O_RDWR|os.O_CREATE)
		if !errors.Is(err, ErrLocked) {
			return f, err
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}
