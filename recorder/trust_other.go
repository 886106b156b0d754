//go:build !unix

package recorder

// checkTrust trusts every discovery file where ownership and modes are not Unix ones
// (Windows: access is by ACL, and a user's profile is not writable by others by default).
func checkTrust(path, dir string, uid int) error { return nil }
