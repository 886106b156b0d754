//go:build !unix

package oauth

import "io/fs"

// noFollow: no such open flag here.
const noFollow = 0

// fileOwner knows no owner here: on Windows access is by ACL, and a user's profile
// is not open to others by default (recorder/trust_other.go makes the same choice).
func fileOwner(fs.FileInfo) (uid int, ok bool) { return 0, false }
