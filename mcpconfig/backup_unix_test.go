//go:build unix

package mcpconfig

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBackupsListWithAFIFOOp: an op file beside a backup that is a FIFO blocked
// List (unwrap --restore's listing) for ever in open(2); it now reads as no op.
func TestBackupsListWithAFIFOOp(t *testing.T) {
	project := t.TempDir()
	bs := Backups{Dir: filepath.Join(t.TempDir(), "state", "backups"), Keep: 3, Now: clock()}
	f := filepath.Join(project, ".mcp.json")
	old := []byte(`{"mcpServers": {}}`)
	if err := os.WriteFile(f, old, 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Change{Location: Location{File: f}, Old: old, New: []byte(`{"mcpServers": {"a": {"command": "a"}}}`), Op: "wrap a"}
	saved, err := c.Save(bs)
	if err != nil {
		t.Fatal(err)
	}
	op := strings.TrimSuffix(saved.Backup.Path, ".json") + opSuffix
	if err := os.Remove(op); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(op, 0o600); err != nil {
		t.Fatal("mkfifo:", err) // a temporary folder on a Unix takes a FIFO: a skip here would assert nothing
	}
	done := make(chan []Backup, 1)
	go func() {
		list, _ := bs.List(f)
		done <- list
	}()
	select {
	case list := <-done:
		if len(list) != 1 || list[0].Op != "" {
			t.Errorf("list: %+v", list)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("List did not end within 10s: blocked opening the FIFO op file")
	}
}
