package mcpconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

const (
	oldText = "{\"mcpServers\": {\"a\": {\"command\": \"x\"}}}\n"
	newText = "{\"mcpServers\": {\"a\": {\"command\": \"/b/bir-proxy\", \"args\": [\"--server=a\", \"--\", \"x\"]}}}\n"
)

func writeConfig(t *testing.T, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), ".mcp.json")
	if err := os.WriteFile(path, []byte(oldText), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // umask
		t.Fatal(err)
	}
	return path
}

func assertFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s holds %q, want %q", path, got, want)
	}
}

// tempFiles lists what a writer left in dir besides the config.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var left []string
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); n != ".mcp.json" {
			left = append(left, n)
		}
	}
	return left
}

// testBackups is a backup store in a directory of its own, apart from the
// config's.
func testBackups(t *testing.T) Backups {
	return Backups{Dir: filepath.Join(t.TempDir(), "backups")}
}

func TestReplaceKeepsModeAndBackup(t *testing.T) {
	path := writeConfig(t, 0o640)
	bs := testBackups(t)
	saved, err := replacer{rename: os.Rename}.replace(path, []byte(oldText), []byte(newText), bs, "")
	if err != nil {
		t.Fatal(err)
	}
	assertFile(t, path, []byte(newText))
	assertFile(t, saved.Backup.Path, []byte(oldText))
	if !strings.HasPrefix(saved.Backup.Path, bs.Dir+string(filepath.Separator)) {
		t.Errorf("backup at %s, not in %s", saved.Backup.Path, bs.Dir)
	}
	if runtime.GOOS != "windows" {
		for p, want := range map[string]os.FileMode{path: 0o640, saved.Backup.Path: 0o600} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != want {
				t.Errorf("%s has mode %v, want %v", p, fi.Mode().Perm(), want)
			}
		}
	}
	if left := tempFiles(t, filepath.Dir(path)); len(left) > 0 {
		t.Errorf("left behind in the project: %q", left)
	}
}

func TestReplaceFailingRename(t *testing.T) {
	path := writeConfig(t, 0o600)
	failing := replacer{rename: func(from, to string) error {
		if to == path {
			return errors.New("injected rename failure")
		}
		return os.Rename(from, to)
	}}
	if _, err := failing.replace(path, []byte(oldText), []byte(newText), testBackups(t), ""); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("error %v", err)
	}
	assertFile(t, path, []byte(oldText))
	if left := tempFiles(t, filepath.Dir(path)); len(left) > 0 {
		t.Errorf("a failed write left %q behind", left)
	}
}

func TestReplaceRefuses(t *testing.T) {
	t.Run("read-only file", func(t *testing.T) {
		path := writeConfig(t, 0o444)
		_, err := replacer{rename: os.Rename}.replace(path, []byte(oldText), []byte(newText), testBackups(t), "")
		if err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Fatalf("error %v", err)
		}
		assertFile(t, path, []byte(oldText))
		if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
			t.Errorf("wrote something beside a read-only file: %v", ents)
		}
	})
	t.Run("changed since read", func(t *testing.T) {
		path := writeConfig(t, 0o600)
		theirs := []byte(`{"mcpServers": {}, "numStartups": 43}`)
		if err := os.WriteFile(path, theirs, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := replacer{rename: os.Rename}.replace(path, []byte(oldText), []byte(newText), testBackups(t), "")
		if err == nil || !strings.Contains(err.Error(), "changed since it was read") {
			t.Fatalf("error %v", err)
		}
		assertFile(t, path, theirs)
	})
}

func TestReplaceThroughSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	target := writeConfig(t, 0o600)
	link := filepath.Join(t.TempDir(), ".mcp.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := (replacer{rename: os.Rename}).replace(link, []byte(oldText), []byte(newText), testBackups(t), ""); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced by a file: %v %v", fi.Mode(), err)
	}
	assertFile(t, target, []byte(newText))
}

// TestMain runs the tests (failing a run that leaks a goroutine) or, in a child this
// test binary started, killedWriter.
func TestMain(m *testing.M) {
	testutil.MainWithHelpers(m, map[string]func([]string) int{"killed-writer": killedWriter})
}

// killedWriter replaces the config at args[0] with newText, keeping backups in
// args[1], and stops for good just before the rename that would publish it, saying
// "renaming TEMPFILE" on stdout.
func killedWriter(args []string) int {
	path := args[0]
	stopping := replacer{rename: func(from, to string) error {
		if to == path {
			os.Stdout.WriteString("renaming " + from + "\n")
			// Until killed. Not select{}: with every goroutine blocked the runtime
			// ends the process ("all goroutines are asleep"), and under load that
			// came before the kill ("os: process already finished").
			for {
				time.Sleep(time.Hour)
			}
		}
		return os.Rename(from, to)
	}}
	_, err := stopping.replace(path, []byte(oldText), []byte(newText), Backups{Dir: args[1]}, "")
	fmt.Fprintf(os.Stderr, "the writer was not stopped before its rename: %v\n", err)
	return 1
}

// TestReplaceKilledBeforeRename kills a real writer process after its
// temporary file is complete and before the rename that would publish it:
// the config must still hold the old bytes.
func TestReplaceKilledBeforeRename(t *testing.T) {
	path := writeConfig(t, 0o600)
	writer := testutil.Start(t, testutil.HelperCommand(t, "killed-writer", path, testBackups(t).Dir))
	line := writer.ReadLine()
	if !strings.HasPrefix(line, "renaming ") {
		t.Fatalf("the writer said %q", line)
	}
	if err := writer.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	writer.Wait()

	assertFile(t, path, []byte(oldText))
	// The kill came after the new version was fully on disk, so it is
	// the rename, not luck, that kept the old one.
	tmp := strings.TrimSpace(strings.TrimPrefix(line, "renaming "))
	assertFile(t, tmp, []byte(newText))

	// A later run is not disturbed by what the killed one left.
	if _, err := (replacer{rename: os.Rename}).replace(path, []byte(oldText), []byte(newText), testBackups(t), ""); err != nil {
		t.Fatal(err)
	}
	assertFile(t, path, []byte(newText))
}
