package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// hostileRecorder is a scripted recorder for the replay hardening tests: it answers
// register and step POSTs 200, answers each poll with the next body a test queued
// (raw bytes, exactly as queued; a poll with nothing queued is held until something
// is or the proxy gives up on it), and keeps what was posted to /proxy/result. It is
// the recorder as a hostile peer sees it: nothing it sends is checked.
type hostileRecorder struct {
	srv   *httptest.Server
	token string

	// resultStatus answers a POST /proxy/result (200 when nil); it may block until
	// its request's context ends (a recorder that never takes results).
	resultStatus func(r *http.Request) int
	// flood, when set, makes the body of a poll that finds nothing queued (n counts
	// polls from 1); nil from it holds the poll as usual.
	flood func(n int) []byte

	mu        sync.Mutex
	answers   [][]byte
	polls     int
	results   [][]byte
	resultsIn int // results POSTed, whatever the answer
	changed   chan struct{}
	closed    chan struct{}
}

func startHostileRecorder(t *testing.T, resultStatus func(r *http.Request) int) *hostileRecorder {
	t.Helper()
	h := &hostileRecorder{token: "hostile-token", resultStatus: resultStatus, changed: make(chan struct{}), closed: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(func() {
		close(h.closed) // held polls and results end, so Close does not wait on them
		h.srv.Close()
	})
	return h
}

// env points a proxy at the recorder, recording on.
func (h *hostileRecorder) env(t *testing.T) []string {
	return []string{"BIR_OFF=0", "BIR_RECORDER_URL=" + h.srv.URL, "BIR_RECORDER_TOKEN=" + h.token, "XDG_STATE_HOME=" + t.TempDir()}
}

// answer queues the body of a later poll answer.
func (h *hostileRecorder) answer(body []byte) {
	h.mu.Lock()
	h.answers = append(h.answers, body)
	h.signalLocked()
	h.mu.Unlock()
}

func (h *hostileRecorder) signalLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// wait waits until cond (called under the lock) holds.
func (h *hostileRecorder) wait(ctx context.Context, t *testing.T, what string, cond func(h *hostileRecorder) bool) {
	t.Helper()
	for {
		h.mu.Lock()
		ok := cond(h)
		ch := h.changed
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			h.mu.Lock()
			var got []string
			for _, r := range h.results {
				got = append(got, string(r))
			}
			polls := h.polls
			h.mu.Unlock()
			t.Fatalf("waiting for %s: %v (after %d polls; results: %s)", what, ctx.Err(), polls, strings.Join(got, " "))
		}
	}
}

// resultFor is the last result posted for dispatch id (nil: none yet); call under
// the lock (from wait's cond) or via resultOf.
func (h *hostileRecorder) resultFor(id string) []byte {
	for i := len(h.results) - 1; i >= 0; i-- {
		if bytes.Contains(h.results[i], []byte(`"dispatchId":"`+id+`"`)) {
			return h.results[i]
		}
	}
	return nil
}

// waitResults waits until every id has a result and returns them.
func (h *hostileRecorder) waitResults(ctx context.Context, t *testing.T, ids ...string) map[string]string {
	t.Helper()
	h.wait(ctx, t, "results of "+strings.Join(ids, ","), func(h *hostileRecorder) bool {
		for _, id := range ids {
			if h.resultFor(id) == nil {
				return false
			}
		}
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]string{}
	for _, id := range ids {
		out[id] = string(h.resultFor(id))
	}
	return out
}

func (h *hostileRecorder) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("Authorization") != "Bearer "+h.token {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/proxy/poll":
		h.mu.Lock()
		h.polls++
		h.signalLocked()
		if len(h.answers) == 0 && h.flood != nil {
			if b := h.flood(h.polls); b != nil {
				h.mu.Unlock()
				_, _ = w.Write(b)
				return
			}
		}
		for len(h.answers) == 0 {
			ch := h.changed
			h.mu.Unlock()
			select {
			case <-ch:
			case <-r.Context().Done():
				return
			case <-h.closed:
				return
			}
			h.mu.Lock()
		}
		a := h.answers[0]
		h.answers = h.answers[1:]
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(a)
	case "/proxy/result":
		h.mu.Lock()
		h.resultsIn++
		h.signalLocked()
		h.mu.Unlock()
		status := http.StatusOK
		if h.resultStatus != nil {
			status = h.resultStatus(r)
		}
		if status == http.StatusOK {
			h.mu.Lock()
			h.results = append(h.results, body)
			h.signalLocked()
			h.mu.Unlock()
		}
		w.WriteHeader(status)
	case "/proxy/register":
		_, _ = w.Write([]byte(`{"ok":true}`))
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// replayServerSession is a proxy over rawserver (answering, logging what it
// receives) recording to a hostile recorder, with the host's handshake done.
type replayServerSession struct {
	*testHost
	record string
}

func startHostileReplay(t *testing.T, h *hostileRecorder, rawArgs ...string) *replayServerSession {
	t.Helper()
	raw := testutil.Build(t, "./testdata/rawserver")
	record := filepath.Join(t.TempDir(), "received")
	args := append([]string{"--server", "hostile", "--", raw, "--reply", "--record", record}, rawArgs...)
	s := startProxy(t, h.env(t), args...)
	s.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test-host","version":"0.0.1"}}}`)
	if got := s.recv(); !strings.Contains(got, `"serverInfo"`) {
		t.Fatalf("initialize answered %s", got)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return &replayServerSession{testHost: s, record: record}
}

// received is every line the server has received so far.
func (s *replayServerSession) received() []string {
	data, _ := os.ReadFile(s.record)
	lines := strings.Split(string(data), "\n")
	return lines[:len(lines)-1]
}
