//go:build unix

package recorder

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// A journal file and directories left 0666/0777 (by an older version, a umask, a hand)
// are tightened when the journal is opened, with a warning: reports carry arguments
// and results, and they kept their modes, readable and replaceable by anyone.
func TestJournalModesTightened(t *testing.T) {
	state := filepath.Join(t.TempDir(), "bir-proxy")
	journal := JournalPath(state, "github")
	mkdir(t, filepath.Dir(journal), 0o777)
	chmod(t, state, 0o777)
	if err := os.WriteFile(journal, []byte("{}\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	chmod(t, journal, 0o666)
	var logs testutil.SyncBuffer
	r, err := Open(t.Context(), Config{Server: "github", StateDir: state, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	for path, want := range map[string]os.FileMode{state: 0o700, filepath.Dir(journal): 0o700, journal: 0o600} {
		if got := modeOf(t, path); got != want {
			t.Errorf("%s: mode %04o, want %04o", path, got, want)
		}
	}
	if n := strings.Count(logs.String(), "tightened"); n != 3 || !strings.Contains(logs.String(), "was=0666") {
		t.Errorf("the tightening was said %d times, want 3:\n%s", n, logs.String())
	}
}

// --journal PATH: the file is tightened; its directory is the user's and keeps its
// mode, with a warning when others can write it.
func TestCustomJournalFileTightened(t *testing.T) {
	dir := mkdir(t, filepath.Join(t.TempDir(), "logs"), 0o777)
	journal := filepath.Join(dir, "mine.jsonl")
	if err := os.WriteFile(journal, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	chmod(t, journal, 0o666)
	var logs testutil.SyncBuffer
	r, err := Open(t.Context(), Config{Server: "github", JournalPath: journal, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if got := modeOf(t, journal); got != 0o600 {
		t.Errorf("journal mode %04o, want 0600", got)
	}
	if got := modeOf(t, dir); got != 0o777 {
		t.Errorf("the user's directory was changed to %04o", got)
	}
	if !strings.Contains(logs.String(), "others can replace") {
		t.Errorf("no warning about the writable directory:\n%s", logs.String())
	}
}

// A journal another user owns is refused: its owner reads every report written to it,
// whatever its mode.
func TestJournalOfAnotherUserRefused(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "theirs.jsonl")
	if err := os.WriteFile(journal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	chown(t, journal, nobody)
	r, err := Open(t.Context(), Config{Server: "github", JournalPath: journal, Logger: testLogger(t)})
	if err == nil {
		r.Close(context.Background())
		t.Fatal("Open wrote a journal another user owns")
	}
	if !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("error %q does not say who owns it", err)
	}
}

// The spool directory and the spool files of earlier runs are tightened the same way.
func TestSpoolModesTightened(t *testing.T) {
	state := t.TempDir()
	dir := mkdir(t, spoolDir(state), 0o777)
	id := strings.Repeat("a", 32)
	old := filepath.Join(dir, spoolName("github", id))
	if err := os.WriteFile(old, []byte(`{"proxyId":"`+id+`","server":"github","seq":1}`+"\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	chmod(t, old, 0o666)
	r := open(t, Config{Server: "github", StateDir: state, Endpoint: &Endpoint{URL: "http://127.0.0.1:1", Source: "test"},
		Logger: testLogger(t), tuning: fastTuning()})
	<-r.adoptDone
	if got := modeOf(t, dir); got != 0o700 {
		t.Errorf("spool directory mode %04o, want 0700", got)
	}
	if got := modeOf(t, old); got != 0o600 {
		t.Errorf("adopted spool file mode %04o, want 0600", got)
	}
}
