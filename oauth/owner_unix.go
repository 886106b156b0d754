//go:build unix

package oauth

import (
	"io/fs"
	"syscall"
)

// noFollow makes an open fail on a symbolic link: the store never reads or writes
// through one planted in its directory.
const noFollow = syscall.O_NOFOLLOW

// fileOwner returns the uid that owns fi's file.
func fileOwner(fi fs.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
