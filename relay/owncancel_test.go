package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/internal/testutil"
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
	raw := testutil.Build(t, "./testdata/rawserver")
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
			record, received := recordFIFO(t)
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
			st := testutil.Recv(t, sink.steps, "a report for the given-up call")
			if st.Outcome != tc.outcome || st.DispatchID == nil || *st.DispatchID != "d-1" {
				t.Fatalf("report outcome %q dispatchId %v, want %q d-1", st.Outcome, st.DispatchID, tc.outcome)
			}
			waitReceived(t, received, "the cancel", func(got string) bool {
				return strings.Contains(got, `"method":"notifications/cancelled","params":{"requestId":"bir:test:1"`)
			})
		})
	}
}
