package recorder

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// TestRemoteReregisters: the poll loop's door into registration makes delivery send
// one more register, and WaitRegistered sees it; Post reaches the recorder once.
func TestRemoteReregisters(t *testing.T) {
	rec := recordertest.Start(t)
	r := open(t, recorderConfig(t, rec, t.TempDir()))
	remote := r.Remote()
	if remote == nil || remote.ProxyID() != r.ProxyID() {
		t.Fatal("no Remote in recorder mode, or another proxyId")
	}
	ctx := testutil.Context(t)
	if err := remote.WaitRegistered(ctx, 0); err != nil {
		t.Fatal(err)
	}
	rec.Forget()
	body := []byte(`{"proxyId":"` + r.ProxyID() + `","server":"github","pid":1,"waitMs":0}`)
	a, err := remote.Post(ctx, "/proxy/poll", body, 1<<20)
	if err != nil || a.Status != http.StatusNotFound {
		t.Fatalf("poll of a forgotten proxy: %+v %v, want 404", a, err)
	}
	n := remote.Reregister()
	if err := remote.WaitRegistered(ctx, n); err != nil {
		t.Fatal(err)
	}
	if got := len(rec.Registrations()); got != 2 {
		t.Fatalf("%d registrations, want 2", got)
	}
	a, err = remote.Post(ctx, "/proxy/poll", body, 1<<20)
	if err != nil || a.Status != http.StatusOK {
		t.Fatalf("poll after registering again: %+v %v", a, err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := remote.WaitRegistered(ctx, remote.Registered()); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitRegistered after Close: %v, want ErrClosed", err)
	}
}

func TestNoRemoteInJournalMode(t *testing.T) {
	dir := t.TempDir()
	r := open(t, Config{Server: "j", JournalPath: dir + "/j.jsonl", StateDir: dir, Logger: testLogger(t)})
	if r.Remote() != nil {
		t.Fatal("a Remote in journal mode: a poll loop would reach for a recorder that is not configured")
	}
}
