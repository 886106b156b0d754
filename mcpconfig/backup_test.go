package mcpconfig

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// clock is a Now for Backups that moves forward by a second a call.
func clock() func() time.Time {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time { at = at.Add(time.Second); return at }
}

// TestBackupsSurviveAnySequence runs random sequences of wraps, unwraps and
// outside edits (the host rewriting the file) against a project file and
// the user file, with few backups kept: every backup is outside the project,
// mode 0600, and the oldest is always the file as it was before the first
// write.
func TestBackupsSurviveAnySequence(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 1))
			project := t.TempDir()
			bs := Backups{Dir: filepath.Join(t.TempDir(), "state", "backups"), Keep: 3, Now: clock()}
			orig := map[string]string{
				filepath.Join(project, ".mcp.json"):        `{"mcpServers": {"gh": {"command": "npx", "args": ["-y", "gh"], "env": {"TOKEN": "secret"}}}}`,
				filepath.Join(t.TempDir(), ".claude.json"): `{"mcpServers": {"u": {"command": "u"}}, "projects": {"/p": {"mcpServers": {"l": {"command": "l"}}}}}`,
			}
			var files []string
			for f, text := range orig {
				files = append(files, f)
				if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			writes := map[string]int{}
			for step := range 30 {
				f := files[r.IntN(len(files))]
				cur, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				loc := Location{File: f}
				if strings.HasSuffix(f, ".claude.json") && r.IntN(2) == 0 {
					loc.Project = "/p"
				}
				var c *Change
				switch r.IntN(3) {
				case 0:
					c, err = mustParse(t, loc, cur).Wrap(nil, testProxy)
				case 1:
					c, err = mustParse(t, loc, cur).Unwrap(nil)
				default: // someone else's edit, then ours
					next := strings.Replace(string(cur), `{"mcpServers"`, fmt.Sprintf(`{"n%d": 1, "mcpServers"`, step), 1)
					c = &Change{Location: Location{File: f}, Old: cur, New: []byte(next)}
				}
				if err != nil {
					t.Fatal(err)
				}
				if !c.Changed() {
					continue
				}
				c.Op = fmt.Sprint("step ", step)
				saved, err := c.Save(bs)
				if err != nil {
					t.Fatal(err)
				}
				writes[f]++
				if strings.HasPrefix(saved.Backup.Path, project) {
					t.Fatalf("a backup in the project: %s", saved.Backup.Path)
				}
			}
			for _, f := range files {
				list, err := bs.List(f)
				if err != nil {
					t.Fatal(err)
				}
				if want := min(writes[f], bs.Keep+1); len(list) != want {
					t.Errorf("%s: %d backups after %d writes, want %d", f, len(list), writes[f], want)
				}
				if len(list) == 0 {
					continue
				}
				if got := string(mustRead(t, list[0].Path)); got != orig[f] {
					t.Errorf("%s: the oldest backup is not the original:\n%s", f, got)
				}
				for _, bk := range list {
					if fi, err := os.Stat(bk.Path); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) {
						t.Errorf("%s: %v %v", bk.Path, fi.Mode(), err)
					}
					if !strings.HasPrefix(bk.Op, "step ") {
						t.Errorf("%s: op %q", bk.Path, bk.Op)
					}
				}
				// A pruned backup's op goes with it.
				ops, _ := filepath.Glob(filepath.Join(filepath.Dir(list[0].Path), "*"+opSuffix))
				if len(ops) != len(list) {
					t.Errorf("%s: %d op files for %d backups", f, len(ops), len(list))
				}
			}
			if ents, _ := os.ReadDir(project); len(ents) != 1 {
				t.Errorf("the project holds more than its config: %v", ents)
			}
			filepath.WalkDir(bs.Dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() && runtime.GOOS != "windows" {
					if fi, _ := d.Info(); fi.Mode().Perm() != 0o700 && p != filepath.Dir(bs.Dir) {
						t.Errorf("backup directory %s has mode %v", p, fi.Mode().Perm())
					}
				}
				return nil
			})
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRestore(t *testing.T) {
	path := writeConfig(t, 0o600)
	bs := Backups{Dir: t.TempDir(), Now: clock()}
	c, err := mustParse(t, Location{File: path}, []byte(oldText)).Wrap(nil, "/b/bir-proxy")
	if err != nil {
		t.Fatal(err)
	}
	saved, err := c.Save(bs)
	if err != nil {
		t.Fatal(err)
	}
	bk, ok, err := bs.Find(path, saved.Backup.ID[:10])
	if err != nil || !ok || bk.ID != saved.Backup.ID {
		t.Fatalf("Find by prefix: %+v %v %v", bk, ok, err)
	}
	r, err := Restore(bk)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Save(bs); err != nil {
		t.Fatal(err)
	}
	assertFile(t, path, []byte(oldText))
	// The version the restore replaced is a backup too.
	list, _ := bs.List(path)
	if len(list) != 2 || string(mustRead(t, list[1].Path)) != string(c.New) {
		t.Errorf("after restore: %+v", list)
	}
	if _, _, err := bs.Find(path, "2026"); err == nil {
		t.Error("an ambiguous prefix was accepted")
	}
	if _, ok, _ := bs.Find(path, "1999"); ok {
		t.Error("found a backup that is not there")
	}
}

// TestLegacyBackupMoved: the backup bir-proxy 0.1 left in the project moves
// to the state directory, dated by when it was written.
func TestLegacyBackupMoved(t *testing.T) {
	path := writeConfig(t, 0o600)
	legacy := path + legacyBackupSuffix
	if err := os.WriteFile(legacy, []byte("the older version"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(legacy, old, old); err != nil {
		t.Fatal(err)
	}
	bs := Backups{Dir: t.TempDir()}
	saved, err := (&Change{Location: Location{File: path}, Old: []byte(oldText), New: []byte(newText)}).Save(bs)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Moved != legacy {
		t.Errorf("moved %q", saved.Moved)
	}
	if _, err := os.Stat(legacy); err == nil {
		t.Error("the old backup is still in the project")
	}
	list, _ := bs.List(path)
	if len(list) != 2 || string(mustRead(t, list[0].Path)) != "the older version" || !list[0].Time.Equal(old) {
		t.Errorf("backups: %+v", list)
	}
}

// TestBackupFiles: Files names every file the store holds versions of, by its
// origin, and nothing else found in the store.
func TestBackupFiles(t *testing.T) {
	bs := Backups{Dir: filepath.Join(t.TempDir(), "backups"), Now: clock()}
	if got, err := bs.Files(); err != nil || got != nil {
		t.Fatalf("an empty store: %q %v", got, err)
	}
	dir := t.TempDir()
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	var want []string
	for _, rel := range []string{".gemini/settings.json", "b/.mcp.json"} {
		f := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		data := []byte(`{"mcpServers": {"a": {"command": "x"}}}`)
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := bs.save(replacer{rename: os.Rename}, f, data, bs.now(), "wrap"); err != nil {
			t.Fatal(err)
		}
		want = append(want, f)
	}
	// A directory whose origin names another file's path is not that file's.
	stray := filepath.Join(bs.Dir, "x-000000000000")
	if err := os.MkdirAll(stray, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stray, "origin"), []byte("/etc/passwd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := bs.Files()
	if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Files() = %q, %v; want %q", got, err, want)
	}
}
