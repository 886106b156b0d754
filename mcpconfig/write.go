package mcpconfig

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// replacer replaces a file's contents atomically. rename is os.Rename
// outside tests, which make it fail or stop to show that the original
// survives either.
type replacer struct {
	rename func(oldpath, newpath string) error
}

// Saved is what Save did.
type Saved struct {
	Backup Backup // the copy of the previous version
	// Moved is an old bir-proxy backup that was beside the file (in the
	// project) and is now with the other backups; "" when there was none.
	Moved string
}

// replace writes data to path in place of old: the previous version as a
// backup in bs, then the new one through a temporary file in the same
// directory that is synced before it is renamed over the target. A crash at
// any point leaves the target either wholly old or wholly new, and the
// backup is complete before the target is touched.
func (r replacer) replace(path string, old, data []byte, bs Backups, op string) (saved Saved, err error) {
	// A symlinked config (dotfiles) is written where it points: renaming
	// over the link would replace it with a plain file.
	path, err = canonical(path)
	if err != nil {
		return Saved{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Saved{}, fmt.Errorf("writing MCP config: %w", err)
	}
	mode := fi.Mode().Perm()
	// The mode bit is checked, not just an open for writing: root may open
	// anything, and the rename would replace a read-only file regardless.
	if mode&0o200 == 0 {
		return Saved{}, fmt.Errorf("%s is read-only (mode %#o); nothing was written", path, mode)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return Saved{}, fmt.Errorf("%s cannot be written (%w); nothing was written", path, err)
	}
	f.Close()
	cur, err := os.ReadFile(path)
	if err != nil {
		return Saved{}, fmt.Errorf("writing MCP config: %w", err)
	}
	if !bytes.Equal(cur, old) {
		// Claude Code rewrites ~/.claude.json while it runs; writing our
		// copy now would throw its change away.
		return Saved{}, fmt.Errorf("%s changed since it was read (is the host running and writing it?); nothing was written, run the command again", path)
	}

	if saved.Moved, err = bs.importLegacy(r, path); err != nil {
		return Saved{}, fmt.Errorf("%w; nothing was written", err)
	}
	if saved.Backup, err = bs.save(r, path, old, bs.now(), op); err != nil {
		return saved, fmt.Errorf("keeping a backup of %s: %w; nothing was written", path, err)
	}
	if err := r.writeAtomic(path, data, mode); err != nil {
		return saved, fmt.Errorf("writing %s: %w; the file is unchanged", path, err)
	}
	return saved, nil
}

func (r replacer) writeAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// The file can hold tokens in env: the temp file never has looser
	// permissions than the original (CreateTemp makes it 0600).
	if err := tmp.Chmod(mode); err != nil && runtime.GOOS != "windows" {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := r.rename(tmp.Name(), path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable against power loss. It is best
// effort: the rename has happened by then, and reporting a failure would
// claim the file is unchanged when it is not. Windows cannot sync a
// directory and journals the rename itself.
func syncDir(dir string) {
	if runtime.GOOS == "windows" {
		return
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
