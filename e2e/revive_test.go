package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// listenResult is what host/listen-host.mjs wrote: the steps it finished, the server
// pids whoami gave, every tools/list_changed the SDK dispatched (with the step it came
// in and its subscription id), how the subscription ended if it did before the host
// closed it, the raw lines the server side wrote, and the errors the client saw.
type listenResult struct {
	Steps []string `json:"steps"`
	Pids  []int    `json:"pids"`
	Notes []struct {
		Step           string  `json:"step"`
		Method         string  `json:"method"`
		SubscriptionID *string `json:"subscriptionId"`
	} `json:"notes"`
	HonoredFilter map[string]any `json:"honoredFilter"`
	ClosedEarly   *struct {
		Step  string `json:"step"`
		Cause string `json:"cause"`
	} `json:"closedEarly"`
	OpenAtClose bool     `json:"openAtClose"`
	Tools       []string `json:"tools"`
	Errors      []string `json:"errors"`
	FailedStep  *string  `json:"failedStep"`
	Lines       []struct {
		Step string `json:"step"`
		Line string `json:"line"`
	} `json:"lines"`
}

// runListenHost runs host/listen-host.mjs against the listen server through the
// proxy with the given flags, and returns what it wrote and its stderr.
func (s *suite) runListenHost(t *testing.T, proxy string, flags ...string) (*listenResult, string, error) {
	t.Helper()
	args := []string{"--", proxy, "--server", "listen"}
	args = append(args, flags...)
	args = append(args, "--", s.node, filepath.Join(s.dir, "servers", "listen-server.mjs"))
	return s.runListenHostWith(t, args, nil)
}

// runListenHostWith runs host/listen-host.mjs with args after its --out. With restart
// set, the host is run with --restart-by-parent: its stdout's `restart PID` line calls
// restart(PID, stderr) (stderr: what the host and the proxy wrote on stderr so far),
// and the host is answered `restarted` on its stdin when that returns nil (an error
// fails the test).
func (s *suite) runListenHostWith(t *testing.T, args []string, restart func(pid int, stderr func() string) error) (*listenResult, string, error) {
	t.Helper()
	tmp := t.TempDir()
	out := filepath.Join(tmp, "result.json")
	argv := []string{filepath.Join(s.dir, "host", "listen-host.mjs"), "--out", out}
	if restart != nil {
		argv = append(argv, "--restart-by-parent")
	}
	argv = append(argv, args...)
	select {
	case s.slots <- struct{}{}:
	case <-t.Context().Done():
		t.Fatalf("e2e: waiting for a host slot: %v", t.Context().Err())
	}
	cmd := exec.CommandContext(testutil.Context(t), s.node, argv...)
	cmd.Dir = tmp
	cmd.Env = append(hostEnv(), "XDG_STATE_HOME="+filepath.Join(tmp, "state"))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	var restartErr error
	var runErr error
	if restart == nil {
		runErr = cmd.Run()
	} else {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting the listen host: %v", err)
		}
		// The host's stdout carries only its requests to restart; it ends when the
		// host exits (or is killed at the test's deadline).
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			pidText, ok := strings.CutPrefix(sc.Text(), "restart ")
			pid, err := strconv.Atoi(pidText)
			if !ok || err != nil {
				restartErr = fmt.Errorf("the listen host wrote %q on stdout, want `restart PID`", sc.Text())
				break
			}
			if restartErr = restart(pid, stderr.String); restartErr != nil {
				break
			}
			if _, err := io.WriteString(stdin, "restarted\n"); err != nil {
				restartErr = fmt.Errorf("telling the listen host: %v", err)
				break
			}
		}
		stdin.Close()
		if restartErr != nil {
			_ = cmd.Process.Kill()
		}
		_, _ = io.Copy(io.Discard, stdout)
		runErr = cmd.Wait()
	}
	<-s.slots
	if restartErr != nil {
		t.Fatalf("restarting the server for the listen host: %v\nits stderr ends:\n%s", restartErr, tail(stderr.String(), 40))
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the listen host wrote no result (%v; its exit: %v); its stderr ends:\n%s", err, runErr, tail(stderr.String(), 40))
	}
	var r listenResult
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("decoding the listen host's result: %v\n%s", err, data)
	}
	return &r, stderr.String(), runErr
}

// checkOneAckNoAnswer checks what the listen host read across a replaced server: one
// acknowledgment (the new server's, same filter, kept back) and no answer for the
// stream's id (it was carried, not ended).
func checkOneAckNoAnswer(t *testing.T, r *listenResult) {
	t.Helper()
	acks := 0
	for _, l := range r.Lines {
		if strings.Contains(l.Line, `"notifications/subscriptions/acknowledged"`) {
			acks++
		}
		if strings.Contains(l.Line, `"id":"listen:0"`) {
			t.Errorf("in step %q the host got an answer for its listen stream: %s", l.Step, l.Line)
		}
	}
	if acks != 1 {
		t.Errorf("the host got %d acknowledgments, want 1 (the new server's has the same filter and is kept back)", acks)
	}
}

// lockedBuffer is a bytes.Buffer that can be read while a process writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSDKListenStreamOutlivesServerRevival: the official SDK 2.4.0 client (stateless
// era, Client.listen with toolsListChanged) keeps its subscriptions/listen stream open
// through bir-proxy while the SDK 2.4.0 stdio server (serveStdio) is killed with
// SIGKILL (SPEC §7, docs/revive.md "Listen streams"). The proxy revives the server and
// sends it the stream again; the host's subscription never ends and gets no error, it
// gets the new server's acknowledgment only if its filter differs (it does not here:
// one acknowledgment in all), then the proxy's notifications/tools/list_changed for the
// stream, and then one the NEW server emits when a tool is registered on it.
//
// The same host with --no-revive loses the subscription when the server dies: that is
// what the test would see if the proxy did not carry the stream.
func TestSDKListenStreamOutlivesServerRevival(t *testing.T) {
	s := newSuite(t)
	proxy := testutil.BuildRace(t, "./cmd/bir-proxy")

	t.Run("revived", func(t *testing.T) {
		t.Parallel()
		r, stderr, err := s.runListenHost(t, proxy)
		if err != nil || r.FailedStep != nil {
			t.Fatalf("the listen host failed (%v) in step %v: %s\nits stderr ends:\n%s", err, derefOr(r.FailedStep, "?"), strings.Join(r.Errors, "\n"), tail(stderr, 40))
		}
		if len(r.Errors) > 0 {
			t.Errorf("the SDK client reported errors: %s", strings.Join(r.Errors, "\n"))
		}
		if r.HonoredFilter["toolsListChanged"] != true {
			t.Errorf("the server did not honour toolsListChanged: %v", r.HonoredFilter)
		}
		// The subscription ended only when the host closed it, locally.
		if !r.OpenAtClose || r.ClosedEarly == nil || r.ClosedEarly.Step != "close" || r.ClosedEarly.Cause != "local" {
			t.Errorf("the subscription did not stay open until the host closed it: openAtClose=%v closed=%+v", r.OpenAtClose, r.ClosedEarly)
		}
		if len(r.Pids) != 2 || r.Pids[0] == r.Pids[1] {
			t.Errorf("whoami before and after the kill gave pids %v, want two different ones (a revived server)", r.Pids)
		}
		if !strings.Contains(stderr, "revived the server") {
			t.Errorf("the proxy did not log a revival; stderr ends:\n%s", tail(stderr, 20))
		}
		// Exactly two list_changed, both on the stream: the proxy's after the revival,
		// then the new server's after add-tool.
		wantSteps := []string{"list_changed after the revival", "add-tool on the new server"}
		var got []string
		for i, n := range r.Notes {
			got = append(got, n.Step)
			if n.Method != "notifications/tools/list_changed" || n.SubscriptionID == nil || *n.SubscriptionID != "listen:0" {
				t.Errorf("list_changed #%d: %+v, want notifications/tools/list_changed with subscriptionId listen:0 (got %v)", i+1, n, derefOr(n.SubscriptionID, "<none>"))
			}
		}
		if !slices.Equal(got, wantSteps) {
			t.Errorf("list_changed arrived in steps %q, want exactly %q", got, wantSteps)
		}
		if !slices.Contains(r.Tools, "extra") {
			t.Errorf("tools/list after add-tool: %v, want it to have extra", r.Tools)
		}
		checkOneAckNoAnswer(t, r)
	})

	t.Run("no-revive", func(t *testing.T) {
		t.Parallel()
		r, stderr, err := s.runListenHost(t, proxy, "--no-revive")
		if err == nil || r.FailedStep == nil {
			t.Fatalf("with --no-revive the host finished (steps %v): the revived case proves nothing\nits stderr ends:\n%s", r.Steps, tail(stderr, 20))
		}
		if r.ClosedEarly == nil || r.ClosedEarly.Cause != "remote" {
			t.Errorf("with --no-revive the subscription ended %+v, want cause remote (the server went away)", r.ClosedEarly)
		}
	})
}
