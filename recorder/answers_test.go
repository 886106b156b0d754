package recorder

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// shortCtx bounds a wait that a passing run ends in milliseconds, so a regression that
// loses reports fails in seconds rather than at testutil.Guard.
func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Every 2xx takes a report: a recorder built on a framework that answers 201, 202 or
// 204 used to have its register refused forever (so no report was ever sent) and each
// step logged as rejected.
func TestEvery2xxIsTaken(t *testing.T) {
	for _, status := range []int{http.StatusCreated, http.StatusAccepted, http.StatusNoContent} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			ctx := shortCtx(t)
			rec := recordertest.Start(t)
			rec.Answer(status)
			state := t.TempDir()
			var logs testutil.SyncBuffer
			cfg := recorderConfig(t, rec, state)
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			r := open(t, cfg)
			for i := 1; i <= 5; i++ {
				r.Submit(recordertest.SampleStep("t", i))
			}
			steps, err := rec.WaitSteps(ctx, 5)
			if err != nil {
				t.Fatal(err)
			}
			assertSeqSet(t, seqsOf(steps, r.ProxyID()), 5)
			if err := r.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if left := spoolFiles(t, state); len(left) != 0 {
				t.Errorf("spool files left after a %d for every report: %v", status, left)
			}
			if d := rec.Duplicates(); d != 0 {
				t.Errorf("%d reports sent again after a %d", d, status)
			}
			if strings.Contains(logs.String(), "level=ERROR") || strings.Contains(logs.String(), "msg=\"the recorder") {
				t.Errorf("a %d was complained about:\n%s", status, logs.String())
			}
		})
	}
}

// A redirect is never followed (the token would go wherever it points) and costs no
// report: it stays in the spool, is said once on stderr, and is delivered once the
// recorder answers at its own URL again. It used to be logged as a rejection and the
// report marked done, lost for good.
func TestRedirectKeepsReports(t *testing.T) {
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			ctx := shortCtx(t)
			rec := recordertest.Start(t)
			elsewhere := recordertest.Start(t)
			state := t.TempDir()
			var logs testutil.SyncBuffer
			cfg := recorderConfig(t, rec, state)
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			r := open(t, cfg)
			if _, err := rec.WaitRegistrations(ctx, 1); err != nil {
				t.Fatal(err)
			}
			rec.Redirect(status, elsewhere.URL()+"/proxy/step")
			for i := 1; i <= 5; i++ {
				r.Submit(recordertest.SampleStep("t", i))
			}
			_, err := rec.Wait(ctx, func(s recordertest.Snapshot) bool {
				n := 0
				for _, req := range s.Requests {
					if req.Path == "/proxy/step" && req.Status == status {
						n++
					}
				}
				// Past the first requests, which were in flight together: later ones are
				// single probes after a pause, so none straddles the switch back below.
				return n >= 6
			})
			if err != nil {
				t.Fatal(err)
			}
			if reports, acks := spoolLines(t, spoolFiles(t, state)[0]); reports != 5 || acks != 0 {
				t.Errorf("after a %d the spool holds %d reports and %d done marks, want 5 and 0", status, reports, acks)
			}
			if n := strings.Count(logs.String(), "redirect"); n != 1 {
				t.Errorf("the redirect was said %d times, want once:\n%s", n, logs.String())
			}
			rec.Redirect(0, "")
			steps, err := rec.WaitSteps(ctx, 5)
			if err != nil {
				t.Fatal(err)
			}
			assertSeqSet(t, seqsOf(steps, r.ProxyID()), 5)
			if n := len(elsewhere.Requests()); n != 0 {
				t.Errorf("the redirect was followed: %d requests reached its target", n)
			}
		})
	}
}

// Only the answers that say this report can never be taken (400, 413, 422) drop it.
// Any other 4xx is about the URL, something in between or the recorder's version, not
// the report: it stays in the spool and is retried.
func TestOnlyReportErrorsAreFinal(t *testing.T) {
	for _, status := range []int{405, 406, 409, 410, 415, 418, 421, 451, 499} {
		t.Run(fmt.Sprintf("%d kept", status), func(t *testing.T) {
			ctx := shortCtx(t)
			rec := recordertest.Start(t)
			var logs testutil.SyncBuffer
			cfg := recorderConfig(t, rec, t.TempDir())
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			r := open(t, cfg)
			if _, err := rec.WaitRegistrations(ctx, 1); err != nil {
				t.Fatal(err)
			}
			rec.Fail(status)
			for i := 1; i <= 3; i++ {
				r.Submit(recordertest.SampleStep("t", i))
			}
			if _, err := rec.Wait(ctx, func(s recordertest.Snapshot) bool {
				n := 0
				for _, req := range s.Requests {
					if req.Status == status {
						n++
					}
				}
				return n >= 6 // as above
			}); err != nil {
				t.Fatal(err)
			}
			rec.Fail(0)
			steps, err := rec.WaitSteps(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			assertSeqSet(t, seqsOf(steps, r.ProxyID()), 3)
			if n := strings.Count(logs.String(), fmt.Sprintf("status=%d", status)); n != 1 {
				t.Errorf("the %d was said %d times, want once:\n%s", status, n, logs.String())
			}
		})
	}
	for _, status := range []int{400, 413, 422} {
		t.Run(fmt.Sprintf("%d final", status), func(t *testing.T) {
			ctx := shortCtx(t)
			rec := recordertest.Start(t)
			state := t.TempDir()
			acted, committed := newCounter(), newCounter()
			cfg := recorderConfig(t, rec, state)
			cfg.tuning.hooks.committed = committed.add
			cfg.tuning.hooks.attempt = func(path string, st int, _ error) {
				if path == "/proxy/step" && st == status {
					acted.add(1)
				}
			}
			r := open(t, cfg)
			if _, err := rec.WaitRegistrations(ctx, 1); err != nil {
				t.Fatal(err)
			}
			rec.Fail(status)
			r.Submit(recordertest.SampleStep("t", 1))
			if err := acted.wait(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := committed.wait(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if reports, acks := spoolLines(t, spoolFiles(t, state)[0]); reports != 1 || acks != 1 {
				t.Errorf("after a %d the spool holds %d reports and %d done marks, want 1 and 1", status, reports, acks)
			}
		})
	}
}
