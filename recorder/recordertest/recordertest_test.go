package recordertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

func post(t *testing.T, s *Server, token, path, body string) (int, string) {
	t.Helper()
	status, answer, err := tryPost(testutil.Context(t), s.URL(), token, path, body)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return status, answer
}

func tryPost(ctx context.Context, base, token, path, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewBufferString(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	// A fresh connection each time: a pooled one cut by Down would fail with EOF
	// instead of showing that the port refuses connections.
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

const reg = `{"proxyId":"p1","server":"github","pid":99,"version":"1","upstream":{"transport":"stdio"}}`

func TestRoutes(t *testing.T) {
	s := Start(t)
	tok := s.Token()

	if st, body := post(t, s, tok, "/proxy/step", `{"proxyId":"p1","server":"github","seq":1}`); st != 404 || body != `{"error":"unknown_proxy"}` {
		t.Errorf("step before register: %d %s", st, body)
	}
	if st, body := post(t, s, tok, "/proxy/poll", `{"proxyId":"p1","server":"github","pid":99,"waitMs":0}`); st != 404 || body != `{"error":"unknown_proxy"}` {
		t.Errorf("poll before register: %d %s", st, body)
	}
	if st, _ := post(t, s, "wrong", "/proxy/register", reg); st != 401 {
		t.Errorf("wrong token: %d", st)
	}
	if st, _ := post(t, s, tok, "/proxy/register", reg); st != 200 {
		t.Errorf("register: %d", st)
	}
	for _, body := range []string{
		`{"proxyId":"p1","server":"github","seq":1,"tool":"a"}`,
		`{"proxyId":"p1","server":"github","seq":2,"tool":"b"}`,
		`{"proxyId":"p1","server":"github","seq":1,"tool":"a"}`, // repeat: accepted, ignored
	} {
		if st, _ := post(t, s, tok, "/proxy/step", body); st != 200 {
			t.Errorf("step %s: %d", body, st)
		}
	}
	for _, bad := range []string{`{"proxyId":"p1","seq":0}`, `{"proxyId":"p1","seq":1.5}`, `{"proxyId":"p1"}`, `[1]`, `{"seq":3}`} {
		if st, _ := post(t, s, tok, "/proxy/step", bad); st != 400 {
			t.Errorf("bad step %s: %d", bad, st)
		}
	}
	if st, body := post(t, s, tok, "/proxy/poll", `{"proxyId":"p1","server":"github","pid":99,"waitMs":5}`); st != 200 || body != `{"dispatches":[],"cancel":[]}` {
		t.Errorf("poll: %d %s", st, body)
	}
	if st, _ := post(t, s, tok, "/proxy/result", `{"proxyId":"p1","dispatchId":"d1","outcome":"ok","durationMs":3}`); st != 200 {
		t.Errorf("result: %d", st)
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(s.URL() + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("health: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	steps := s.Steps()
	if len(steps) != 2 || steps[0].Seq != 1 || steps[1].Tool != "b" || s.Duplicates() != 1 {
		t.Errorf("steps %+v, duplicates %d", steps, s.Duplicates())
	}
	if regs := s.Registrations(); len(regs) != 1 || regs[0].PID != 99 || regs[0].Get("upstream.transport").String() != "stdio" {
		t.Errorf("registrations %+v", regs)
	}
	if res := s.Results(); len(res) != 1 || res[0].DispatchID != "d1" {
		t.Errorf("results %+v", res)
	}
	reqs := s.Requests()
	if len(reqs) != 15 || reqs[0].Header.Get("Authorization") != "Bearer "+tok {
		t.Errorf("%d requests recorded", len(reqs))
	}
	// Accessors hand out copies.
	steps[0].Body[0] = 'X'
	reqs[0].Header.Set("Authorization", "changed")
	if s.Steps()[0].Body[0] != '{' || s.Requests()[0].Header.Get("Authorization") == "changed" {
		t.Error("an accessor returned the recorder's own memory")
	}
}

func TestFaultSwitches(t *testing.T) {
	ctx := testutil.Context(t)
	s := Start(t)
	tok := s.Token()
	post(t, s, tok, "/proxy/register", reg)

	s.Down()
	_, _, err := tryPost(ctx, s.URL(), tok, "/proxy/register", reg)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("while down: %v, want connection refused", err)
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	if st, _ := post(t, s, tok, "/proxy/step", `{"proxyId":"p1","seq":1}`); st != 200 {
		t.Errorf("after Up on the same port, a registered proxy is still known: %d", st)
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if st, _ := post(t, s, tok, "/proxy/step", `{"proxyId":"p1","seq":2}`); st != 404 {
		t.Errorf("after Restart: %d, want 404", st)
	}
	post(t, s, tok, "/proxy/register", reg)
	if st, _ := post(t, s, tok, "/proxy/step", `{"proxyId":"p1","seq":1}`); st != 200 || s.Duplicates() != 1 {
		t.Errorf("a restarted recorder still knows the steps it stored: %d, duplicates %d", st, s.Duplicates())
	}

	s.Forget()
	if st, _ := post(t, s, tok, "/proxy/step", `{"proxyId":"p1","seq":3}`); st != 404 {
		t.Errorf("after Forget: %d, want 404", st)
	}
	post(t, s, tok, "/proxy/register", reg)

	s.Fail(503)
	if st, _ := post(t, s, tok, "/proxy/register", reg); st != 503 {
		t.Errorf("Fail(503): %d", st)
	}
	s.Fail(0)

	s.WrongToken(true)
	if st, _ := post(t, s, tok, "/proxy/register", reg); st != 401 {
		t.Errorf("WrongToken: %d", st)
	}
	s.WrongToken(false)
	s.SetToken("new")
	if st, _ := post(t, s, "new", "/proxy/register", reg); st != 200 || s.Token() != "new" {
		t.Errorf("SetToken: %d", st)
	}

	s.Slow(30 * time.Millisecond)
	start := time.Now()
	post(t, s, "new", "/proxy/register", reg)
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("Slow(30ms) answered after %v", took) // a lower bound: never flaky
	}
}

// A held poll ends when the recorder goes down, not when waitMs is over.
func TestPollEndsWhenDown(t *testing.T) {
	s := Start(t)
	post(t, s, s.Token(), "/proxy/register", reg)
	done := make(chan error, 1)
	go func() {
		_, _, err := tryPost(context.Background(), s.URL(), s.Token(), "/proxy/poll", `{"proxyId":"p1","waitMs":600000}`)
		done <- err
	}()
	if _, err := s.Wait(testutil.Context(t), func(v Snapshot) bool { return v.Polling == 1 }); err != nil {
		t.Fatal(err)
	}
	s.Down()
	testutil.Recv(t, done, "the held poll to end") // with an error or an empty answer, not after ten minutes
	if _, err := s.Wait(testutil.Context(t), func(v Snapshot) bool { return v.Polling == 0 }); err != nil {
		t.Fatal(err)
	}
}

func TestWaitAndDiscoveryFile(t *testing.T) {
	s := Start(t)
	ctx := testutil.Context(t)
	go func() {
		for _, r := range [][2]string{
			{"/proxy/register", reg},
			{"/proxy/step", `{"proxyId":"p1","seq":1}`},
			{"/proxy/step", `{"proxyId":"p1","seq":2}`},
		} {
			tryPost(ctx, s.URL(), s.Token(), r[0], r[1])
		}
	}()
	steps, err := s.WaitSteps(ctx, 2)
	if err != nil || len(steps) != 2 {
		t.Fatalf("WaitSteps: %v %v", steps, err)
	}
	short, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, err := s.WaitSteps(short, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitSteps with a done context: %v", err)
	}

	dir := t.TempDir()
	path, err := s.WriteDiscoveryFile(dir)
	if err != nil || path != filepath.Join(dir, ".bir", "recorder.json") {
		t.Fatalf("WriteDiscoveryFile: %q %v", path, err)
	}
	b, _ := os.ReadFile(path)
	var df struct {
		URL   string `json:"url"`
		Token string `json:"token"`
		PID   int    `json:"pid"`
	}
	if err := json.Unmarshal(b, &df); err != nil || df.URL != s.URL() || df.Token != s.Token() || df.PID != os.Getpid() {
		t.Errorf("discovery file %s: %v", b, err)
	}
}
