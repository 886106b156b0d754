package relay_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/internal/testbin"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/upstream"
)

// errWhy is a caller's reason for giving up, as a replay executor gives one.
var errWhy = errors.New("the recorder cancelled the dispatch")

// TestOwnCallGivenUpIsTimeoutOrCancel: an own request whose caller's deadline passes
// is reported as a timeout, one whose caller cancels as cancelled; either way the
// upstream is told with notifications/cancelled, and Call's error keeps the cause.
func TestOwnCallGivenUpIsTimeoutOrCancel(t *testing.T) {
	raw := testbin.Build(t, "./testdata/rawserver")
	for _, tc := range []struct {
		name    string
		ctx     func() (context.Context, func())
		outcome string
		is      error
	}{
		{"deadline", func() (context.Context, func()) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, report.OutcomeTimeout, context.DeadlineExceeded},
		{"cancel", func() (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(200*time.Millisecond, func() { cancel(errWhy) })
			return ctx, func() { cancel(nil) }
		}, report.OutcomeCancelled, errWhy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			record := filepath.Join(t.TempDir(), "received")
			proc, err := upstream.Start(upstream.Command{Path: raw, Args: []string{"--record", record, "--reply"}, Name: "raw"})
			if err != nil {
				t.Fatal(err)
			}
			sink := &stepSink{steps: make(chan report.Step, 4)}
			ic := intercept.New(intercept.Options{Sink: sink})
			r, _ := wireConn(t, proc, ic)
			t.Cleanup(ic.Close)

			ctx, cancel := tc.ctx()
			defer cancel()
			_, err = r.Call(ctx, relay.Request{Method: "tools/call", Params: []byte(`{"name":"hang","arguments":{}}`), Origin: "d-1"})
			if !errors.Is(err, tc.is) {
				t.Fatalf("Call returned %v, want it to wrap %v", err, tc.is)
			}
			select {
			case st := <-sink.steps:
				if st.Outcome != tc.outcome || st.DispatchID == nil || *st.DispatchID != "d-1" {
					t.Fatalf("report outcome %q dispatchId %v, want %q d-1", st.Outcome, st.DispatchID, tc.outcome)
				}
			case <-time.After(deadline):
				t.Fatal("no report for the given-up call")
			}
			waitFor(t, func() bool {
				b, _ := os.ReadFile(record)
				return strings.Contains(string(b), `"method":"notifications/cancelled","params":{"requestId":"bir:test:1"`)
			}, "the upstream to be told of the cancel")
		})
	}
}
