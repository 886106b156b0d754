package statedir

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
)

// Reports carry arguments and results, redacted or not, so every directory and file
// that holds them (the spool, the journal) is the user's alone: 0700 and 0600.
// MkdirAll and OpenFile only apply a mode to what they create, so a journal or spool
// left 0777/0666 (by an older version, a umask, a hand) kept it: readable, and
// replaceable, by anyone. These tighten what already exists, with a warning, and refuse
// what another user owns, whose owner could read every report written to it whatever
// its mode.
//
// On Windows modes are not how access is decided (ACLs are), so nothing is checked.

// PrivateDir makes dir (mode 0700) if it is missing, and tightens it to 0700 if it is
// open to others.
func PrivateDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	return tighten(dir, st, 0o700, func(m fs.FileMode) error { return os.Chmod(dir, m) }, log)
}

// PrivateFile tightens an open file of reports to 0600.
func PrivateFile(f *os.File, log *slog.Logger) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return tighten(f.Name(), st, 0o600, f.Chmod, log)
}

func tighten(path string, st fs.FileInfo, want fs.FileMode, chmod func(fs.FileMode) error, log *slog.Logger) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	if owner, ok := Owner(st); ok && owner != os.Getuid() && owner != 0 {
		return fmt.Errorf("%s is owned by uid %d, not by you (uid %d): its owner could read every report", path, owner, os.Getuid())
	}
	was := st.Mode().Perm()
	if was&0o077 == 0 {
		return nil
	}
	if err := chmod(want); err != nil {
		return fmt.Errorf("tighten the mode of %s (now %04o; others can read the reports in it): %w", path, was, err)
	}
	log.Warn("tightened the mode of a file of reports: others could read them", "path", path,
		"was", fmt.Sprintf("%04o", was), "now", fmt.Sprintf("%04o", want))
	return nil
}

// WarnIfShared says when a directory the user chose for the journal (--journal) can be
// written by others: it is theirs to change, not ours, but anyone who can write it can
// replace the journal.
func WarnIfShared(dir string, log *slog.Logger) {
	st, err := os.Stat(dir)
	if err != nil || runtime.GOOS == "windows" {
		return
	}
	if st.Mode().Perm()&0o022 != 0 && st.Mode()&fs.ModeSticky == 0 {
		log.Warn("the journal's directory is writable by others: others can replace the journal", "dir", dir,
			"mode", fmt.Sprintf("%04o", st.Mode().Perm()))
	}
}
