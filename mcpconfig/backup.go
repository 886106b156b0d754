package mcpconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/internal/regular"
)

// DefaultKeep is how many of the latest backups of one config file are kept,
// besides the oldest.
const DefaultKeep = 20

// backupIDLayout names a backup by the UTC time of the write it preceded.
// It sorts as text in time order, and has no character a shell or a file
// system minds.
const backupIDLayout = "20060102T150405.000000000Z"

// legacyBackupSuffix is where bir-proxy 0.1 kept one backup, beside the
// config file: in the project, with the file's mode and its secrets, and
// overwritten by every write. Save moves such a file into Backups.
const legacyBackupSuffix = ".bir-proxy.bak"

// Backups keeps the earlier versions of config files, one per write, in a
// directory of the user's own (bir-proxy's state directory), never beside
// the file: a project's .mcp.json is usually committed, and its env holds
// tokens. Each config file has a subdirectory; each backup is a file named
// by its ID, mode 0600. The oldest backup of a file is always kept (it is
// the version from before bir-proxy first wrote the file), and so are the
// Keep latest.
type Backups struct {
	Dir  string
	Keep int              // 0: DefaultKeep
	Now  func() time.Time // nil: time.Now
}

// Backup is one kept version of a config file.
type Backup struct {
	ID   string // the UTC time of the write it was taken before
	File string // the config file, symlinks resolved
	Path string // where the copy is
	Time time.Time
	Size int64
	// Op is the write it was taken before, as that write's Change.Op said
	// ("wrap", "unwrap github", "unwrap --restore ID"); "" when a bir-proxy
	// older than the record wrote it.
	Op string
}

// opSuffix ends the name of the file beside a backup that says which write it
// was taken before (Backup.Op).
const opSuffix = ".op"

// maxOp bounds what is read of an op file.
const maxOp = 512

// legacyOp is the Op of the backup bir-proxy 0.1 kept beside the file.
const legacyOp = "kept beside the file by bir-proxy 0.1"

// dirFor is the directory of file's backups: its base name, for a person
// looking, and a hash of its whole path, so that every project's .mcp.json
// has its own. The path is written beside the backups as "origin".
func (b Backups) dirFor(file string) string {
	sum := sha256.Sum256([]byte(file))
	base := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' || r < ' ' {
			return '_'
		}
		return r
	}, filepath.Base(file))
	return filepath.Join(b.Dir, base+"-"+hex.EncodeToString(sum[:6]))
}

// canonical is file as backups are keyed: absolute, symlinks resolved (a
// dotfiles link and its target are one file).
func canonical(file string) (string, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", fmt.Errorf("finding %s: %w", file, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return abs, nil
}

func (b Backups) now() time.Time {
	if b.Now != nil {
		return b.Now().UTC()
	}
	return time.Now().UTC()
}

// save keeps data as the newest backup of file (already canonical) and
// prunes the old ones. The copy is on disk (synced) before it returns.
func (b Backups) save(r replacer, file string, data []byte, at time.Time, op string) (Backup, error) {
	if b.Dir == "" {
		return Backup{}, errors.New("no backup directory")
	}
	dir := b.dirFor(file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Backup{}, fmt.Errorf("creating the backup directory: %w", err)
	}
	origin := filepath.Join(dir, "origin")
	if cur, err := os.ReadFile(origin); err != nil || string(cur) != file+"\n" {
		if err := r.writeAtomic(origin, []byte(file+"\n"), 0o600); err != nil {
			return Backup{}, fmt.Errorf("writing %s: %w", origin, err)
		}
	}
	// Two writes within one clock tick (or a coarse clock) still get a
	// backup each.
	var id, path string
	for {
		id = at.Format(backupIDLayout)
		path = filepath.Join(dir, id+".json")
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			break
		}
		at = at.Add(time.Nanosecond)
	}
	if err := r.writeAtomic(path, data, 0o600); err != nil {
		return Backup{}, err
	}
	if op != "" {
		// Best effort, after the backup: a backup without its op is listed
		// without it.
		_ = r.writeAtomic(filepath.Join(dir, id+opSuffix), []byte(op), 0o600)
	}
	b.prune(file)
	return Backup{ID: id, File: file, Path: path, Time: at, Size: int64(len(data)), Op: op}, nil
}

// prune removes all but the oldest and the Keep latest backups of file. It
// is best effort: a backup too many is no harm.
func (b Backups) prune(file string) {
	list, err := b.List(file)
	if err != nil {
		return
	}
	keep := b.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	for i := 1; i < len(list)-keep; i++ {
		os.Remove(list[i].Path)
		os.Remove(strings.TrimSuffix(list[i].Path, ".json") + opSuffix)
	}
}

// List is file's backups, oldest first.
func (b Backups) List(file string) ([]Backup, error) {
	file, err := canonical(file)
	if err != nil {
		return nil, err
	}
	dir := b.dirFor(file)
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the backups of %s: %w", file, err)
	}
	var out []Backup
	for _, de := range des {
		id, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || !de.Type().IsRegular() {
			continue // "origin", a temporary file of a write under way
		}
		at, err := time.Parse(backupIDLayout, id)
		if err != nil {
			continue
		}
		bk := Backup{ID: id, File: file, Path: filepath.Join(dir, de.Name()), Time: at}
		if fi, err := de.Info(); err == nil {
			bk.Size = fi.Size()
		}
		bk.Op = readOp(filepath.Join(dir, id+opSuffix))
		out = append(out, bk)
	}
	slices.SortFunc(out, func(a, b Backup) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// readOp is what the op file at path says, "" when there is none; at most maxOp
// bytes of it, as valid UTF-8.
func readOp(path string) string {
	// A FIFO put there blocked open(2), and the listing, for ever: opened without
	// blocking, and only a regular file is read.
	f, _, err := regular.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxOp))
	return strings.ToValidUTF8(strings.TrimSpace(string(b)), "?")
}

// Find is the backup of file whose ID is id or starts with it, as a
// person types part of one.
func (b Backups) Find(file, id string) (Backup, bool, error) {
	list, err := b.List(file)
	if err != nil {
		return Backup{}, false, err
	}
	var found []Backup
	for _, bk := range list {
		if bk.ID == id {
			return bk, true, nil
		}
		if id != "" && strings.HasPrefix(bk.ID, id) {
			found = append(found, bk)
		}
	}
	if len(found) > 1 {
		return Backup{}, false, fmt.Errorf("%q matches %d backups of %s; give more of the ID", id, len(found), file)
	}
	if len(found) == 1 {
		return found[0], true, nil
	}
	return Backup{}, false, nil
}

// Restore is the change that puts bk back as its file's contents. Saving it
// keeps the current version as a backup first, so a restore can itself be
// undone.
func Restore(bk Backup) (*Change, error) {
	data, err := os.ReadFile(bk.Path)
	if err != nil {
		return nil, fmt.Errorf("reading the backup %s: %w", bk.ID, err)
	}
	cur, err := os.ReadFile(bk.File)
	if err != nil {
		return nil, fmt.Errorf("reading MCP config: %w", err)
	}
	return &Change{Location: Location{File: bk.File}, Old: cur, New: data}, nil
}

// importLegacy moves a backup bir-proxy 0.1 left beside file into b, named
// for the time it was written. It returns where it was, or "" when there
// was none.
func (b Backups) importLegacy(r replacer, file string) (string, error) {
	legacy := file + legacyBackupSuffix
	fi, err := os.Lstat(legacy)
	if err != nil || !fi.Mode().IsRegular() {
		return "", nil
	}
	data, err := os.ReadFile(legacy)
	if err != nil {
		return "", fmt.Errorf("reading the old backup %s: %w", legacy, err)
	}
	if _, err := b.save(r, file, data, fi.ModTime().UTC(), legacyOp); err != nil {
		return "", fmt.Errorf("moving the old backup %s: %w", legacy, err)
	}
	if err := os.Remove(legacy); err != nil {
		return "", fmt.Errorf("removing the old backup %s (a copy is kept with the other backups): %w", legacy, err)
	}
	return legacy, nil
}

// Files are the config files b holds backups of (each as its "origin" names
// it), sorted: the files bir-proxy has written, wherever they are.
func (b Backups) Files() ([]string, error) {
	if b.Dir == "" {
		return nil, nil
	}
	des, err := os.ReadDir(b.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the backups: %w", err)
	}
	var out []string
	for _, de := range des {
		if !de.IsDir() {
			continue
		}
		origin, err := os.ReadFile(filepath.Join(b.Dir, de.Name(), "origin"))
		if err != nil {
			continue
		}
		// A directory is the file's only if its name is the one dirFor gives it.
		if f := strings.TrimSuffix(string(origin), "\n"); f != "" && b.dirFor(f) == filepath.Join(b.Dir, de.Name()) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out, nil
}
