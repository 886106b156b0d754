//go:build !unix

package statedir

import "io/fs"

// Owner knows no owner here.
func Owner(fs.FileInfo) (uid int, ok bool) { return 0, false }
