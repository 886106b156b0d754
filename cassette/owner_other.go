//go:build !unix

package cassette

import "io/fs"

// noFollow: no such open flag here; Create's Lstat refuses a link at the path.
const noFollow = 0

func fileOwner(fs.FileInfo) (int, bool) { return 0, false }
