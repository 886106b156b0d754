package recorder

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
	"github.com/bir-dev/bir-proxy/report"
)

// A backlog built while the recorder is down arrives complete once it is up: every seq
// once, and in seq order when one report is in flight at a time.
func TestBacklogDeliveredAfterRecorderComesBack(t *testing.T) {
	for _, inFlight := range []int{1, 4} {
		t.Run(map[int]string{1: "one in flight", 4: "four in flight"}[inFlight], func(t *testing.T) {
			const n = 1000
			ctx := testutil.Context(t)
			rec := recordertest.Start(t)
			rec.Down()
			state := t.TempDir()
			committed, failed := newCounter(), newCounter()
			cfg := recorderConfig(t, rec, state)
			cfg.tuning.maxInFlight = inFlight
			if inFlight == 1 {
				cfg.tuning.maxWindow = 1 // and it stays one: seq order is checked below
			}
			cfg.tuning.hooks.committed = committed.add
			cfg.tuning.hooks.attempt = func(_ string, _ int, err error) {
				if err != nil {
					failed.add(1)
				}
			}
			r := open(t, cfg)
			submitSteps(r, "create_issue", 1, n)
			if err := committed.wait(ctx, n); err != nil {
				t.Fatal(err)
			}
			if err := failed.wait(ctx, 1); err != nil { // it did try, and failed
				t.Fatal(err)
			}
			if reports, _ := spoolLines(t, spoolFiles(t, state)[0]); reports != n {
				t.Fatalf("spool holds %d reports before delivery, want %d", reports, n)
			}

			if err := rec.Up(); err != nil {
				t.Fatal(err)
			}
			steps, err := rec.WaitSteps(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			seqs := seqsOf(steps, r.ProxyID())
			assertSeqSet(t, seqs, n)
			if d := rec.Duplicates(); d != 0 {
				t.Errorf("%d reports were sent again after being acknowledged", d)
			}
			if inFlight == 1 && !slices.IsSorted(seqs) {
				t.Errorf("with one report in flight, reports arrived out of seq order")
			}
			if st := steps[0]; st.Server != "github" || st.Tool != "create_issue" || st.Get("callId").String() == "" {
				t.Errorf("report fields: %s", st.Body)
			}

			if err := r.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if left := spoolFiles(t, state); len(left) != 0 {
				t.Errorf("spool files left after everything was delivered: %v", left)
			}
			assertNoGoroutines(t)
		})
	}
}

// A recorder that forgets the proxy (it restarted) answers 404 unknown_proxy; the proxy
// registers again and resends. A restart mid-stream, which also cuts connections, loses
// nothing either.
func TestRegistersAgainAfterRecorderRestart(t *testing.T) {
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	acked := newCounter()
	cfg := recorderConfig(t, rec, t.TempDir())
	cfg.tuning.hooks.attempt = func(path string, status int, _ error) {
		if path == "/proxy/step" && status == http.StatusOK {
			acked.add(1)
		}
	}
	r := open(t, cfg)

	// Everything delivered and acknowledged, then the recorder forgets us: the next
	// report meets 404 unknown_proxy.
	submitSteps(r, "t", 1, 50)
	if err := acked.wait(ctx, 50); err != nil {
		t.Fatal(err)
	}
	rec.Forget()
	r.Submit(recordertest.SampleStep("t", 51))
	if _, err := rec.WaitSteps(ctx, 51); err != nil {
		t.Fatal(err)
	}

	// A restart mid-stream.
	submitSteps(r, "t", 52, 300)
	if _, err := rec.WaitSteps(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if err := rec.Restart(); err != nil {
		t.Fatal(err)
	}
	submitSteps(r, "t", 301, 600)
	waitSeqs(t, ctx, rec, r.ProxyID(), 600)

	unknown := 0
	for _, req := range rec.Requests() {
		if req.Path == "/proxy/step" && req.Status == http.StatusNotFound && strings.Contains(string(req.Body), r.ProxyID()) {
			unknown++
		}
	}
	if unknown == 0 {
		t.Error("no step was refused with unknown_proxy; that path was not exercised")
	}
	regs := 0
	for _, reg := range rec.Registrations() {
		if reg.ProxyID == r.ProxyID() {
			regs++
		}
	}
	if regs < 3 {
		t.Errorf("registered %d times, want at least 3 (start, after Forget, after Restart)", regs)
	}
}

// A 500ing or slow recorder delays reports but loses none.
func TestFailingAndSlowRecorder(t *testing.T) {
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	r := open(t, recorderConfig(t, rec, t.TempDir()))
	if _, err := rec.WaitRegistrations(ctx, 1); err != nil {
		t.Fatal(err)
	}

	rec.Fail(http.StatusInternalServerError)
	submitSteps(r, "t", 1, 20)
	// Retried through several backoffs.
	waitRequests(t, ctx, rec, 5, func(req recordertest.Request) bool {
		return req.Path == "/proxy/step" && req.Status == http.StatusInternalServerError
	})
	rec.Fail(0)
	if _, err := rec.WaitSteps(ctx, 20); err != nil {
		t.Fatal(err)
	}

	rec.Slow(20 * time.Millisecond)
	submitSteps(r, "t", 21, 40)
	waitSeqs(t, ctx, rec, r.ProxyID(), 40)
}

// A 401 is said once on stderr; reports stay in the spool; they arrive once the token
// is right again.
func TestUnauthorizedSaidOnceAndKept(t *testing.T) {
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	rec.WrongToken(true)
	state := t.TempDir()
	var logs testutil.SyncBuffer
	committed := newCounter()
	cfg := recorderConfig(t, rec, state)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.tuning.hooks.committed = committed.add
	r := open(t, cfg)
	submitSteps(r, "t", 1, 10)
	if err := committed.wait(ctx, 10); err != nil {
		t.Fatal(err)
	}
	waitRequests(t, ctx, rec, 5, func(req recordertest.Request) bool { return req.Status == http.StatusUnauthorized })
	if n := strings.Count(logs.String(), "refused the token"); n != 1 || !strings.Contains(logs.String(), "status=401") {
		t.Errorf("the 401 was said %d times on stderr, want once:\n%s", n, logs.String())
	}
	if reports, acks := spoolLines(t, spoolFiles(t, state)[0]); reports != 10 || acks != 0 {
		t.Errorf("spool holds %d reports and %d done marks, want 10 and 0", reports, acks)
	}

	rec.WrongToken(false)
	waitSeqs(t, ctx, rec, r.ProxyID(), 10)
}

// A refusal of a request that was in flight when the recorder took another is not a
// new refusal: the token was fixed in between, in whatever order the recorder read
// the two. Two requests in flight as the token was
// fixed said the 401 twice (TestWrongTokenIsSaidOnceAndSpooled, now and then): the
// second was taken, then the first's 401 was read as the token refused again.
func TestStaleRefusalIsNotSaid(t *testing.T) {
	ctx := testutil.Context(t)
	okSeen := make(chan struct{})
	var once sync.Once
	var steps, delivered atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/proxy/register":
			w.Write([]byte(`{"ok":true}`))
		case "/proxy/step":
			if steps.Add(1) == 1 {
				// Refused as the token was wrong, answered once a later request was taken.
				select {
				case <-okSeen:
				case <-ctx.Done():
				}
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			delivered.Add(1)
			w.Write([]byte(`{"ok":true}`))
		default:
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(`{"dispatches":[],"cancel":[]}`))
		}
	}))
	t.Cleanup(srv.Close)
	var logs testutil.SyncBuffer
	cfg := recorderConfig(t, recordertest.Start(t), t.TempDir())
	cfg.Endpoint = &Endpoint{URL: srv.URL, Token: "t", Source: "test"}
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.tuning.maxInFlight = 4
	cfg.tuning.hooks.attempt = func(path string, status int, _ error) {
		if path == "/proxy/step" && status == http.StatusOK {
			once.Do(func() { close(okSeen) })
		}
	}
	r := open(t, cfg)
	submitSteps(r, "t", 1, 2)
	testutil.Eventually(t, "both reports to be taken", func() bool { return delivered.Load() == 2 })
	if n := strings.Count(logs.String(), "refused the token"); n != 0 {
		t.Errorf("a stale 401 was said as the token refused:\n%s", logs.String())
	}
}

// A recorder that restarts with a new token writes it to .bir/recorder.json; a proxy
// that found the recorder there reads it again after a 401.
func TestStaleTokenReadAgainFromDiscoveryFile(t *testing.T) {
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	project := t.TempDir()
	if _, err := rec.WriteDiscoveryFile(project); err != nil {
		t.Fatal(err)
	}
	ep, err := Discover(DiscoverOptions{Env: func(string) string { return "" }, Dir: project})
	if err != nil || ep == nil {
		t.Fatalf("Discover: %v, %v", ep, err)
	}
	rec.SetToken("fresh-token") // the proxy still holds the old one
	cfg := recorderConfig(t, rec, t.TempDir())
	cfg.Endpoint = ep
	r := open(t, cfg)
	r.Submit(recordertest.SampleStep("t", 1))
	_, err = rec.Wait(ctx, func(s recordertest.Snapshot) bool {
		return len(s.Requests) > 0 && s.Requests[len(s.Requests)-1].Status == http.StatusUnauthorized
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.WriteDiscoveryFile(project); err != nil {
		t.Fatal(err)
	}
	steps, err := rec.WaitSteps(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if steps[0].ProxyID != r.ProxyID() {
		t.Errorf("step from %s, want %s", steps[0].ProxyID, r.ProxyID())
	}
	reqs := rec.Requests()
	if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer fresh-token" {
		t.Errorf("last request carried %q", got)
	}
}

// Learned facts reach the recorder in a fresh register call, with everything a
// register carries.
func TestLearnedFactsRegisterAgain(t *testing.T) {
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	r := open(t, recorderConfig(t, rec, t.TempDir()))
	r.Learned(report.ServerFacts{ServerInfo: []byte(`{"name":"github-mcp","version":"1.2.3"}`), ProtocolVersion: "2025-06-18"})
	r.Learned(report.ServerFacts{Tools: []string{"create_issue", "search"}})
	_, err := rec.Wait(ctx, func(s recordertest.Snapshot) bool {
		for _, reg := range s.Registrations {
			if reg.Get("tools.#").Int() == 2 && reg.Get("serverInfo.name").String() == "github-mcp" {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	regs := rec.Registrations()
	last := regs[len(regs)-1]
	for path, want := range map[string]string{
		"proxyId": r.ProxyID(), "server": "github", "version": "0.0.0-test",
		"protocolVersion": "2025-06-18", "upstream.transport": "stdio",
		"upstream.command.0": "fake-server", "tools.1": "search", "serverInfo.version": "1.2.3",
	} {
		if got := last.Get(path).String(); got != want {
			t.Errorf("register %s = %q, want %q (body %s)", path, got, want, last.Body)
		}
	}
	if last.PID != os.Getpid() {
		t.Errorf("register pid %d, want %d", last.PID, os.Getpid())
	}
	if h := rec.Requests()[0].Header.Get("Authorization"); h != "Bearer "+rec.Token() {
		t.Errorf("Authorization header %q", h)
	}
}

// A transport settled on later than the registration at start (--transport auto
// falling back to sse) reaches the recorder in a fresh register call; the same
// transport again registers nothing.
func TestSettledTransportRegistersAgain(t *testing.T) {
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	cfg := recorderConfig(t, rec, t.TempDir())
	cfg.Upstream = Upstream{Transport: "http", URL: "http://127.0.0.1:1/sse?token=s3cret-value"}
	r := open(t, cfg)
	if _, err := rec.Wait(ctx, func(s recordertest.Snapshot) bool { return len(s.Registrations) == 1 }); err != nil {
		t.Fatal(err)
	}
	r.SettledTransport("http") // what was said: nothing to say again
	r.SettledTransport("sse")
	snap, err := rec.Wait(ctx, func(s recordertest.Snapshot) bool {
		return len(s.Registrations) > 0 && s.Registrations[len(s.Registrations)-1].Get("upstream.transport").String() == "sse"
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(snap.Registrations); n != 2 {
		t.Errorf("%d registrations, want 2 (at start, then the transport)", n)
	}
	last := snap.Registrations[len(snap.Registrations)-1]
	if u := last.Get("upstream.url").String(); strings.Contains(u, "s3cret") || !strings.HasPrefix(u, "http://127.0.0.1:1/sse") {
		t.Errorf("upstream.url = %q", u)
	}
	r.Learned(report.ServerFacts{ProtocolVersion: "2024-11-05"})
	if _, err := rec.Wait(ctx, func(s recordertest.Snapshot) bool {
		last := s.Registrations[len(s.Registrations)-1]
		return last.Get("protocolVersion").String() == "2024-11-05"
	}); err != nil {
		t.Fatal(err)
	}
	regs := rec.Registrations()
	if tr := regs[len(regs)-1].Get("upstream.transport").String(); tr != "sse" {
		t.Errorf("a later registration says transport %q, want sse", tr)
	}
}

// Close with the recorder down returns without waiting out the backoff, leaves the
// spool file, and the next run of the same server delivers it under the old proxyId.
func TestCloseLeavesSpoolForNextRun(t *testing.T) {
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	rec.Down()
	state := t.TempDir()
	cfg := recorderConfig(t, rec, state)
	cfg.tuning.backoffBase, cfg.tuning.backoffCap = time.Hour, time.Hour // Close must not wait for it
	cfg.tuning.closeGrace = time.Hour
	first, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	submitSteps(first, "t", 1, 3)
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	first.Submit(recordertest.SampleStep("t", 4)) // after Close: dropped, no panic
	assertNoGoroutines(t)
	files := spoolFiles(t, state)
	if len(files) != 1 {
		t.Fatalf("spool files after Close: %v", files)
	}
	if reports, acks := spoolLines(t, files[0]); reports != 3 || acks != 0 {
		t.Fatalf("spool holds %d reports, %d done marks; want 3, 0", reports, acks)
	}

	if err := rec.Up(); err != nil {
		t.Fatal(err)
	}
	second := open(t, recorderConfig(t, rec, state))
	waitSeqs(t, ctx, rec, first.ProxyID(), 3)
	if err := second.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left := spoolFiles(t, state); len(left) != 0 {
		t.Errorf("spool files left: %v", left)
	}
}

func TestBackoffWait(t *testing.T) {
	tune := tuning{}.withDefaults()
	for failures := range 40 {
		w := backoffWait(tune, failures, 0)
		if w <= 0 || w > tune.backoffCap {
			t.Fatalf("wait after %d failures = %v, outside (0, %v]", failures, w, tune.backoffCap)
		}
	}
	if w := backoffWait(tune, 0, 10*time.Minute); w != tune.backoffCap {
		t.Errorf("Retry-After of 10 min gave %v, want it clamped to %v", w, tune.backoffCap)
	}
	if w := backoffWait(tune, 0, 7*time.Second); w != 7*time.Second {
		t.Errorf("Retry-After of 7s gave %v", w)
	}
	// Jitter: waits at the cap are spread, not all equal.
	seen := map[time.Duration]bool{}
	for range 20 {
		seen[backoffWait(tune, 30, 0)] = true
	}
	if len(seen) < 2 {
		t.Error("backoff has no jitter")
	}
}

// BenchmarkSubmitSlowRecorder measures Submit while the recorder takes 50 ms per request
// (and another with it failing): Submit only queues, so it costs the same as with no
// recorder at all. It also reports the slowest single Submit. Every report goes to the
// spool on disk, so run it with a bounded count, e.g. -benchtime=20000x.
func BenchmarkSubmitSlowRecorder(b *testing.B) {
	rec := recordertest.Start(b)
	rec.Slow(50 * time.Millisecond)
	cfg := recorderConfig(b, rec, b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	r := open(b, cfg)
	s := recordertest.SampleStep("create_issue", 1)
	var took []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		r.Submit(s)
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(took[len(took)*999/1000].Nanoseconds()), "p999-ns")
	b.ReportMetric(float64(took[len(took)-1].Nanoseconds()), "max-ns")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.Close(ctx)
}

// A recorder that was unreachable and comes back may be a new process: the proxy
// registers before it sends anything else, instead of collecting a 404 per report.
func TestRegistersFirstWhenRecorderReturns(t *testing.T) {
	ctx := testutil.Context(t)
	rec := recordertest.Start(t)
	failed := newCounter()
	cfg := recorderConfig(t, rec, t.TempDir())
	// One request at a time: a request launched before the failure was known could
	// otherwise still be on its way when the recorder returns, and reach it ahead of
	// the register (harmless: it gets 404 and the proxy registers then).
	cfg.tuning.maxInFlight = 1
	cfg.tuning.hooks.attempt = func(_ string, _ int, err error) {
		if err != nil {
			failed.add(1)
		}
	}
	r := open(t, cfg)
	r.Submit(recordertest.SampleStep("t", 1))
	if _, err := rec.WaitSteps(ctx, 1); err != nil {
		t.Fatal(err)
	}
	rec.Down()
	r.Submit(recordertest.SampleStep("t", 2))
	if err := failed.wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	before := len(rec.Requests())
	if err := rec.Restart(); err != nil { // comes back knowing no proxy
		t.Fatal(err)
	}
	if _, err := rec.WaitSteps(ctx, 2); err != nil {
		t.Fatal(err)
	}
	after := rec.Requests()[before:]
	if after[0].Path != "/proxy/register" {
		t.Errorf("first request after the recorder came back: %s", after[0].Path)
	}
	for _, req := range after {
		if req.Status != http.StatusOK {
			t.Errorf("%s answered %d", req.Path, req.Status)
		}
	}
}
