package recorder

import (
	"context"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// stepPosts returns the bodies of the accepted step POSTs.
func stepPosts(rec *recordertest.Server) [][]byte {
	var out [][]byte
	for _, req := range rec.Requests() {
		if isStepPost(req) {
			out = append(out, req.Body)
		}
	}
	return out
}

func isStepPost(req recordertest.Request) bool {
	return req.Path == "/proxy/step" && req.Status == 200
}

func countStepPosts(reqs []recordertest.Request) int {
	n := 0
	for _, req := range reqs {
		if isStepPost(req) {
			n++
		}
	}
	return n
}

func TestBatchCapableRecorderGetsArrays(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rec := recordertest.Start(t)
	rec.Batch(true)
	// Slow enough that reports pile up behind the first requests and go in arrays.
	rec.Slow(20 * time.Millisecond)
	r := open(t, recorderConfig(t, rec, t.TempDir()))
	if _, err := rec.WaitRegistrations(ctx, 1); err != nil {
		t.Fatal(err)
	}
	const n = 600
	submitSteps(r, "batched", 1, n)
	waitSeqs(t, ctx, rec, r.ProxyID(), n)

	posts := stepPosts(rec)
	arrays, most := 0, 0
	for _, b := range posts {
		v := gjson.ParseBytes(b)
		if !v.IsArray() {
			t.Fatalf("a batch-capable recorder got a step POST that is not an array: %.80s", b)
		}
		arrays++
		most = max(most, len(v.Array()))
		if len(v.Array()) > maxBatch || len(b) > maxBatchBytes {
			t.Errorf("a batch of %d reports, %d bytes: over SPEC §5's bound", len(v.Array()), len(b))
		}
	}
	if most < 2 {
		t.Errorf("%d POSTs of at most %d report each: nothing was batched", arrays, most)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestPlainRecorderGetsOneReportPerPost(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rec := recordertest.Start(t)
	rec.Slow(20 * time.Millisecond)
	r := open(t, recorderConfig(t, rec, t.TempDir()))
	const n = 100
	submitSteps(r, "plain", 1, n)
	waitSeqs(t, ctx, rec, r.ProxyID(), n)
	// The recorder logs a POST just after it accepts its report: the n-th report can be
	// seen before its POST is (99 of 100 once in CI). Wait for the POSTs too, then end
	// the Reporter so no later one can come.
	if _, err := rec.Wait(ctx, func(v recordertest.Snapshot) bool { return countStepPosts(v.Requests) >= n }); err != nil {
		t.Error(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, b := range stepPosts(rec) {
		if v := gjson.ParseBytes(b); !v.IsObject() {
			t.Fatalf("a recorder that did not agree to batching got: %.80s", b)
		}
	}
	if got := len(stepPosts(rec)); got != n {
		t.Errorf("%d step POSTs for %d reports", got, n)
	}
}

// A batch the recorder took but whose answer was lost is sent again; the repeats are
// ignored and every seq arrives once.
func TestRetriedBatchIsHarmless(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rec := recordertest.Start(t)
	rec.Batch(true)
	rec.LoseAnswers(3)
	r := open(t, recorderConfig(t, rec, t.TempDir()))
	const n = 50
	submitSteps(r, "retried", 1, n)
	steps := waitSeqs(t, ctx, rec, r.ProxyID(), n)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if rec.Duplicates() == 0 {
		t.Errorf("no report was sent twice: the test did not retry a batch")
	}
	assertSeqSet(t, seqsOf(steps, r.ProxyID()), n)
}

// A recorder that is healthy but takes 3 s per answer must not set the throughput: the
// requests in flight grow with the backlog. 200 reports arrive well within 60 s of the
// last call (a fixed 4 in flight took 150 s).
func TestSlowRecorderDoesNotSetThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("takes several seconds")
	}
	for _, batch := range []bool{false, true} {
		name := "plain"
		if batch {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := recordertest.Start(t)
			rec.Batch(batch)
			rec.Slow(3 * time.Second)
			r := open(t, recorderConfig(t, rec, t.TempDir()))
			const n = 200
			submitSteps(r, "slow", 1, n)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			waitSeqs(t, ctx, rec, r.ProxyID(), n)
			if err := r.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
