//go:build unix

package recorder

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/bir-dev/bir-proxy/internal/statedir"
)

// checkTrust says why the discovery file at path, found from the working directory
// dir, must not be followed, or returns nil. As ssh does with its own files, the file,
// its .bir directory, the directory holding that, and every directory from there down
// to dir must be owned by uid or root and writable by no one else. Anyone who can write
// one of them can point the proxy at a recorder of their choosing, which then gets the
// register and every report (arguments and results included). A world-writable
// directory on that path is refused even with the sticky bit (a 1777 /tmp): anyone may
// create the file there first.
func checkTrust(path, dir string, uid int) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link", path)
	}
	if err := ownedSafely(path, fi, uid); err != nil {
		return err
	}
	bir := filepath.Dir(path)
	top := filepath.Dir(bir)
	for d := bir; ; {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if err := ownedSafely(d, st, uid); err != nil {
			return err
		}
		if d == bir {
			d = filepath.Clean(dir)
			continue
		}
		parent := filepath.Dir(d)
		if d == top || parent == d {
			return nil
		}
		d = parent
	}
}

func ownedSafely(path string, fi fs.FileInfo, uid int) error {
	if owner, ok := statedir.Owner(fi); ok && owner != uid && owner != 0 {
		return fmt.Errorf("%s is owned by uid %d, not by you (uid %d) or root", path, owner, uid)
	}
	perm := fi.Mode().Perm()
	if perm&0o022 == 0 {
		return nil
	}
	who := "its group"
	if perm&0o002 != 0 {
		who = "others"
	}
	mode := uint32(perm)
	if fi.Mode()&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return fmt.Errorf("%s is writable by %s (mode %04o)", path, who, mode)
}
