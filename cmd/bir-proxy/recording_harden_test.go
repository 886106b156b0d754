package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testbin"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// TestRecorderAnswering204TakesReports: a recorder that answers 201/204 instead of 200
// gets every report once, and the spool is empty at exit. A register answered 204 used
// to count as refused, so nothing was ever sent.
func TestRecorderAnswering204TakesReports(t *testing.T) {
	t.Parallel()
	raw := testbin.Build(t, "./testdata/rawserver")
	for _, status := range []int{http.StatusCreated, http.StatusNoContent} {
		rec := recordertest.Start(t)
		rec.Answer(status)
		state := t.TempDir()
		s := startProxy(t, recording(rec, state), "--server", "twoxx", "--", raw, "--reply")
		for i := 1; i <= 5; i++ {
			s.send(toolCall(i, fmt.Sprintf(`{"_bir_call_id":"c-%d"}`, i)))
			s.recv()
		}
		if _, err := rec.WaitSteps(ctxTimeout(t), 5); err != nil {
			t.Fatal(err)
		}
		s.in.Close()
		if code := s.wait(); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if left, _ := filepath.Glob(filepath.Join(state, "bir-proxy", "spool", "*")); len(left) != 0 {
			t.Errorf("answered %d: spool files left: %v", status, left)
		}
		if strings.Contains(s.stderr.String(), "level=ERROR") {
			t.Errorf("answered %d: stderr:\n%s", status, s.stderr.String())
		}
	}
}

// TestRecorderBehindRedirectLosesNothing: a recorder that answers 307 keeps its reports
// in the spool (the redirect is not followed, so the token goes nowhere else), says so
// once, and gets every report once it answers again.
func TestRecorderBehindRedirectLosesNothing(t *testing.T) {
	t.Parallel()
	raw := testbin.Build(t, "./testdata/rawserver")
	rec := recordertest.Start(t)
	elsewhere := recordertest.Start(t)
	s := startProxy(t, recording(rec, t.TempDir()), "--server", "redir", "--", raw, "--reply")
	ctx := ctxTimeout(t)
	if _, err := rec.WaitRegistrations(ctx, 1); err != nil {
		t.Fatal(err)
	}
	rec.Redirect(http.StatusTemporaryRedirect, elsewhere.URL()+"/proxy/step")
	for i := 1; i <= 5; i++ {
		s.send(toolCall(i, fmt.Sprintf(`{"_bir_call_id":"c-%d"}`, i)))
		s.recv()
	}
	if _, err := rec.Wait(ctx, func(v recordertest.Snapshot) bool {
		n := 0
		for _, req := range v.Requests {
			if req.Path == "/proxy/step" && req.Status == http.StatusTemporaryRedirect {
				n++
			}
		}
		// Past the first requests, which were in flight together: later ones are
		// single probes after a pause, so none can straddle the switch back below.
		return n >= 6
	}); err != nil {
		t.Fatal(err)
	}
	rec.Redirect(0, "")
	steps, err := rec.WaitSteps(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, st := range steps {
		seen[st.Get("callId").String()] = true
	}
	for i := 1; i <= 5; i++ {
		if !seen[fmt.Sprintf("c-%d", i)] {
			t.Errorf("report c-%d lost behind the redirect", i)
		}
	}
	if n := len(elsewhere.Requests()); n != 0 {
		t.Errorf("the redirect was followed: %d requests reached its target", n)
	}
	if n := strings.Count(s.stderr.String(), "redirect"); n != 1 {
		t.Errorf("the redirect was said %d times, want once:\n%s", n, s.stderr.String())
	}
	s.in.Close()
	s.wait()
}

