package filelock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestOpenIsExclusiveAndWaitWaits(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" && runtime.GOOS != "windows" {
		t.Skip("no file locks here")
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	f, err := Open(path, os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, os.O_RDWR); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second Open: %v, want ErrLocked", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Wait(short, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a held lock: %v, want the context's end", err)
	}
	got := make(chan error, 1)
	go func() {
		g, err := Wait(testutil.Context(t), path)
		if err == nil {
			g.Close()
		}
		got <- err
	}()
	f.Close() // released: the waiter gets it
	if err := testutil.Recv(t, got, "the waiter"); err != nil {
		t.Fatalf("Wait after the release: %v", err)
	}
}
