//go:build unix

package recorder

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// nobody is a uid that is neither the test's nor root's.
const nobody = 65534

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, -1); err != nil {
		t.Skipf("cannot chown (not root?): %v", err)
	}
}

func mkdir(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, path, mode)
	return path
}

// A .bir/recorder.json that someone else could have written is not followed: it would
// send the register and every report (arguments, results) to a recorder of their
// choosing. A file owned by nobody, world-writable, in a 1777 directory used to be.
func TestDiscoverIgnoresUntrustedFile(t *testing.T) {
	const content = `{"url":"http://127.0.0.1:7001","token":"planted","pid":1}`
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, root string) (cwd string)
		says  string // the reason, in the error
	}{
		{"world-writable file", func(t *testing.T, root string) string {
			chmod(t, writeDiscovery(t, root, content), 0o666)
			return root
		}, "recorder.json is writable by others (mode 0666)"},
		{"group-writable file", func(t *testing.T, root string) string {
			chmod(t, writeDiscovery(t, root, content), 0o620)
			return root
		}, "writable by its group"},
		{"file owned by another user", func(t *testing.T, root string) string {
			chown(t, writeDiscovery(t, root, content), nobody)
			return root
		}, "is owned by uid 65534"},
		{".bir owned by another user", func(t *testing.T, root string) string {
			chown(t, filepath.Dir(writeDiscovery(t, root, content)), nobody)
			return root
		}, ".bir is owned by uid 65534"},
		{"in a 1777 directory", func(t *testing.T, root string) string {
			shared := mkdir(t, filepath.Join(root, "shared"), 0o777|os.ModeSticky)
			writeDiscovery(t, shared, content)
			return mkdir(t, filepath.Join(shared, "proj"), 0o755)
		}, "shared is writable by others (mode 1777)"},
		{"a writable directory between it and the working directory", func(t *testing.T, root string) string {
			writeDiscovery(t, root, content)
			mid := mkdir(t, filepath.Join(root, "mid"), 0o777)
			return mkdir(t, filepath.Join(mid, "proj"), 0o700)
		}, "mid is writable by others (mode 0777)"},
		{"a symbolic link", func(t *testing.T, root string) string {
			target := filepath.Join(root, "elsewhere.json")
			if err := os.WriteFile(target, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			mkdir(t, filepath.Join(root, ".bir"), 0o700)
			if err := os.Symlink(target, filepath.Join(root, ".bir", "recorder.json")); err != nil {
				t.Fatal(err)
			}
			return root
		}, "is a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cwd := tc.setup(t, t.TempDir())
			ep, err := Discover(DiscoverOptions{Dir: cwd})
			if err == nil || ep != nil {
				t.Fatalf("Discover trusted it: %+v, %v", ep, err)
			}
			if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "not trusted") {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			// With --recorder naming the same URL, its token is not taken either, and
			// the logger is told why.
			var logs testutil.SyncBuffer
			ep, err = Discover(DiscoverOptions{Flag: "http://127.0.0.1:7001", Dir: cwd, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil || ep == nil || ep.Token != "" {
				t.Errorf("with --recorder: %+v, %v", ep, err)
			}
			if !strings.Contains(logs.String(), tc.says) {
				t.Errorf("with --recorder, the log does not say %q: %s", tc.says, logs.String())
			}
		})
	}
}

// Files of the user or of root, in directories only they can write, are trusted: the
// test knob stands for a user who is not root.
func TestDiscoverTrustsOwnAndRootFiles(t *testing.T) {
	const content = `{"url":"http://127.0.0.1:7001","token":"t","pid":1}`
	user := 1000
	for _, owner := range []int{user, 0} {
		root := t.TempDir()
		file := writeDiscovery(t, root, content)
		deep := mkdir(t, filepath.Join(root, "a", "b"), 0o755)
		for _, p := range []string{file, filepath.Dir(file), root, filepath.Join(root, "a"), deep} {
			chown(t, p, owner)
		}
		ep, err := Discover(DiscoverOptions{Dir: deep, uid: &user})
		if err != nil || ep == nil || ep.Token != "t" {
			t.Errorf("owner %d: %+v, %v", owner, ep, err)
		}
	}
	root := t.TempDir()
	chown(t, writeDiscovery(t, root, content), nobody)
	if _, err := Discover(DiscoverOptions{Dir: root, uid: &user}); err == nil || !strings.Contains(err.Error(), "not by you (uid 1000) or root") {
		t.Errorf("a file of uid %d trusted by uid %d: %v", nobody, user, err)
	}
}

// A file trusted at start and made writable later is not read again: the re-read after
// a 401 checks as the first read did.
func TestReloadChecksTrustAgain(t *testing.T) {
	root := t.TempDir()
	file := writeDiscovery(t, root, `{"url":"http://127.0.0.1:7001","token":"t","pid":1}`)
	ep, err := Discover(DiscoverOptions{Dir: root})
	if err != nil || ep == nil {
		t.Fatalf("%+v, %v", ep, err)
	}
	chmod(t, file, 0o666)
	if _, err := ep.reload(); err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Errorf("reload of a now world-writable file: %v", err)
	}
}
