//go:build unix

package statedir

import (
	"io/fs"
	"syscall"
)

// Owner returns the uid that owns fi's file.
func Owner(fi fs.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
