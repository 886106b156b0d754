//go:build unix

package cassette

import (
	"io/fs"
	"syscall"
)

// noFollow makes an open fail on a symbolic link: a link planted at the cassette's
// path (dangling, to a file, to a folder) was followed, and the proxy wrote and
// chmodded what it pointed to.
const noFollow = syscall.O_NOFOLLOW

// fileOwner returns the uid that owns fi's file.
func fileOwner(fi fs.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
