//go:build unix

package oauth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStoreDoesNotWriteThroughSymlinks: symbolic links planted where the store
// writes — the pending URL's old fixed temporary name, the pending file, the entry
// itself — are replaced or left alone, never written through: the files they point
// to are unchanged.
func TestStoreDoesNotWriteThroughSymlinks(t *testing.T) {
	st, err := OpenStore(filepath.Join(t.TempDir(), "oauth"))
	if err != nil {
		t.Fatal(err)
	}
	const u = "https://h.example/mcp"
	victims := t.TempDir()
	plant := func(name string) string {
		v := filepath.Join(victims, filepath.Base(name))
		if err := os.WriteFile(v, []byte("precious"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(v, name); err != nil {
			t.Fatal(err)
		}
		return v
	}
	unchanged := func(v string) {
		t.Helper()
		if b, err := os.ReadFile(v); err != nil || string(b) != "precious" {
			t.Errorf("%s, which a planted link pointed to, is now %q (%v)", v, b, err)
		}
	}
	tmpVictim := plant(st.base(u) + ".pending.tmp")
	st.setPending(u, "https://as.example/authorize?state=1")
	unchanged(tmpVictim)
	if p := st.pending(u); p != "https://as.example/authorize?state=1" {
		t.Errorf("pending = %q", p)
	}
	st.setPending(u, "")

	pendingVictim := plant(st.base(u) + ".pending")
	if p := st.pending(u); p != "" {
		t.Errorf("pending read %q through a planted link", p)
	}
	st.setPending(u, "https://as.example/authorize?state=2")
	unchanged(pendingVictim)
	if p := st.pending(u); p != "https://as.example/authorize?state=2" {
		t.Errorf("pending = %q", p)
	}

	entryVictim := plant(st.base(u) + ".json")
	if e, err := st.Load(u); e != nil {
		t.Errorf("Load read %+v, %v through a planted link", e, err)
	}
	if err := st.Save(&Entry{ServerURL: u, Token: &Token{AccessToken: "a", Expiry: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	unchanged(entryVictim)
	if e, err := st.Load(u); err != nil || e == nil || e.Token == nil || e.Token.AccessToken != "a" {
		t.Errorf("Load after Save: %+v, %v", e, err)
	}
	if fi, err := os.Lstat(st.base(u) + ".json"); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the entry is not a regular file: %v, %v", fi, err)
	}
	left, _ := filepath.Glob(filepath.Join(st.Dir(), ".*tmp*"))
	for _, l := range left {
		if l != st.base(u)+".pending.tmp" {
			t.Errorf("temporary file left: %s", l)
		}
	}
}

// TestStoreOfAnotherUserIsRefused: a token directory (or the directory that
// holds it) owned by another user is refused, as .bir/recorder.json is: its owner can
// read every token, or swap the directory for one of theirs. Tests run as root,
// which can give the directory away; otherwise the store is opened as if for
// another user.
func TestStoreOfAnotherUserIsRefused(t *testing.T) {
	for _, which := range []string{"the directory", "its parent"} {
		t.Run(which, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "bir-proxy")
			dir := filepath.Join(parent, "oauth")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			owned := dir
			if which == "its parent" {
				owned = parent
			}
			var err error
			if os.Getuid() == 0 {
				if err := os.Chown(owned, 65534, 65534); err != nil {
					t.Fatal(err)
				}
				_, err = OpenStore(dir)
			} else {
				// Everything is ours, so the first directory looked at is named.
				_, err = openStore(dir, os.Getuid()+1)
				owned = parent
			}
			if err == nil || !strings.Contains(err.Error(), "owned by uid") || !strings.Contains(err.Error(), owned) {
				t.Fatalf("OpenStore: %v; want it refused, naming %s and its owner", err, owned)
			}
		})
	}
	// Root's own directories (/, /tmp) are trusted, as the recorder trusts them.
	if _, err := OpenStore(filepath.Join(t.TempDir(), "oauth")); err != nil {
		t.Fatalf("OpenStore of a directory of ours: %v", err)
	}
}
