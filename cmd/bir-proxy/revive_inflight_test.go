package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReviveSoakInFlight is TestReviveSoak with 2 and with 8 calls in flight: a host
// that does not wait for each answer before its next call. While a crashed server is
// being replaced, what the host sends must wait for the new server, not fail: only the
// calls the dead server had received (at most those in flight, and the one that made
// it crash) may be answered with an error.
//
// The listen subtests are the same soak in the stateless era with a
// subscriptions/listen stream open throughout (SPEC §7, docs/revive.md "Listen
// streams"): each new server gets the stream again, the stream is never answered (no
// error), its same-filter acknowledgment is kept back, and after each revival the host
// gets one notifications/tools/list_changed on it.
func TestReviveSoakInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	for _, inFlight := range []int{2, 8} {
		for _, listen := range []bool{false, true} {
			name := strconv.Itoa(inFlight)
			if listen {
				name += "/listen"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				reviveSoakInFlight(t, inFlight, listen)
			})
		}
	}
}

// soakListen is the listen stream the listen soak keeps open: it asks for tool list
// changes, and rawserver acknowledges it with the same filter.
const (
	soakListenID = `"soak-listen"`
	soakListen   = `{"jsonrpc":"2.0","id":` + soakListenID + `,"method":"subscriptions/listen","params":{` + listenMeta + `,"notifications":{"toolsListChanged":true}}}`
)

func reviveSoakInFlight(t *testing.T, inFlight int, listen bool) {
	f := newReviveFixture(t)
	// Recording to the journal: a call held back from a dead server and answered by the
	// next one must be reported once, as answered, not as lost.
	state := t.TempDir()
	env := []string{"BIR_OFF=0", "XDG_STATE_HOME=" + state, "BIR_RECORDER_URL="}
	s := startProxyIn(t, t.TempDir(), env, f.args([]string{"--log-level", "debug"}, "--reply", "--crash-every", "50", "--exit-code", "1")...)
	// The call's params: the stateless era's carry its _meta (no initialize).
	params := ""
	if listen {
		params = listenMeta + ","
		s.Send(soakListen)
		// Its acknowledgment first (each read is bounded by testutil.Guard).
		if ack, err := s.out.Read(); err != nil || !strings.Contains(string(ack), `"notifications/subscriptions/acknowledged"`) {
			t.Fatalf("the listen stream's first acknowledgment: %s, %v (stderr: %s)", ack, err, s.Stderr.String())
		}
	} else {
		s.setUp()
	}
	pid := s.Cmd.Process.Pid
	const calls = 5000
	const first = 100
	// The host: a call goes as soon as fewer than inFlight are unanswered. Sends run
	// on their own goroutine so that reading answers never waits on a write.
	slots := make(chan struct{}, inFlight)
	sent := make(chan error, 1)
	go func() {
		for i := 1; i <= calls; i++ {
			slots <- struct{}{}
			if _, err := fmt.Fprintf(s.Stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s"name":"echo","arguments":{"n":%d}}}`+"\n", first+i, params, i); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	var errs int
	var errRuns []string
	kinds := map[string]int{} // error messages, by their start
	answered := make(map[int]bool)
	var streamNotes []string // the notifications the listen stream got
	var early, late procUsage
	for len(answered) < calls {
		msg, err := s.out.Read()
		if err != nil {
			t.Fatalf("after %d answers: %v (stderr: %s)", len(answered), err, s.Stderr.String())
		}
		checkHostLine(t, msg)
		idText, ok := jsonID(msg)
		if !ok {
			if listen {
				streamNotes = append(streamNotes, string(msg))
			}
			continue // a notification
		}
		if idText == soakListenID {
			t.Fatalf("after %d answers the listen stream was answered: %s", len(answered), msg)
		}
		id, err := strconv.Atoi(idText)
		if err != nil || id <= first || id > first+calls {
			t.Fatalf("an answer with an id the host never used: %s", msg)
		}
		if answered[id] {
			t.Fatalf("a second answer to call %d: %s", id, msg)
		}
		answered[id] = true
		<-slots
		if isError(string(msg)) {
			errs++
			var e struct{ Error struct{ Message string } }
			json.Unmarshal(msg, &e)
			kinds[e.Error.Message[:min(60, len(e.Error.Message))]]++
			if len(errRuns) < 5 {
				errRuns = append(errRuns, string(msg))
			}
		} else if !echoes(msg, id-first) {
			t.Fatalf("the answer to call %d does not echo its arguments: %s", id, msg)
		}
		// The least over a window of answers: with calls in flight a sample can fall
		// inside a restart, while one server's pipes close and the next one's open.
		// Wide windows (20 crashes each): on a loaded machine a dying server's
		// teardown can outlast the 50 calls between two crashes.
		switch n := len(answered); {
		case n >= 1000 && n < 2000 && n%10 == 0:
			early = leastUsage(early, procUsageOf(t, pid))
		case n >= calls-1010 && n < calls-10 && n%10 == 0:
			late = leastUsage(late, procUsageOf(t, pid))
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("sending: %v", err)
	}
	// Each server dies on the 50th call it receives; a call it had in its pipe when it
	// died is its loss too, so the calls that got through make the crash count.
	crashes := len(f.startPids(t)) - 1
	if want := (calls - errs) / 50; crashes < want-1 {
		t.Fatalf("%d crashes for %d calls answered, want about %d: the fixture did not crash as told", crashes, calls-errs, want)
	}
	if listen {
		t.Logf("%d in flight: %d tools/list_changed on the listen stream over %d crashes", inFlight, checkSoakStream(t, streamNotes, crashes), crashes)
	}
	if max := crashes * (inFlight + 1); errs > max {
		t.Errorf("%d of %d calls answered with an error over %d crashes, want at most %d (calls in flight + 1 per crash); some: %q", errs, calls, crashes, max, errRuns)
	}
	// At most one server's worth more (its three pipes and pidfd, and one spare): on a
	// loaded machine a dying server's teardown (the supervisor ends its descendants)
	// outlasts the 50 calls to the next crash, so one is always going; a leak would
	// keep one for each of the 60 crashes between the windows.
	if late.fds > early.fds+5 || late.threads > early.threads+2 {
		t.Errorf("the proxy grew: after 1,000 calls %+v, after 5,000 %+v", early, late)
	}
	gs := goroutineCounts(s.Stderr.String())
	if len(gs) < 40 {
		t.Fatalf("%d revival lines with goroutine counts", len(gs))
	}
	if first, last := maxOf(gs[:20]), maxOf(gs[len(gs)-20:]); last > first+3 {
		t.Errorf("goroutines grew from %d to %d across revivals", first, last)
	}
	t.Logf("%d in flight: %d errors over %d crashes (%d calls): %v", inFlight, errs, crashes, calls, kinds)
	s.Stdin.Close()
	s.ExitCode() // the last server's status: it may have just crashed
	data, err := os.ReadFile(filepath.Join(state, "bir-proxy", "journal", "raw.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	outcomes := make(map[string]int)
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r struct{ Outcome string }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("journal line %q: %v", l, err)
		}
		outcomes[r.Outcome]++
	}
	if outcomes["ok"] != calls-errs || outcomes["upstream_lost"] != errs || len(outcomes) != 2 {
		t.Errorf("journal outcomes %v, want ok %d and upstream_lost %d", outcomes, calls-errs, errs)
	}
}

// checkSoakStream: the listen soak's stream got only tools/list_changed on it, one per
// revival (the last revival's may come after the last answer), and no acknowledgment
// (each new server's has the same filter: the proxy's to keep).
func checkSoakStream(t *testing.T, notes []string, crashes int) (changed int) {
	t.Helper()
	for _, m := range notes {
		var note streamNote
		if err := json.Unmarshal([]byte(m), &note); err != nil {
			t.Fatal(err)
		}
		if note.Method != "notifications/tools/list_changed" || note.sid() != soakListenID {
			t.Errorf("the host got %s, want only notifications/tools/list_changed on stream %s", m, soakListenID)
			continue
		}
		changed++
	}
	if changed < crashes-1 || changed > crashes {
		t.Errorf("%d tools/list_changed on the stream over %d crashes, want one per revival", changed, crashes)
	}
	return changed
}

// echoes reports whether a tools/call answer from rawserver's echo carries the
// arguments {"n":n} it was called with.
func echoes(msg []byte, n int) bool {
	var a struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if json.Unmarshal(msg, &a) != nil || len(a.Result.Content) == 0 {
		return false
	}
	return strings.Contains(a.Result.Content[0].Text, `"n":`+strconv.Itoa(n)+`}`)
}

// leastUsage is the smaller of two samples, field by field (a zero a is none yet).
func leastUsage(a, b procUsage) procUsage {
	if a == (procUsage{}) {
		return b
	}
	return procUsage{fds: min(a.fds, b.fds), threads: min(a.threads, b.threads)}
}
